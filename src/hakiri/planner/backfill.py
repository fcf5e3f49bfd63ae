"""Backfill facts the planner and `status` share: live batches, progress, parallelism warnings. Pure.

A chunk re-added by `hakiri backfill rewind` keeps its predicate and gets a higher
generation; the older batch stays committed in the catalog as history. Only the
highest generation of each (table, predicate) is work: `live_batches` drops the rest.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from hakiri.catalog.records import Batch, BatchStatus
from hakiri.sources.kinds import kind_of as source_kind
from hakiri.spec.pipeline import CursorKind, PipelineSpec, TableSpec

__all__ = [
    "BackfillProgress",
    "backfill_progress",
    "current_plan",
    "live_batches",
    "load_parallelism",
    "parallelism_warnings",
]


def live_batches(batches: Iterable[Batch]) -> list[Batch]:
    """`batches` without older generations, in the order given.

    A batch is an older generation when a batch of the same pipeline and table with the
    same predicate has a higher generation (a rewind). Batches without a predicate (files,
    snapshots) have one generation. (Not to be confused with a batch whose status is
    `superseded`: its file changed before it loaded; it stays in the list.)
    """
    batches = list(batches)
    newest: dict[tuple[str, str, str], int] = {}
    for b in batches:
        if b.predicate is not None:
            key = (b.pipeline_id, b.table_name, b.predicate)
            newest[key] = max(newest.get(key, b.generation), b.generation)
    return [
        b
        for b in batches
        if b.predicate is None or b.generation >= newest[(b.pipeline_id, b.table_name, b.predicate)]
    ]


def current_plan(batches: Sequence[Batch]) -> list[Batch]:
    """The live batches of the plan being worked on (or the last one, when all are done).

    The batches of one plan are added in one catalog call and share `created_at`. While
    some are unfinished the current plan is every live batch created since the oldest
    unfinished one (a rewind's chunks, or a first backfill with the deltas planned after
    it); otherwise it is the most recently added batches.
    """
    live = [b for b in live_batches(batches) if b.created_at is not None]
    if not live:
        return []
    unfinished = [b.created_at for b in live if b.status.unfinished]
    if unfinished:
        since = min(d for d in unfinished if d is not None)
        return [b for b in live if b.created_at is not None and b.created_at >= since]
    newest = max(b.created_at for b in live if b.created_at is not None)
    return [b for b in live if b.created_at == newest]


@dataclass(frozen=True)
class BackfillProgress:
    """One table's unfinished chunk plan."""

    table: str
    done: int
    total: int
    failed: int
    started_at: datetime | None  # when the plan's first chunks were added to the catalog

    @property
    def left(self) -> int:
        return self.total - self.done

    def describe(self) -> str:
        failed = f", {self.failed} failed (apply retries them)" if self.failed else ""
        return (
            f"backfilling {self.table}: {self.left} of {self.total} chunk(s) left{failed}; "
            "apply continues where the last run stopped"
        )


def backfill_progress(table: str, batches: Sequence[Batch]) -> BackfillProgress | None:
    """Progress of `table`'s chunks (its batches of kind 'chunk'); None when none is left to load."""
    plan = current_plan([b for b in batches if b.table_name == table and b.kind == "chunk"])
    if not any(b.status.unfinished for b in plan):
        return None
    return BackfillProgress(
        table=table,
        done=sum(b.status is BatchStatus.COMMITTED for b in plan),
        total=len(plan),
        failed=sum(b.status is BatchStatus.FAILED for b in plan),
        started_at=min((b.created_at for b in plan if b.created_at is not None), default=None),
    )


def load_parallelism(spec: PipelineSpec, has_cursors: bool) -> int:
    """Batches in flight: `backfill.parallelism`, except where order matters.

    incremental_watermark publishes rows past the target's high-water mark, so chunks
    committed out of order would hide rows; full-refresh modes have one batch; only a
    table source (`has_cursors`) has chunks to split.
    """
    backfill = spec.backfill
    if backfill is None or not has_cursors:
        return 1
    if spec.load.strategy.snapshot or spec.load.strategy.ordered:
        return 1
    return backfill.parallelism


def parallelism_warnings(
    spec: PipelineSpec, table: TableSpec, cursor_kind: CursorKind | None, has_cursors: bool
) -> list[str]:
    """Why `[pipeline.backfill] parallelism > 1` is unsafe or has no effect for this table.

    `cursor_kind` is the kind of the table's incremental cursor (from its declared `kind`
    or the source column's type), None without a cursor or when it could not be told.
    """
    backfill = spec.backfill
    if backfill is None or backfill.parallelism <= 1:
        return []
    n = backfill.parallelism
    mode = spec.load.mode
    strategy = spec.load.strategy
    if not has_cursors:
        return [
            f"backfill.parallelism = {n} has no effect on a files source: there are no chunks "
            "to split, hakiri loads one file batch at a time"
        ]
    if strategy.ordered:
        return [
            f"backfill.parallelism = {n} is ignored with mode '{mode}': chunks committed "
            "out of order would move the watermark past rows not loaded yet, so "
            "hakiri loads one chunk at a time"
        ]
    if strategy.snapshot:
        return [
            f"backfill.parallelism = {n} has no effect with mode '{mode.value}': the table is "
            "loaded whole, as one batch"
        ]
    if (table.incremental or spec.incremental) is None and source_kind(spec).pages_in_order:
        return [
            f"backfill.parallelism = {n} does not apply to {table.name}: without an "
            "incremental cursor its pages are walked in order (an opaque page token cannot "
            "be followed in parallel), one batch of pages at a time"
        ]
    if (table.incremental or spec.incremental) is None:
        return [
            f"backfill.parallelism = {n} has no effect on {table.name}: without an incremental "
            "cursor it is read whole, as one batch (nothing to split)"
        ]
    if cursor_kind is CursorKind.TIMESTAMP and strategy.duplicates_reloaded_rows:
        return [
            f"backfill.parallelism = {n} with a timestamp cursor and mode '{mode}': a row of "
            f"{table.name} updated during the backfill moves to a later chunk and is loaded "
            "twice; use mode = 'upsert' with an upsert_key (or a numeric cursor)"
        ]
    return []
