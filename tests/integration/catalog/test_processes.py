"""Several processes on one catalog: claims, crashes, leases and migrations across processes.

Processes are started with "spawn" (a fresh interpreter, as separate `hakiri`
runs would be), every wait is bounded, and a child's traceback fails the test.
"""

from __future__ import annotations

import multiprocessing
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from typing import Any

import pytest

from hakiri.catalog.migrate import head_revision
from hakiri.catalog.records import BatchCounts, BatchStatus, NewBatch
from hakiri.catalog.schema import metadata
from hakiri.catalog.store import Catalog
from tests.integration.catalog import workers
from tests.integration.catalog.rawdb import RawDatabase

CTX = multiprocessing.get_context("spawn")
TIMEOUT = 60.0
P = "orders"


class Children:
    """Spawned workers reporting (name, "ok" | "error", payload) on one queue."""

    def __init__(self) -> None:
        self.queue: Any = CTX.Queue()
        self.processes: list[Any] = []

    def start(self, target: Callable[..., None], *args: Any) -> None:
        process = CTX.Process(target=target, args=(*args, self.queue), daemon=True)
        process.start()
        self.processes.append(process)

    def results(self) -> tuple[dict[str, Any], list[Any]]:
        """Each worker's final result, and every intermediate message, in arrival order."""
        finals: dict[str, Any] = {}
        events: list[Any] = []
        deadline = time.monotonic() + TIMEOUT
        while len(finals) < len(self.processes):
            remaining = deadline - time.monotonic()
            try:
                name, kind, payload = self.queue.get(timeout=max(remaining, 0.01))
            except Exception:
                codes = [p.exitcode for p in self.processes]
                pytest.fail(f"workers did not report within {TIMEOUT:.0f}s (exit codes {codes})")
            if kind == "error":
                pytest.fail(f"worker {name} failed:\n{payload}")
            if kind == "ok":
                finals[name] = payload
            else:
                events.append(payload)
        for process in self.processes:
            process.join(TIMEOUT)
            assert process.exitcode == 0, f"worker exited with {process.exitcode}"
        return finals, events

    def stop(self) -> None:
        for process in self.processes:
            if process.is_alive():
                process.kill()
                process.join(5)


class CatalogProcess:
    """A spawned process holding a Catalog open; the test calls its methods one by one."""

    def __init__(self, url: str) -> None:
        self.conn, theirs = CTX.Pipe()
        self.process = CTX.Process(target=workers.serve, args=(url, theirs), daemon=True)
        self.process.start()
        theirs.close()
        self._answer()  # the catalog is open

    def call(
        self, method: str, *args: Any, exit_after: bool = False, **kwargs: Any
    ) -> tuple[Any, datetime]:
        """The method's result and when the child had it."""
        self.conn.send(("call", method, args, kwargs, exit_after))
        result, done_at = self._answer()
        return result, done_at

    def _answer(self) -> Any:
        if not self.conn.poll(TIMEOUT):
            self.kill()
            pytest.fail(f"catalog process did not answer within {TIMEOUT:.0f}s")
        try:
            name, kind, payload = self.conn.recv()
        except EOFError:
            self.process.join(5)
            pytest.fail(f"catalog process died (exit code {self.process.exitcode})")
        if kind == "error":
            pytest.fail(f"catalog process failed in {name}:\n{payload}")
        return payload

    def exit_code(self) -> int | None:
        self.process.join(TIMEOUT)
        if self.process.is_alive():
            self.kill()
            pytest.fail("catalog process did not exit")
        return self.process.exitcode

    def stop(self) -> None:
        if self.process.is_alive():
            self.conn.send(("stop",))
            self.process.join(TIMEOUT)
        self.kill()

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
            self.process.join(5)


@pytest.fixture
def children() -> Iterator[Children]:
    spawned = Children()
    try:
        yield spawned
    finally:
        spawned.stop()


def test_four_processes_claim_each_batch_exactly_once(
    catalog: Catalog, catalog_url: str, children: Children
) -> None:
    ids = [f"chunk-{i:02d}" for i in range(40)]
    catalog.add_batches(P, [NewBatch(i, "orders", "chunk", predicate=i) for i in ids])
    barrier = CTX.Barrier(4)
    for n in range(4):
        children.start(workers.drain, catalog_url, P, f"proc-{n}", barrier)

    finals, claims = children.results()

    claimed_ids = [batch_id for batch_id, _, _ in claims]
    assert sorted(claimed_ids) == ids  # every batch, none twice
    assert {attempt for _, _, attempt in claims} == {1}
    assert sum(finals.values()) == 40
    assert catalog.batch_counts(P) == BatchCounts(committed=40)
    holders = {b.batch_id: b.holder for b in catalog.batches(P)}
    assert holders == {batch_id: holder for batch_id, holder, _ in claims}


def test_a_crashed_claim_is_claimed_again_only_after_its_lease_expires(
    catalog: Catalog, catalog_url: str
) -> None:
    catalog.add_batches(
        P, [NewBatch("first", "orders", "chunk"), NewBatch("second", "orders", "chunk")]
    )
    crashing, survivor = CatalogProcess(catalog_url), CatalogProcess(catalog_url)
    try:
        doomed, _ = crashing.call("claim_batch", P, "proc-a", 1.0, exit_after=True)
        assert crashing.exit_code() == 1
        assert doomed.batch_id == "first" and doomed.attempt == 1

        meanwhile, at = survivor.call("claim_batch", P, "proc-b", 30)
        if at >= doomed.lease_expires_at:
            pytest.fail(
                "this machine took over a second to ask for a claim; the test proves nothing"
            )
        assert meanwhile is not None and meanwhile.batch_id == "second"
        assert survivor.call("mark_committed", P, "second", "proc-b")[0]
        nothing, at = survivor.call("claim_batch", P, "proc-b", 30)
        assert nothing is None and at < doomed.lease_expires_at

        time.sleep(max((doomed.lease_expires_at - datetime.now(UTC)).total_seconds(), 0) + 0.05)
        again, _ = survivor.call("claim_batch", P, "proc-b", 30)
        assert again is not None
        assert (again.batch_id, again.holder, again.attempt) == ("first", "proc-b", 2)
        assert survivor.call("mark_committed", P, "first", "proc-b", rows=7)[0]
    finally:
        crashing.kill()
        survivor.stop()
    assert [(b.batch_id, b.status, b.attempt) for b in catalog.batches(P)] == [
        ("first", BatchStatus.COMMITTED, 2),
        ("second", BatchStatus.COMMITTED, 1),
    ]


def test_two_processes_racing_for_a_lease_one_wins(
    catalog: Catalog, catalog_url: str, children: Children
) -> None:
    pipelines = [f"pipeline-{i}" for i in range(10)]
    barrier = CTX.Barrier(2)
    for holder in ("proc-a", "proc-b"):
        children.start(workers.race_leases, catalog_url, pipelines, holder, barrier)

    finals, _ = children.results()

    for i, pipeline_id in enumerate(pipelines):
        outcomes = {holder: finals[holder][i] for holder in finals}
        winners = [holder for holder, (_, acquired, _) in outcomes.items() if acquired]
        assert len(winners) == 1, f"{pipeline_id}: {outcomes}"
        assert {seen for _, _, seen in outcomes.values()} == {winners[0]}


def test_two_processes_opening_a_fresh_catalog_both_succeed(
    catalog_url: str, raw_db: RawDatabase, children: Children
) -> None:
    barrier = CTX.Barrier(2)
    for name in ("proc-a", "proc-b"):
        children.start(workers.open_fresh, catalog_url, name, barrier)

    finals, _ = children.results()

    assert finals == {"proc-a": True, "proc-b": True}
    assert raw_db.versions() == [head_revision()]
    assert set(metadata.tables) <= raw_db.tables()
    with Catalog.open(catalog_url, migrate=False) as catalog:
        assert sorted(a.message for a in catalog.alerts()) == ["proc-a was here", "proc-b was here"]
