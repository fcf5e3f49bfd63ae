"""Progress of a batch in flight: a watcher thread asks the destination every few seconds.

The runner reports a batch when it is done (`on_batch`); a single large batch would show
nothing for its whole load. While a batch loads, a watcher polls
`Destination.stage_progress` (rows and bytes the staging write has reached, as the
destination sees it: see `destinations.postgres.progress` for why the destination and
not the engine) and hands a `BatchProgress` to whoever displays it. The percentage is
the rows so far against the source's estimate of the batch's records
(`BatchRead.expected_rows`). No presentation here: the CLI renders a bar or a line.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

__all__ = ["BatchProgress", "InFlight", "ProgressWatch", "watching"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class BatchProgress:
    """One batch of a pipeline, as far as it has got."""

    pipeline_id: str
    table: str
    label: str  # the batch's file, or its table and range
    seconds: float  # since the batch started loading
    rows: int | None = None  # rows staged so far; None: the destination cannot tell (yet)
    bytes: int | None = None  # the staged data's size in the destination
    expected_rows: int | None = None  # the source's estimate of the batch's records
    input_bytes: int | None = None  # the batch's input size (files)
    # While the engine's session is still being started: that engine, as a user names it
    # ("the Spark engine (local server)"); empty once it runs.
    starting_engine: str = ""

    @property
    def fraction(self) -> float | None:
        """Rows so far of the rows expected, at most 0.99 while in flight (it is an estimate)."""
        if self.rows is None or not self.expected_rows:
            return None
        return min(self.rows / self.expected_rows, 0.99)


@dataclass(frozen=True)
class ProgressWatch:
    """How often to look at a batch in flight (seconds), and who to tell."""

    every: float
    report: Callable[[BatchProgress], None]


@dataclass
class InFlight:
    """What the loader has learnt of its batch so far; the watcher reads it from its thread."""

    pipeline_id: str
    table: str
    label: str
    input_bytes: int | None
    started: float = field(default_factory=time.monotonic)
    probe: Callable[[], Any] | None = None  # -> StageProgress | None, once staging may start
    expected_rows: int | None = None
    # The furthest reading so far: a reading never goes back (a COPY that just finished moves
    # its rows from the running-COPY view to the table's statistics, which lag behind).
    rows_seen: int | None = None
    bytes_seen: int | None = None
    starting_engine: str = ""  # the engine the loader waits for, while it waits

    def progress(self) -> BatchProgress:
        seen = None
        if self.probe is not None:
            try:
                seen = self.probe()
            except Exception as exc:  # a display's reading never fails a load
                log.debug("progress probe failed: %s", exc)
        if seen is not None and seen.rows is not None:
            self.rows_seen = max(seen.rows, self.rows_seen or 0)
        if seen is not None and seen.bytes is not None:
            self.bytes_seen = max(seen.bytes, self.bytes_seen or 0)
        return BatchProgress(
            self.pipeline_id,
            self.table,
            self.label,
            time.monotonic() - self.started,
            rows=self.rows_seen,
            bytes=self.bytes_seen,
            expected_rows=self.expected_rows,
            input_bytes=self.input_bytes,
            starting_engine=self.starting_engine,
        )


@contextmanager
def watching(flight: InFlight, watch: ProgressWatch | None) -> Iterator[InFlight]:
    """Report `flight` every `watch.every` seconds until the block ends (not at its end: the
    batch's own report follows)."""
    if watch is None or watch.every <= 0:
        yield flight
        return
    done = threading.Event()

    def run() -> None:
        while not done.wait(watch.every):
            try:
                watch.report(flight.progress())
            except Exception as exc:
                log.debug("progress report failed: %s", exc)

    thread = threading.Thread(target=run, name=f"hakiri-progress-{flight.pipeline_id}", daemon=True)
    thread.start()
    try:
        yield flight
    finally:
        done.set()
        thread.join(timeout=5)
