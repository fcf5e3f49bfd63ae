"""A view whose table's pipeline failed in this apply waits for the apply that loads it; the
others are recorded. No engine: the pipeline fails before it reads anything."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

from deltalake import DeltaTable
from typer.testing import CliRunner

from hakiri.cli.main import app

PROJECT = """
[project]
name = "held"

[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "data/orders/*.csv" } }
tables = ["orders"]
destination = { connector = "context" }
secrets = ["ORDERS_TOKEN"]

[[view]]
name = "order_ids"
sql = "SELECT id FROM orders"

[[view]]
name = "first_order"
sql = "SELECT min(id) AS id FROM order_ids"

[[view]]
name = "today"
sql = "SELECT current_date() AS day"
"""


def test_views_reading_a_failed_pipelines_table_are_held_back_and_the_rest_recorded(
    tmp_path: Path,
) -> None:
    (tmp_path / "hakiri.toml").write_text(textwrap.dedent(PROJECT))
    (tmp_path / "data" / "orders").mkdir(parents=True)
    (tmp_path / "data" / "orders" / "a.csv").write_text("id,total\n1,2\n")
    result = CliRunner().invoke(
        app, ["apply", "--json", "--project", str(tmp_path)], env={"ORDERS_TOKEN": ""}
    )
    assert result.exit_code == 1
    entries = json.loads(result.stdout)
    assert [(e.get("pipeline_id"), e["status"]) for e in entries if "pipeline_id" in e] == [
        ("orders", "failed")
    ]
    assert [(e["view"], e["status"]) for e in entries if "view" in e] == [
        ("order_ids", "held"),
        ("first_order", "held"),
        ("today", "created"),
    ]
    [first] = [e for e in entries if e.get("view") == "first_order"]
    assert first["warning"] == (
        "view first_order not created: it reads orders, whose pipeline orders failed; "
        "the next apply does it"
    )
    rows = DeltaTable(str(tmp_path / ".hakiri" / "context" / "_views")).to_pyarrow_table()
    assert rows.column("name").to_pylist() == ["today"]
