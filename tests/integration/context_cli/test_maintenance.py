"""`hakiri context optimize|vacuum`: compaction adds a version; vacuum guards the retention."""

from __future__ import annotations

from typing import TYPE_CHECKING

from tests.integration.context_cli.conftest import ContextProject, orders

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


def test_optimize_compacts_small_files_into_a_new_version(
    project: ContextProject, spark: SparkSession
) -> None:
    # `spark`: the in-process command runs on the suite's session (a Spark Connect session in
    # this process would stop it from starting one of its own; see tests/conftest.py).
    for i in range(4):
        project.delta("orders", orders(i))

    done = project.json("optimize", "orders")

    assert done == {
        "table": "orders",
        "path": str(project.root / ".hakiri/context/orders"),
        "version_before": 3,
        "version": 4,
        "files_before": 4,
        "files_after": 1,
        "files_added": 1,
        "files_removed": 4,
    }
    assert (
        project.json("history", "orders", "--limit", "1")["versions"][0]["operation"] == "OPTIMIZE"
    )
    assert project.json("tables")["tables"][0]["rows"] == 4

    again = project.cli("optimize", "orders")
    assert again.exit_code == 0
    assert "nothing to compact" in again.stdout and "version stays 4" in again.stdout


def test_vacuum_refuses_a_retention_below_the_tables_without_force(project: ContextProject) -> None:
    project.delta("orders", orders(1, 2))
    project.delta("orders", orders(3), mode="overwrite")

    refused = project.cli("vacuum", "orders", "--retain-hours", "0", "--dry-run")

    assert refused.exit_code == 1
    assert "error: refusing to vacuum `orders` keeping only 0h" in refused.stderr
    assert "168h" in refused.stderr and "--force" in refused.stderr
    assert "Traceback" not in refused.stderr


def test_vacuum_dry_run_lists_then_vacuum_removes_the_old_files(project: ContextProject) -> None:
    location = project.delta("orders", orders(1, 2))
    first = {p.name for p in location.glob("*.parquet")}
    project.delta("orders", orders(3), mode="overwrite")

    planned = project.json("vacuum", "orders", "--retain-hours", "0", "--force", "--dry-run")

    assert planned == {
        "table": "orders",
        "path": str(location),
        "dry_run": True,
        "retain_hours": 0,
        "table_retention_hours": 168.0,
        "version": 1,
        "files": sorted(first),
    }
    assert first <= {p.name for p in location.glob("*.parquet")}  # a dry run deletes nothing

    human = project.cli("vacuum", "orders", "--retain-hours", "0", "--force")
    assert human.exit_code == 0
    assert "removed 1 file from orders" in human.stdout
    assert not first & {p.name for p in location.glob("*.parquet")}
    assert [r["id"] for r in project.json("show", "orders")["rows"]] == [3]

    gone = project.cli("show", "orders", "--version", "0")
    assert gone.exit_code == 1
    assert "a data file is missing" in gone.stderr and "hint:" in gone.stderr


def test_vacuum_within_the_retention_needs_no_force(project: ContextProject) -> None:
    project.delta("orders", orders(1))
    project.delta("orders", orders(2), mode="overwrite")

    kept = project.json("vacuum", "orders", "--retain-hours", "168", "--dry-run")
    assert kept["files"] == []
