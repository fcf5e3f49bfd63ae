"""Claims: one run works a pipeline at a time, and what a dead run held is taken back once its
lease runs out (engine.leases, engine.runner). The catalog's own lease and claim primitives
are tested against SQLite and PostgreSQL in tests/integration/catalog."""

from __future__ import annotations

import threading
import time

import pytest

from hakiri.catalog.records import BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.engine.controls import Outcome, RunControls
from hakiri.engine.crash import SimulatedCrash, crashing_at
from hakiri.errors import LeaseHeld
from tests.unit.engine.conftest import Bench

ELSEWHERE = "another-host:4242:cafe"  # a holder on another host: only its lease's expiry frees it
ROWS = [{"id": 1, "name": "ada"}, {"id": 2, "name": "grace"}]


@pytest.fixture
def files(bench: Bench) -> Bench:
    bench.write("data/a.csv", "id,name\n1,ada\n")
    bench.write("data/b.csv", "id,name\n2,grace\n")
    return bench


def test_two_runs_of_one_pipeline_at_once_one_loads_the_other_is_refused(files: Bench) -> None:
    start = threading.Barrier(2)
    done: list[Outcome | BaseException] = []

    def run() -> None:
        with Catalog.open(files.catalog_url, migrate=True) as catalog:
            runner = files.runner(catalog)
            start.wait()
            try:
                done.append(runner.run())
            except LeaseHeld as exc:
                done.append(exc)

    threads = [threading.Thread(target=run) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()

    refused = [d for d in done if isinstance(d, LeaseHeld)]
    loaded = [d for d in done if isinstance(d, Outcome)]
    assert len(refused) == 1 and len(loaded) == 1, done
    assert "already running" in refused[0].reason
    assert loaded[0].status == "success" and loaded[0].batches == 2
    assert files.rows() == ROWS


def test_a_pipeline_lease_that_ran_out_is_taken_over(files: Bench) -> None:
    with Catalog.open(files.catalog_url, migrate=True) as catalog:
        assert catalog.acquire_lease("p", ELSEWHERE, ttl_seconds=0.3).acquired
        with pytest.raises(LeaseHeld):
            files.runner(catalog).run()
        assert files.rows() == []

        time.sleep(0.4)
        outcome = files.runner(catalog).run()

    assert outcome.status == "success" and files.rows() == ROWS


def test_a_claim_left_by_a_crashed_run_is_taken_back_only_once_it_expires(files: Bench) -> None:
    # Long enough for the next apply to start while the claim holds on a busy machine.
    ttl = 3.0
    with crashing_at("after_stage"), pytest.raises(SimulatedCrash):
        files.apply(RunControls(claim_ttl=ttl))
    crashed = time.monotonic()

    # Its holder may still be working (it is not known to be dead): the claim is left alone.
    early = files.apply()
    assert early.batches == 1 and files.rows() == [{"id": 2, "name": "grace"}]
    with Catalog.open(files.catalog_url, migrate=False) as catalog:
        [held] = catalog.batches("p", status=BatchStatus.PROCESSING)
    assert held.file_path == "data/a.csv"

    time.sleep(max(0.0, crashed + ttl + 0.1 - time.monotonic()))
    late = files.apply()

    assert late.status == "success" and late.batches == 1
    assert files.rows() == ROWS
    with Catalog.open(files.catalog_url, migrate=False) as catalog:
        [again] = [b for b in catalog.batches("p") if b.batch_id == held.batch_id]
    assert again.status is BatchStatus.COMMITTED and again.attempt == 2
