"""The demo project at the repository root, applied as `make run` applies it: into the local Delta
context store, with no server. Row counts are checked with deltalake against the sample data;
`hakiri diff` of its per-file loads finds them identical, then names what was changed."""

from __future__ import annotations

import csv
import json
import re
import shutil
from pathlib import Path

from typer.testing import CliRunner

from hakiri.cli.main import app

REPO = Path(__file__).resolve().parents[2]
UUID = re.compile(r"^[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}$")


def expected() -> dict[str, tuple[int, int]]:
    """(rows in the table, records in its quarantine) per table, from the sample data itself."""
    orders = [
        row
        for path in sorted((REPO / "data" / "orders").glob("*.csv"))
        for row in csv.DictReader(path.open())
    ]
    negative = sum(1 for r in orders if float(r["amount"]) < 0)
    customers = list(csv.DictReader((REPO / "data" / "customers" / "customers.csv").open()))
    bad_emails = sum(1 for r in customers if not re.search(r"^[^@]+@[^@]+$", r["email"]))
    events = [
        json.loads(line)
        for line in (REPO / "data" / "events" / "events-2026-11-01.jsonl").read_text().splitlines()
    ]
    bad_ids = sum(1 for e in events if not UUID.match(e["event_id"]))
    return {
        "orders": (len({r["order_id"] for r in orders}) - negative, negative),
        "customers": (len(customers), bad_emails),  # warn: loaded and quarantined
        "events": (len(events) - bad_ids, bad_ids),
    }


def test_the_demo_project_applies_into_the_context_store_then_reports_no_changes(
    tmp_path: Path, spark
) -> None:
    root = tmp_path / "demo"
    root.mkdir()
    shutil.copy(REPO / "hakiri.toml", root)
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    shutil.copytree(REPO / "data", root / "data")
    shutil.copytree(REPO / "schemas", root / "schemas")

    def cli(*args: str):
        return CliRunner().invoke(app, [*args, "--project", str(root)], catch_exceptions=False)

    first = cli("apply")
    assert first.exit_code == 0, first.stderr
    for header in ("pipeline", "mode", "rows", "quarantined", "duration"):
        assert header in first.stdout

    from deltalake import DeltaTable

    store = root / ".hakiri" / "context"
    for table, (rows, quarantined) in expected().items():
        assert DeltaTable(store / table).count() == rows, table
        assert quarantined > 0, f"the sample data should exercise {table}'s rule"
    quarantine = {
        "orders": DeltaTable(store / "orders_quarantine").count(),
        "customers": DeltaTable(store / "customers_quarantine").count(),
        "events": DeltaTable(store / "events_quarantine").count(),
    }
    assert quarantine == {t: q for t, (_, q) in expected().items()}

    second = cli("apply")
    assert second.exit_code == 0, second.stderr
    assert "no changes" in second.stdout

    # What plan says after the apply is what apply just said: nothing to load, exit 0.
    planned = cli("plan", "--detailed-exitcode")
    assert planned.exit_code == 0, planned.stderr
    assert "3 unchanged" in planned.stdout and "data to load" not in planned.stdout

    # The per-file loads (orders: upsert, events: append) diff clean against the files
    # recorded as loaded; a row deleted by hand is named (exit 2); a loaded file that is gone
    # is named (exit 1).
    for pipeline in ("orders", "events"):
        same = cli("diff", pipeline, "--json")
        assert same.exit_code == 0, (pipeline, same.stdout, same.stderr)
    orders = DeltaTable(str(store / "orders"))
    key = orders.to_pyarrow_table().column("order_id")[0].as_py()
    orders.delete(f"order_id = {key}")
    changed = cli("diff", "orders", "--json")
    assert changed.exit_code == 2, changed.stderr
    assert f"{key}" in changed.stdout, changed.stdout
    loaded = sorted((root / "data" / "events").glob("*.jsonl"))[0]
    loaded.unlink()
    gone = cli("diff", "events")
    assert gone.exit_code == 1
    assert f"data/events/{loaded.name} is gone" in gone.stderr, gone.stderr
    assert "Traceback" not in gone.stderr
