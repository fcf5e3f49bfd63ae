"""What the spawned processes of test_processes.py run (importable, so "spawn" can start them).

Every worker reports back over a queue or pipe; an exception is reported as its
traceback, so a failing child fails the test with the child's own story.
"""

from __future__ import annotations

import os
import traceback
from collections.abc import Callable
from datetime import UTC, datetime
from functools import partial
from typing import Any

from hakiri.catalog.store import Catalog

BARRIER_TIMEOUT = 60.0


def _reporting(name: str, put: Callable[[Any], None], work: Callable[[], Any]) -> None:
    try:
        put((name, "ok", work()))
    except BaseException:
        put((name, "error", traceback.format_exc()))


def drain(url: str, pipeline_id: str, holder: str, barrier: Any, queue: Any) -> None:
    """Claim and commit batches until none is left, reporting every claim."""

    def work() -> int:
        claimed = 0
        with Catalog.open(url, migrate=True) as catalog:
            barrier.wait(BARRIER_TIMEOUT)
            while (batch := catalog.claim_batch(pipeline_id, holder, 600)) is not None:
                queue.put((holder, "claim", (batch.batch_id, holder, batch.attempt)))
                if not catalog.mark_committed(pipeline_id, batch.batch_id, holder, rows=1):
                    raise AssertionError(f"{holder} lost {batch.batch_id} it had just claimed")
                claimed += 1
        return claimed

    _reporting(holder, queue.put, work)


def race_leases(url: str, pipeline_ids: list[str], holder: str, barrier: Any, queue: Any) -> None:
    """For each pipeline in turn, all racers ask for its lease at the same moment."""

    def work() -> list[tuple[str, bool, str]]:
        outcomes = []
        with Catalog.open(url, migrate=True) as catalog:
            for pipeline_id in pipeline_ids:
                barrier.wait(BARRIER_TIMEOUT)
                lease = catalog.acquire_lease(pipeline_id, holder, 600)
                outcomes.append((pipeline_id, lease.acquired, lease.holder))
        return outcomes

    _reporting(holder, queue.put, work)


def open_fresh(url: str, name: str, barrier: Any, queue: Any) -> None:
    """Open (and so create and migrate) a catalog at the same moment as another process."""

    def work() -> bool:
        barrier.wait(BARRIER_TIMEOUT)
        with Catalog.open(url, migrate=True) as catalog:
            catalog.add_alert("info", "test", f"{name} was here")
            return catalog.initialized

    _reporting(name, queue.put, work)


def _timed(
    call: Callable[..., Any], args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[Any, datetime]:
    return call(*args, **kwargs), datetime.now(UTC)


def serve(url: str, conn: Any) -> None:
    """Call catalog methods on request and answer with (result, when it was done).

    Requests are ("call", method, args, kwargs, exit_after) or ("stop",).

    With exit_after the process dies with os._exit(1) right after answering, as a
    crashed apply would: no cleanup, no commit, its leases left to expire.
    """
    try:
        catalog = Catalog.open(url, migrate=True)
    except BaseException:
        conn.send(("serve", "error", traceback.format_exc()))
        return
    conn.send(("serve", "ok", os.getpid()))
    while True:
        request = conn.recv()
        if request[0] == "stop":
            catalog.close()
            return
        _, method, args, kwargs, exit_after = request
        _reporting(method, conn.send, partial(_timed, getattr(catalog, method), args, kwargs))
        if exit_after:
            os._exit(1)  # Pipe.send wrote synchronously: the answer is already out
