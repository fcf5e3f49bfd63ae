"""How serve steers a run (RunControls): a process-wide cap on chunks in flight, and a drain
that stops claiming. The runs are real: PostgreSQL source and target, the suite's Spark."""

from __future__ import annotations

import itertools
import threading
from pathlib import Path

from hakiri.catalog.store import Catalog
from hakiri.engine.controls import RunControls
from hakiri.engine.run_context import RunContext
from hakiri.services.apply import LazySpark, runner_for
from hakiri.spec.loader import load_project
from tests.support.tables import id_backfill_project

CHUNKS = 6


def _runner(root: Path, controls: RunControls, catalog: Catalog):
    project = load_project(root, {})
    spec = project.pipelines["p"]
    run = RunContext.of(project, {}, LazySpark(project, env={}).get)
    return runner_for(run, spec, catalog, 0.0, controls=controls)


def _project(tmp_path: Path, pg_url: str, pg_schema: str) -> Path:
    id_backfill_project(
        tmp_path, pg_url, pg_schema, chunks=CHUNKS, window=100, backfill="parallelism = 3"
    )
    return tmp_path


def test_one_permit_means_one_chunk_in_flight_whatever_the_parallelism(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    root = _project(tmp_path, pg_url, pg_schema)
    controls = RunControls(capacity=threading.BoundedSemaphore(1), trigger="schedule")
    with Catalog.open(f"sqlite:///{root / 'state.sqlite'}", migrate=True) as catalog:
        outcome = _runner(root, controls, catalog).run()
        chunks = sorted(catalog.batches("p"), key=lambda b: b.started_at)
        run = catalog.runs("p")[0]
    assert (outcome.status, outcome.rows, outcome.batches) == ("success", 100 * CHUNKS, CHUNKS)
    assert run.trigger == "schedule"
    # Claimed only once the previous chunk committed.
    for earlier, later in itertools.pairwise(chunks):
        assert earlier.committed_at <= later.started_at
    assert controls.capacity.acquire(blocking=False)  # every permit was given back


def test_without_a_cap_the_same_backfill_loads_chunks_side_by_side(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    root = _project(tmp_path, pg_url, pg_schema)
    with Catalog.open(f"sqlite:///{root / 'state.sqlite'}", migrate=True) as catalog:
        assert _runner(root, RunControls(), catalog).run().batches == CHUNKS
        chunks = sorted(catalog.batches("p"), key=lambda b: b.started_at)
    assert any(a.committed_at > b.started_at for a, b in itertools.pairwise(chunks))


def test_a_draining_run_claims_nothing_and_leaves_the_backfill_pending(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    root = _project(tmp_path, pg_url, pg_schema)
    draining = threading.Event()
    draining.set()
    with Catalog.open(f"sqlite:///{root / 'state.sqlite'}", migrate=True) as catalog:
        outcome = _runner(root, RunControls(draining=draining), catalog).run()
        counts = catalog.batch_counts("p")
        leases_free = catalog.acquire_lease("p", "someone-else", 10).acquired
    assert outcome.rows == 0 and outcome.remaining == CHUNKS
    assert "draining" in " ".join(outcome.notes)
    assert (counts.pending, counts.committed) == (CHUNKS, 0)
    assert leases_free
