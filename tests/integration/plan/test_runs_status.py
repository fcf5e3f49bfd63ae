"""`hakiri runs` and `hakiri status` read what the catalog recorded, on both backends."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from hakiri.catalog.records import NewBatch, Phase, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.cli.main import app


def cli(project, *args: str):
    return CliRunner().invoke(app, list(args), env=project.env, catch_exceptions=False)


def _record_history(project) -> str:
    """Two finished runs of orders, one running with 2 of 5 chunks done, a cursor."""
    with Catalog.open(project.catalog_url, migrate=True) as catalog:
        catalog.record_applied("orders", {"id": "orders"}, "sha256:x", Phase.BACKFILLING)
        first = catalog.start_run("orders")
        catalog.finish_run(first.run_id, RunStatus.SUCCESS, row_count=1200, bytes=4096)
        failed = catalog.start_run("orders")
        catalog.finish_run(
            failed.run_id,
            RunStatus.FAILED,
            error_kind="DestinationUnreachable",
            error_msg="connection refused",
        )
        current = catalog.start_run("orders")
        catalog.add_batches(
            "orders",
            [NewBatch(f"chunk-{i}", "orders", "chunk", predicate=f"id < {i}") for i in range(5)],
            run_id=current.run_id,
        )
        for _ in range(2):
            claimed = catalog.claim_batch("orders", "worker-1", 60, run_id=current.run_id)
            assert claimed is not None
            catalog.mark_committed("orders", claimed.batch_id, "worker-1", rows=100)
        assert catalog.claim_batch("orders", "worker-1", 60, run_id=current.run_id) is not None
        catalog.set_cursor("orders", "orders", {"id": 200})
        return current.run_id


def test_runs_lists_newest_first(plan_project) -> None:
    running = _record_history(plan_project)
    result = cli(plan_project, "runs", "orders", "--json")
    assert result.exit_code == 0, result.stderr
    runs = json.loads(result.stdout)
    assert [r["status"] for r in runs] == ["running", "failed", "success"]
    assert runs[0]["run_id"] == running and runs[0]["duration_seconds"] is None
    assert runs[2]["row_count"] == 1200 and runs[2]["duration_seconds"] >= 0
    assert runs[1]["error_msg"] == "connection refused"
    text = cli(plan_project, "runs")
    assert "DestinationUnreachable: connection refused" in text.stderr
    assert "1,200 rows" in text.stderr


def test_status_shape_for_one_pipeline(plan_project) -> None:
    _record_history(plan_project)
    result = cli(plan_project, "status", "orders", "--json")
    assert result.exit_code == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["pipeline_id"] == "orders" and status["phase"] == "backfilling"
    assert status["chunks"] == {"done": 2, "running": 1, "pending": 2, "failed": 0, "total": 5}
    assert status["cursors"] == {"orders": {"id": 200}}
    assert [r["status"] for r in status["last_runs"]] == ["running", "failed", "success"]
    assert status["throughput"]["rows_per_sec"] > 0
    assert status["eta_seconds"] is not None and status["eta_seconds"] >= 0
    assert set(status) == {
        "pipeline_id",
        "phase",
        "applied_at",
        "chunks",
        "throughput",
        "eta_seconds",
        "started_at",
        "last_runs",
        "cursors",
    }


def test_status_of_a_fresh_project_and_unknown_ids(plan_project) -> None:
    result = cli(plan_project, "status", "--json")
    assert result.exit_code == 0, result.stderr
    assert [
        (s["pipeline_id"], s["phase"], s["chunks"]["total"]) for s in json.loads(result.stdout)
    ] == [("orders", None, 0), ("events", None, 0)]
    assert not (plan_project.root / ".hakiri").exists()  # reading status never creates a catalog
    unknown = cli(plan_project, "status", "nope")
    assert unknown.exit_code == 1 and "error: no pipeline `nope`" in unknown.stderr
    assert cli(plan_project, "runs", "nope").exit_code == 1
    assert "no runs recorded yet" in cli(plan_project, "runs").stderr
