"""What `hakiri apply` shows while it loads: a live bar on a terminal, log lines elsewhere.

On a terminal each pipeline gets a bar (batches done, rows, and the batch in flight as the
destination sees it, polled every second). Off a terminal (cron, CI, a pipe) a bar is
nothing; instead one plain line per batch in flight every `HAKIRI_PROGRESS_SECONDS`
(default 10; 0 turns them off), e.g. `orders: 120,000 rows, 18 MB, 41% of 44 MB`.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Mapping
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn

__all__ = ["LoadDisplay", "progress_line", "progress_seconds", "size_text"]

PROGRESS_SECONDS_ENV = "HAKIRI_PROGRESS_SECONDS"
DEFAULT_PROGRESS_SECONDS = 10.0
BAR_SECONDS = 1.0  # how often a terminal's bar looks at the batch in flight


def progress_seconds(env: Mapping[str, str]) -> float:
    """Seconds between two progress lines off a terminal; 0: none."""
    try:
        return max(0.0, float(env.get(PROGRESS_SECONDS_ENV, DEFAULT_PROGRESS_SECONDS)))
    except ValueError:
        return DEFAULT_PROGRESS_SECONDS


def size_text(size: int) -> str:
    """`812 B`, `18 MB`, `1.4 GB` (powers of 1000, as `ls -h --si` and file managers show)."""
    for unit, scale in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if size >= scale:
            value = size / scale
            return f"{value:.1f} {unit}" if value < 10 else f"{value:.0f} {unit}"
    return f"{size} B"


def _in_flight(progress: Any) -> str:
    """`120,000 rows, 18 MB, 41% of 44 MB`: the batch's rows, and how much of its input they
    are (the rows' share of the records expected, in bytes of the input); without an estimate,
    the bytes the destination holds so far."""
    parts = [f"{progress.rows:,} rows"]
    fraction = progress.fraction
    if fraction is not None and progress.input_bytes:
        read = size_text(round(fraction * progress.input_bytes))
        parts += [read, f"{fraction:.0%} of {size_text(progress.input_bytes)}"]
    elif fraction is not None:
        parts.append(f"{fraction:.0%} of ~{progress.expected_rows:,} rows")
    elif progress.bytes:
        parts.append(f"{size_text(progress.bytes)} staged")
    return ", ".join(parts)


def progress_line(progress: Any) -> str:
    """One line for a log: `orders: 120,000 rows, 18 MB, 41% of 44 MB`; before any row is
    staged (or where the destination cannot tell), what is being loaded and for how long, or
    the engine being started while the batch waits for it (not the file: it is not read yet)."""
    if progress.rows is None:
        return f"{progress.pipeline_id}: {_waiting(progress)} so far"
    return f"{progress.pipeline_id}: {_in_flight(progress)}"


def _waiting(progress: Any) -> str:
    """`starting the Spark engine (local server), 12s` or `loading data/a.csv (44 MB), 12s`."""
    elapsed = f"{progress.seconds:.0f}s"
    if progress.starting_engine:
        return f"starting {progress.starting_engine}, {elapsed}"
    size = f" ({size_text(progress.input_bytes)})" if progress.input_bytes else ""
    return f"loading {progress.label}{size}, {elapsed}"


class LoadDisplay:
    """Receives apply's reports (a batch done, a batch in flight) from any thread and shows
    them on `console`: a bar per pipeline on a terminal, else a line per report."""

    def __init__(self, console: Console, *, bar: bool, every: float) -> None:
        self.console = console
        self.every = BAR_SECONDS if bar else every
        self._lock = threading.Lock()
        self._tasks: dict[str, TaskID] = {}
        self._done: dict[str, tuple[int, int, int]] = {}  # pipeline -> batches done, total, rows
        # The runner reports finished batches only: a pipeline's clock starts when the previous
        # pipeline's outcome arrives (or at the start), so the first batch's time is counted too.
        self._since = time.monotonic()
        self.bars = (
            Progress(
                TextColumn("{task.description}"),
                BarColumn(),
                MofNCompleteColumn(),
                TextColumn(
                    "batches  {task.fields[rows]:,} rows  {task.fields[detail]}", markup=False
                ),
                console=console,
                transient=True,
            )
            if bar
            else None
        )

    def __enter__(self) -> LoadDisplay:
        if self.bars is not None:
            self.bars.start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bars is not None:
            self.bars.stop()

    def outcome(self) -> None:
        self._since = time.monotonic()

    def batch_done(self, pipeline_id: str, done: int, total: int, rows: int) -> None:
        with self._lock:
            self._done[pipeline_id] = (done, total, rows)
            if self.bars is None:
                return
            pace = _pace(time.monotonic() - self._since, done, total, rows)
            self._bar(pipeline_id, done, total, rows, pace)

    def in_flight(self, progress: Any) -> None:
        with self._lock:
            if self.bars is None:
                self.console.print(
                    progress_line(progress), markup=False, highlight=False, soft_wrap=True
                )
                return
            done, total, rows = self._done.get(progress.pipeline_id, (0, 1, 0))
            share = progress.fraction or 0.0
            detail = _in_flight(progress) if progress.rows is not None else _waiting(progress)
            self._bar(
                progress.pipeline_id,
                done + share,
                max(total, done + 1),
                rows + (progress.rows or 0),
                detail,
            )

    def _bar(self, pipeline_id: str, done: float, total: int, rows: int, detail: str) -> None:
        assert self.bars is not None
        if pipeline_id not in self._tasks:
            self._tasks[pipeline_id] = self.bars.add_task(
                pipeline_id, total=total, rows=0, detail=""
            )
        self.bars.update(
            self._tasks[pipeline_id], completed=done, total=total, rows=rows, detail=detail
        )


def _pace(elapsed: float, done: int, total: int, rows: int) -> str:
    """`12,345 rows/s  eta 3m 20s` for the progress bar, from the pipeline's wall clock."""
    from hakiri.cli.state import duration_text

    if elapsed <= 0 or done <= 0:
        return ""
    eta = duration_text(elapsed / done * max(total - done, 0))
    return f"{rows / elapsed:,.0f} rows/s  eta {eta}"
