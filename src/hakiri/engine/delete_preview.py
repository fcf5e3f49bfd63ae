"""`hakiri plan --count-deletes` and `--count-changes`: what a load would delete (or insert,
update, leave unchanged), before any load.

For upsert with `deletes` and scd2 with deletes = 'close', the next snapshot to load is
read by Spark as apply reads it (source, transforms, renames, the mode's columns), and
the destination counts the live target rows in scope whose key that snapshot lacks. The
guard's numbers, exactly: the row rules (which may drop rows) are the one thing apply
does and this does not. `--count-changes` reads a keyed load's next batch the same way and
the destination matches it with the target's rows (`destinations.history.changes`).
Read-only; only counts reach the driver.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus, NewBatch
from hakiri.destinations.base import ChangeCount, Destination, LoadRequest
from hakiri.engine.prepare import prepared_for_load
from hakiri.engine.run_context import RunContext
from hakiri.engine.targets import Targets
from hakiri.sources.base import Source, explained_by
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["count_batch_changes", "count_snapshot_deletes"]


def count_snapshot_deletes(
    run: RunContext,
    spec: PipelineSpec,
    source: Source,
    batch: Batch | NewBatch,
) -> tuple[int, int] | None:
    """(rows the batch would delete or close, live target rows in scope); None without a target."""
    with _as_loaded(run, spec, source, batch, "delete from") as (
        destination,
        frame,
        request,
    ):
        return destination.count_deletes(frame, request)


def count_batch_changes(
    run: RunContext,
    spec: PipelineSpec,
    source: Source,
    batch: Batch | NewBatch,
) -> ChangeCount | None:
    """What the batch would insert, update, leave unchanged and delete (`plan --count-changes`);
    None without a target or a key to match on."""
    with _as_loaded(run, spec, source, batch, "change in") as (
        destination,
        frame,
        request,
    ):
        return destination.count_changes(frame, request)


@contextmanager
def _as_loaded(
    run: RunContext,
    spec: PipelineSpec,
    source: Source,
    batch: Batch | NewBatch,
    what: str,
) -> Iterator[tuple[Destination, Any, LoadRequest]]:
    """The batch as apply prepares it (`engine.prepare`: transforms, renames, the mode's columns), its
    destination and its load request at the batch's time; Spark's and the source's errors
    name what was counted."""
    from hakiri.spark.errors import spark_errors

    batch = _as_batch(spec, batch)
    targets = Targets(run.project, spec, run.destination_for(spec))
    destination, request = targets.request(batch, run_id="plan")
    label = batch.file_path or batch.table_name
    with spark_errors(f"counting the rows {label} would {what} {request.target_table}"):
        read = source.read(run.spark(), batch)
        taken = read.taken_at or batch.created_at or datetime.now(UTC)
        frame = prepared_for_load(spec, read, taken, run.project)
        with explained_by(read):
            yield destination, frame, replace(request, batch_time=taken)


def _as_batch(spec: PipelineSpec, batch: Batch | NewBatch) -> Batch:
    if isinstance(batch, Batch):
        return batch
    return Batch(
        batch.batch_id,
        spec.id,
        batch.table_name,
        batch.kind,
        BatchStatus.PENDING,
        attempt=0,
        seq=0,
        file_path=batch.file_path,
        content_hash=batch.content_hash,
        predicate=batch.predicate,
        generation=batch.generation,
        size_bytes=batch.size_bytes,
    )
