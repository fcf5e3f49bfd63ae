"""Chunk workers: `parallelism` threads on one SparkSession, each claiming batches until none is left.

Claims go through the catalog (one claimer at a time per process, SKIP LOCKED or
BEGIN IMMEDIATE across processes), so threads and processes never take the same
batch. Each worker tags its Spark jobs (`hakiri-<pipeline>-<slot>`, a thread-local job
tag that a Spark Connect server honours too), so they can be told apart and interrupted;
the engine shares its cores between them. A batch's
claim is renewed by a heartbeat while it loads. The first failure stops the
others from claiming more; batches already in flight finish (or fail) first.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable, Iterator
from typing import Any

from hakiri.catalog.records import Batch
from hakiri.catalog.store import Catalog

__all__ = ["keep_claimed", "keep_leased", "run_workers"]


def run_workers(
    count: int,
    claim: Callable[[threading.Event], Batch | None],
    load: Callable[[Batch], None],
    spark: Any | None = None,
    tag_prefix: str = "hakiri",
) -> None:
    """Load claimed batches with `count` workers (1: in this thread); re-raise the first failure."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def worker(slot: int) -> None:
        if spark is not None:
            spark.addTag(f"{tag_prefix}-{slot}")
        try:
            while (batch := claim(stop)) is not None:
                load(batch)
        except BaseException as exc:
            failures.append(exc)
            stop.set()

    if count <= 1:
        worker(0)
    else:
        threads = [
            threading.Thread(target=worker, args=(slot,), name=f"{tag_prefix}-{slot}")
            for slot in range(count)
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    if failures:
        raise failures[0]


@contextlib.contextmanager
def _beating(interval: float, beat: Callable[[], object], name: str) -> Iterator[None]:
    """Call `beat` every `interval` seconds in a daemon thread while the block runs."""
    done = threading.Event()

    def loop() -> None:
        while not done.wait(interval):
            beat()

    threading.Thread(target=loop, name=name, daemon=True).start()
    try:
        yield
    finally:
        done.set()


def keep_claimed(
    catalog: Catalog, pipeline_id: str, batch: Batch, holder: str, ttl_seconds: float
) -> contextlib.AbstractContextManager[None]:
    """Renew the batch's claim every third of its TTL while the block runs."""
    return _beating(
        ttl_seconds / 3,
        lambda: catalog.heartbeat(pipeline_id, batch.batch_id, holder, ttl_seconds),
        "hakiri-heartbeat",
    )


def keep_leased(
    catalog: Catalog, pipeline_id: str, holder: str, ttl_seconds: float
) -> contextlib.AbstractContextManager[None]:
    """Renew the pipeline lease every third of its TTL while the block runs, so a short TTL
    (serve's) still covers a chunk that loads for longer than the TTL."""
    return _beating(
        ttl_seconds / 3,
        lambda: catalog.renew_lease(pipeline_id, holder, ttl_seconds),
        "hakiri-lease-heartbeat",
    )
