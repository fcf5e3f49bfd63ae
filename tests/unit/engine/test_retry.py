"""Retry: a batch whose commit fails transiently fails its run, keeps what committed before it,
and loads once on the next run (a failed batch goes back to pending when a run starts)."""

from __future__ import annotations

from hakiri.catalog.records import BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.errors import DestinationUnreachable
from tests.unit.engine.conftest import Bench


def test_a_batch_that_fails_transiently_loads_once_on_the_next_run(bench: Bench) -> None:
    bench.write("data/a.csv", "id,name\n1,ada\n")
    bench.write("data/b.csv", "id,name\n2,grace\n")
    first = bench.apply()
    assert first.batches == 2
    bench.write("data/c.csv", "id,name\n3,edsger\n")
    bench.destination.fail_next_commit(
        DestinationUnreachable("connection to the destination lost", "try again")
    )

    failed = bench.apply()

    assert failed.status == "failed" and failed.error == "connection to the destination lost"
    assert [r["id"] for r in bench.rows()] == [1, 2]
    with Catalog.open(bench.catalog_url, migrate=False) as catalog:
        [batch] = catalog.batches("p", status=BatchStatus.FAILED)
        assert batch.attempt == 1 and batch.error == "connection to the destination lost"
        assert catalog.runs("p", limit=1)[0].status.value == "failed"

    retried = bench.apply()

    assert retried.status == "success" and retried.batches == 1 and retried.rows == 1
    assert [r["id"] for r in bench.rows()] == [1, 2, 3]
    with Catalog.open(bench.catalog_url, migrate=False) as catalog:
        [again] = [b for b in catalog.batches("p") if b.batch_id == batch.batch_id]
    assert again.status is BatchStatus.COMMITTED and again.attempt == 2
    assert bench.apply().status == "no-op"
