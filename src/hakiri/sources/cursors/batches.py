"""Plan the batches of a PostgreSQL source table: backfill chunks, then incremental deltas.

A table with a cursor goes through the seed's phases:

- planning: the first run reads MIN/MAX of the cursor and cuts [start_from or MIN, MAX]
  into chunks of `window` (one chunk without a window). The chunks and the cursor's
  `planned_to` (that MAX) are written in one catalog transaction before any row moves.
- backfilling: while any chunk of the table is not committed, runs only work the queue.
- streaming: once every chunk is committed, a run reads the new MAX and plans
  (planned_to - lag, MAX] as one more range.

A table without a cursor, or a full-refresh load mode, is read whole as one
"snapshot" batch whose id is a digest of the table's rows: an unchanged table is a no-op.

Batch ids are deterministic: `chunk:<table>:g<generation>:<digest of the range>`,
so a crash between the destination's commit and the catalog's is recognised by the ledger.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus, NewBatch
from hakiri.errors import HakiriError
from hakiri.sources.base import Reload, TablePlan, latest_committed
from hakiri.sources.cursors.ranges import (
    CursorBounds,
    CursorColumn,
    CursorRange,
    as_python,
    parse_value,
    plan_ranges,
    shift_back,
)
from hakiri.spec.pipeline import CursorKind, IncrementalSpec, PipelineSpec, TableSpec

__all__ = [
    "TablePlan",
    "chunk_batch",
    "committed_cursor",
    "incremental_of",
    "plan_table",
    "snapshot_table_batch",
]


def incremental_of(spec: PipelineSpec, table: TableSpec) -> str | IncrementalSpec | None:
    return table.incremental or spec.incremental


def chunk_batch(table: str, chunk: CursorRange, generation: int = 0) -> NewBatch:
    predicate = chunk.to_predicate()
    digest = hashlib.sha256(predicate.encode()).hexdigest()[:32]
    return NewBatch(
        f"chunk:{table}:g{generation}:{digest}",
        table,
        "chunk",
        predicate=predicate,
        generation=generation,
    )


def snapshot_table_batch(table: str, fingerprint: str, after: str | None = None) -> NewBatch:
    """The whole table as one batch: its id is a digest of the rows' fingerprint (and of the
    snapshot it follows, when the table comes back to rows it held before another snapshot
    loaded); the fingerprint is kept as its predicate, to tell an unchanged table."""
    text = fingerprint if after is None else f"{fingerprint}\nafter {after}"
    digest = hashlib.sha256(text.encode()).hexdigest()
    return NewBatch(
        f"snapshot:{table}:{digest}", table, "snapshot", predicate=f"{_ROWS}{fingerprint}"
    )


_ROWS = "rows "  # a table snapshot's predicate: `rows <fingerprint>`


def _holds(batch: Batch, table: str, fingerprint: str) -> bool:
    """Was `batch` a snapshot of these rows? (A catalog from before fingerprints were kept
    has only the id to tell.)"""
    if batch.predicate is None:
        return batch.batch_id == snapshot_table_batch(table, fingerprint).batch_id
    return batch.predicate == f"{_ROWS}{fingerprint}"


def check_cursor_fits_mode(spec: PipelineSpec, cursor: CursorColumn | None, where: str) -> None:
    """Refuse combinations that would load rows twice."""
    mode = spec.load.mode
    strategy = spec.load.strategy
    if cursor is None and strategy.duplicates_reloaded_rows:
        raise HakiriError(
            f"{where} has no incremental cursor, so every append would load the whole table again",
            "set `incremental = \"<column>\"` (a timestamp or id that grows), or use mode = 'upsert' "
            "or 'truncate'",
        )
    if cursor is not None and cursor.lag_seconds and strategy.merge_key(spec.load) is None:
        raise HakiriError(
            f"{where} sets `lag`, which re-reads rows already loaded; mode '{mode.value}' would "
            "load them twice",
            "use mode = 'upsert' with an upsert_key, so re-read rows replace themselves",
        )


def plan_table(
    spec: PipelineSpec,
    table: TableSpec,
    cursor: CursorColumn | None,
    state: dict[str, Any] | None,
    existing: Sequence[Batch],
    bounds: Callable[[], CursorBounds],
    fingerprint: Callable[[], str],
) -> TablePlan:
    """The batches to add for one table now; `existing` are the table's batches in the catalog."""
    unfinished = [b for b in existing if b.status.unfinished]
    if unfinished:
        pending = len(unfinished)
        return TablePlan(notes=[f"{table.name}: {pending} batch(es) of an earlier plan to finish"])
    if cursor is None or spec.load.strategy.snapshot:
        rows = fingerprint()
        latest = latest_committed(existing, "snapshot")
        if latest is not None and _holds(latest, table.name, rows):
            return TablePlan()  # the table is as it was when last loaded
        batch = snapshot_table_batch(table.name, rows)
        if any(b.batch_id == batch.batch_id for b in existing) and latest is not None:
            # rows it held before another snapshot loaded: a load of their own
            batch = snapshot_table_batch(table.name, rows, after=latest.batch_id)
        if any(b.batch_id == batch.batch_id for b in existing):
            return TablePlan()
        return TablePlan(batches=[batch])

    window = spec.backfill.window if spec.backfill else None
    now = bounds()
    high = cursor.to_json(now.high)
    first = state is None or state.get("column") != cursor.column or state.get("planned_to") is None
    if first:
        base = {"column": cursor.column, "kind": cursor.kind.value, "type": cursor.pg_type}
        if high is None:
            return TablePlan(cursor={**base, "value": None, "planned_to": None}, planning=True)
        start_from = spec.backfill.start_from if spec.backfill else None
        start = (
            cursor.from_config(start_from) if start_from is not None else cursor.to_json(now.low)
        )
        ranges = plan_ranges(cursor, start, high, window, nulls_in_first=cursor.include_nulls)
        if not ranges:  # every row is older than start_from: plan again once one is not
            return TablePlan(cursor={**base, "value": None, "planned_to": None}, planning=True)
        return TablePlan(
            batches=[chunk_batch(table.name, r) for r in ranges],
            cursor={**base, "value": None, "planned_to": high},
            planning=True,
        )

    assert state is not None
    if state.get("kind") != cursor.kind.value:
        raise HakiriError(
            f"cursor column {cursor.column} of source table {table.name} is a {cursor.kind.value} "
            f"cursor now ({cursor.pg_type}), but its backfill was planned as {state.get('kind')}",
            "change the column back, or load the table under a new pipeline id",
        )
    # timestamp <-> timestamptz keeps the kind; the stored value follows the new type (UTC).
    planned_to = parse_value(cursor.kind, state["planned_to"], cursor.column, aware=cursor.aware)
    if high is None or not _after(cursor, high, planned_to):
        return TablePlan()
    start = shift_back(cursor, planned_to, cursor.lag_seconds)
    # NULL-cursor rows cannot tell new from old: only a keyed load may read them again.
    nulls = cursor.include_nulls and spec.load.strategy.merge_key(spec.load) is not None
    # One range, not cut by `window`: after a pause, time windows over sparse rows would
    # be mostly empty chunks (a window of 6h over three idle years is 4,000 of them).
    ranges = plan_ranges(cursor, start, high, None, start_inclusive=False, nulls_in_first=nulls)
    return TablePlan(
        batches=[chunk_batch(table.name, r) for r in ranges],
        cursor={**state, "type": cursor.pg_type, "planned_to": high},
    )


def committed_cursor(existing: Sequence[Batch], state: dict[str, Any]) -> dict[str, Any]:
    """The cursor with `value` = the end of the longest run of committed chunks from the start."""
    latest: dict[str, Batch] = {}
    for b in existing:
        if b.kind == "chunk" and b.predicate is not None:
            known = latest.get(b.predicate)
            if known is None or b.generation > known.generation:
                latest[b.predicate] = b
    ordered = sorted(
        ((CursorRange.from_predicate(p), b) for p, b in latest.items()),
        key=lambda item: _sort_key(item[0]),
    )
    value = state.get("value")
    for chunk, batch in ordered:
        if batch.status is not BatchStatus.COMMITTED:
            break
        value = chunk.hi
    return {**state, "value": value}


def _sort_key(chunk: CursorRange) -> Any:
    return as_python(CursorKind(chunk.kind), chunk.hi)


def _after(cursor: CursorColumn, value: Any, than: Any) -> bool:
    return as_python(cursor.kind, value) > as_python(cursor.kind, than)


def reload_from_source(committed: Sequence[Batch]) -> Reload:
    """What a source that reads again what it read before (a table, an API) gives back of a
    lost target: every committed chunk and walk part, and the newest snapshot (the older
    ones were replaced by it)."""
    again = [b for b in committed if b.kind != "snapshot"]
    latest = latest_committed(committed, "snapshot")
    if latest is not None:
        again.append(latest)
    return Reload(tuple(sorted(again, key=lambda b: b.seq)))
