"""`hakiri context tables|show|history`: what is in the store, read from the log and a few rows."""

from __future__ import annotations

import subprocess
import sys

from tests.integration.context_cli.conftest import ContextProject, orders


def test_tables_lists_every_store_with_rows_versions_and_files(project: ContextProject) -> None:
    project.write(
        "hakiri.toml",
        """
        [project]
        name = "context-cli"

        [[pipeline]]
        id = "events"
        source = { connector = "files", config = { path = "data/*.csv" } }
        tables = ["events"]
        destination = { connector = "context", config = { path = "lake" } }
        """,
    )
    for batch in ([1, 2], [3, 4], [5, 6]):
        project.delta("orders", orders(*batch))
    project.delta("people", orders(1))
    project.delta("events", orders(7, 8, 9), store="lake")
    project.delta("x", orders(1), store=".hakiri/context/_staging")  # the store's own: not a table
    (project.root / ".hakiri/context/half/_delta_log").mkdir(parents=True)  # no commit yet

    listing = project.json("tables")

    assert listing["stores"] == [
        str((project.root / ".hakiri/context").resolve()),
        str((project.root / "lake").resolve()),
    ]
    by_name = {t["name"]: t for t in listing["tables"]}
    assert list(by_name) == ["orders", "people", "events"]
    assert by_name["orders"]["version"] == 2
    assert by_name["orders"]["rows"] == 6
    assert by_name["orders"]["files"] == 3
    assert by_name["orders"]["size_bytes"] > 0
    assert by_name["orders"]["last_operation"] == "WRITE"
    assert by_name["orders"]["last_commit_at"].endswith("+00:00")
    assert by_name["orders"]["error"] is None
    assert by_name["events"]["path"].endswith("lake/events")
    assert (by_name["events"]["rows"], by_name["people"]["version"]) == (3, 0)

    human = project.cli("tables")
    assert human.exit_code == 0 and human.stderr == ""
    assert "orders" in human.stdout and "events" in human.stdout and "_staging" not in human.stdout


def test_tables_on_an_empty_store(project: ContextProject) -> None:
    result = project.cli("tables")
    assert result.exit_code == 0
    assert "no tables in the context store" in result.stderr
    assert project.json("tables")["tables"] == []


def test_show_reads_the_first_rows_as_json_safe_values(project: ContextProject) -> None:
    project.delta("orders", orders(1, 2, 3, 4))

    shown = project.json("show", "orders", "--limit", "2")

    assert set(shown) == {"table", "path", "version", "rows_total", "columns", "rows"}
    assert (shown["table"], shown["version"], shown["rows_total"]) == ("orders", 0, 4)
    assert [(c["name"], c["type"]) for c in shown["columns"]] == [
        ("id", "long"),
        ("amount", "decimal(10,2)"),
        ("at", "timestamp"),
        ("note", "string"),
        ("raw", "binary"),
    ]
    assert shown["rows"] == [
        {"id": 1, "amount": "1.50", "at": "2024-01-02T12:00:00+00:00", "note": None, "raw": "AAE="},
        {"id": 2, "amount": "2.50", "at": "2024-01-03T12:00:00+00:00", "note": "n2", "raw": "AAE="},
    ]

    human = project.cli("show", "orders", "--limit", "3")
    assert human.exit_code == 0
    assert "version 0" in human.stdout and "3 of 4 rows" in human.stdout
    for header in ("id", "amount", "at", "note", "raw"):
        assert header in human.stdout


def test_show_version_travels_back_before_an_overwrite(project: ContextProject) -> None:
    project.delta("orders", orders(1, 2))
    project.delta("orders", orders(9), mode="overwrite")

    assert [r["id"] for r in project.json("show", "orders")["rows"]] == [9]
    old = project.json("show", "orders", "--version", "0")
    assert old["version"] == 0
    assert [r["id"] for r in old["rows"]] == [1, 2]


def test_history_is_newest_first_with_hakiri_commit_metadata(project: ContextProject) -> None:
    for i, batch in enumerate(([1], [2], [3])):
        project.delta(
            "orders",
            orders(*batch),
            metadata={"hakiri.batch_id": f"b{i}", "hakiri.run_id": "r1", "other": "x"},
        )
    project.delta("orders", orders(4), mode="overwrite")

    history = project.json("history", "orders")

    assert set(history) == {"table", "path", "versions"}
    versions = history["versions"]
    assert [v["version"] for v in versions] == [3, 2, 1, 0]
    assert versions[0]["operation"] == "WRITE"
    assert versions[0]["parameters"]["mode"] == "Overwrite"
    assert versions[0]["metadata"] == {}
    assert versions[2]["metadata"] == {"hakiri.batch_id": "b1", "hakiri.run_id": "r1"}
    assert versions[2]["timestamp"].endswith("+00:00")
    assert set(versions[2]) == {
        "version",
        "timestamp",
        "operation",
        "parameters",
        "metrics",
        "metadata",
    }

    assert [
        v["version"] for v in project.json("history", "orders", "--limit", "2")["versions"]
    ] == [3, 2]
    human = project.cli("history", "orders")
    assert human.exit_code == 0 and "batch_id=b1" in human.stdout


def test_help_imports_neither_deltalake_nor_pyarrow() -> None:
    code = (
        "import sys\n"
        "from typer.testing import CliRunner\n"
        "from hakiri.cli.main import app\n"
        "for args in (['--help'], ['context', '--help'], ['context', 'show', '--help']):\n"
        "    assert CliRunner().invoke(app, args).exit_code == 0, args\n"
        "print(sorted(m for m in ('deltalake', 'pyarrow', 'pyspark') if m in sys.modules))\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.strip() == "[]"
