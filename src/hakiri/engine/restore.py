"""Finding the targets lost since hakiri loaded them, and putting their batches back in the
queue (`planner.restore` says what plan shows; this module asks the source and acts).

Apply, after it enqueued the new batches: for each lost target, the destination forgets
the target's ledger entries and watermark, the catalog sets the batches the source can read
again back to pending and forgets the target's mark; the load then creates the table and
loads them like any queued batch. The mark is forgotten last: a run killed in between
leaves it, so the next run finds the same target lost and does the rest again (each step
is idempotent).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from hakiri.catalog.records import Batch, BatchStatus, NewBatch
from hakiri.catalog.store import Catalog
from hakiri.engine.targets import Targets
from hakiri.planner.backfill import live_batches
from hakiri.planner.drift import TargetDrift
from hakiri.planner.restore import LostTarget
from hakiri.sources.base import Source
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["lost_targets", "queue_again"]


def lost_targets(
    spec: PipelineSpec,
    source: Source,
    drifts: Sequence[TargetDrift],
    batches: Sequence[Batch],
    upcoming: Mapping[str, Sequence[Batch | NewBatch]],
) -> list[LostTarget]:
    """Each target of `drifts` that was dropped (or replaced), with what the source can load
    again of the table's committed `batches`; `upcoming`: per table, the work queued or
    planned already."""
    live = live_batches(batches)
    entries = {t.name: t for t in spec.table_specs()}
    found = []
    for drift in drifts:
        if not drift.lost or drift.table not in entries:
            continue
        committed = [
            b for b in live if b.table_name == drift.table and b.status is BatchStatus.COMMITTED
        ]
        answer = source.reloadable(entries[drift.table], committed, upcoming.get(drift.table, ()))
        found.append(LostTarget(drift, answer.batches, answer.lost, answer.hint))
    return found


def queue_again(spec: PipelineSpec, lost: LostTarget, targets: Targets, catalog: Catalog) -> None:
    """Forget the lost target's ledger entries, queue its reloadable batches again, forget
    its mark (the run that loads it marks it anew)."""
    entry = next(t for t in spec.table_specs() if t.name == lost.table)
    target = targets.target(entry)
    targets.destination(target).forget_target(targets.target_request(entry))
    catalog.reset_batches(spec.id, [b.batch_id for b in lost.reload])
    catalog.forget_mark(spec.id, lost.table)
