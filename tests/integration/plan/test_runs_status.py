"""`hakiri runs` and `hakiri status` read what the catalog recorded, on both backends."""

from __future__ import annotations

import json
from datetime import timedelta

from typer.testing import CliRunner

from hakiri.catalog.records import NewBatch, Phase, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.cli.main import app
from hakiri.services.status import pipeline_status
from hakiri.sources.cursors.ranges import CursorRange


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
    assert "DestinationUnreachable: connection refused" in text.stdout
    assert "1,200 rows" in text.stdout


def test_status_shape_for_one_pipeline(plan_project) -> None:
    _record_history(plan_project)
    result = cli(plan_project, "status", "orders", "--json")
    assert result.exit_code == 0, result.stderr
    status = json.loads(result.stdout)
    assert status["pipeline_id"] == "orders" and status["phase"] == "backfilling"
    assert status["chunks"] == {
        "done": 2,
        "running": 1,
        "pending": 2,
        "failed": 0,
        "superseded": 0,
        "gone": 0,
        "total": 5,
    }
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
        "rate_budget",
        "last_error",
        "retired",
        "warnings",
        "last_runs",
        "cursors",
        "cdc",
        "drift",
    }
    # the failed run recorded by _record_history is the last error
    assert status["last_error"]["message"] is not None
    assert (status["retired"], status["warnings"]) == ([], [])
    assert status["rate_budget"] is None  # orders has no [pipeline.backfill]
    # the five chunks were planned together: the backfill started when they were added
    assert status["started_at"] is not None


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


def test_status_throughput_and_eta_of_the_running_run(plan_project) -> None:
    running = _record_history(plan_project)
    with Catalog.open(plan_project.catalog_url, migrate=False) as catalog:
        [run] = [r for r in catalog.runs("orders") if r.run_id == running]
    later = run.started_at + timedelta(seconds=100)
    [status] = pipeline_status(plan_project.root, ["orders"], env=plan_project.env, now=later)
    # 2 chunks of 100 rows committed in 100 s; 3 left (1 running, 2 pending) at 50 s each
    assert status["throughput"] == {"rows_per_sec": 2.0, "bytes_per_sec": None}
    assert status["eta_seconds"] == 150

    text = cli(plan_project, "status", "orders")
    assert text.exit_code == 0, text.stderr
    assert "phase backfilling" in text.stdout
    assert "batches 2/5 done (1 running, 2 pending, 0 failed)" in text.stdout
    assert "rows/s, eta " in text.stdout


def _chunk(lo: int, hi: int) -> str:
    return CursorRange("id", "numeric", "bigint", lo, hi).to_predicate()


def test_a_superseded_generation_is_history_not_work(plan_project) -> None:
    """Three chunks loaded, then the middle one re-added at generation 1 (as a rewind does)."""
    manifest = plan_project.root / "hakiri.toml"
    text = manifest.read_text()
    upsert = 'load = { mode = "upsert", upsert_key = ["id"] }\n'
    assert upsert in text
    manifest.write_text(text.replace(upsert, upsert + 'backfill = { rate_budget = "60/min" }\n'))
    with Catalog.open(plan_project.catalog_url, migrate=True) as catalog:
        catalog.record_applied("orders", {"id": "orders"}, "sha256:x", Phase.STREAMING)
        first = catalog.start_run("orders")
        catalog.add_batches(
            "orders",
            [
                NewBatch(f"chunk:orders:g0:{i}", "orders", "chunk", predicate=_chunk(i, i + 10))
                for i in (0, 10, 20)
            ],
        )
        while (claimed := catalog.claim_batch("orders", "w", 60, run_id=first.run_id)) is not None:
            catalog.mark_committed("orders", claimed.batch_id, "w", rows=10)
        catalog.finish_run(first.run_id, RunStatus.SUCCESS, row_count=30)
        catalog.set_phase("orders", Phase.BACKFILLING)
        catalog.add_batches(
            "orders",
            [
                NewBatch(
                    "chunk:orders:g1:10", "orders", "chunk", predicate=_chunk(10, 20), generation=1
                )
            ],
        )
        rewound = catalog.batch("orders", "chunk:orders:g1:10")
        assert rewound is not None and rewound.created_at is not None

    status = json.loads(cli(plan_project, "status", "orders", "--json").stdout)
    assert status["phase"] == "backfilling"
    # 4 batches in the catalog, but generation 0 of [10, 20) is history
    assert status["chunks"] == {
        "done": 2,
        "running": 0,
        "pending": 1,
        "failed": 0,
        "superseded": 0,
        "gone": 0,
        "total": 3,
    }
    assert status["started_at"] == rewound.created_at.isoformat()
    assert status["rate_budget"] == "60/min"
    assert status["eta_seconds"] is None  # nothing is running

    with Catalog.open(plan_project.catalog_url, migrate=True) as catalog:
        second = catalog.start_run("orders")
        claimed = catalog.claim_batch("orders", "w", 60, run_id=second.run_id)
        assert claimed is not None and claimed.generation == 1
        catalog.mark_committed("orders", claimed.batch_id, "w", rows=10)
        catalog.finish_run(second.run_id, RunStatus.SUCCESS, row_count=10)
    status = json.loads(cli(plan_project, "status", "orders", "--json").stdout)
    assert status["chunks"] == {
        "done": 3,
        "running": 0,
        "pending": 0,
        "failed": 0,
        "superseded": 0,
        "gone": 0,
        "total": 3,
    }
    assert status["started_at"] == rewound.created_at.isoformat()  # the rewind, all committed
    assert status["throughput"]["rows_per_sec"] > 0
