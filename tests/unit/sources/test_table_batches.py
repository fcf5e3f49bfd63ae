"""Planning the batches of a PostgreSQL source table: pure, with bounds and fingerprints as plain functions."""

from __future__ import annotations

import datetime as dt
import hashlib
import re
from collections.abc import Callable
from dataclasses import replace
from typing import Any

import pytest

from hakiri.catalog.records import Batch, BatchStatus, NewBatch
from hakiri.errors import HakiriError
from hakiri.sources.cursors.batches import (
    TablePlan,
    check_cursor_fits_mode,
    chunk_batch,
    committed_cursor,
    incremental_of,
    plan_table,
    snapshot_table_batch,
)
from hakiri.sources.cursors.ranges import CursorBounds, CursorColumn, CursorRange, plan_ranges
from hakiri.spec.pipeline import PipelineSpec, TableSpec

TS = "timestamp without time zone"
TSTZ = "timestamp with time zone"
UPSERT = {"mode": "upsert", "upsert_key": ["id"]}


def _spec(**overrides: Any) -> PipelineSpec:
    document: dict[str, Any] = {
        "id": "shop",
        "source": {"connector": "postgres", "config": {"url": "postgresql://app@db.local/shop"}},
        "tables": ["orders"],
        "incremental": "updated_at",
    }
    document.update(overrides)
    return PipelineSpec.model_validate(document)


def _table(spec: PipelineSpec) -> TableSpec:
    return spec.table_specs()[0]


def _cursor(spec: PipelineSpec, pg_type: str) -> CursorColumn:
    incremental = incremental_of(spec, _table(spec))
    assert incremental is not None
    return CursorColumn.resolve(incremental, pg_type, "source table public.orders")


def _bounds(pg_type: str, low: Any, high: Any) -> Callable[[], CursorBounds]:
    def bounds() -> CursorBounds:
        return CursorBounds(pg_type, low, high)

    return bounds


def _no_bounds() -> CursorBounds:
    raise AssertionError("the source's bounds were read, but the plan did not need them")


def _no_fingerprint() -> str:
    raise AssertionError("the table was fingerprinted, but the plan did not need it")


def _stored(new: NewBatch, status: BatchStatus = BatchStatus.COMMITTED, seq: int = 0) -> Batch:
    """A NewBatch as the catalog hands it back."""
    return Batch(
        batch_id=new.batch_id,
        pipeline_id="shop",
        table_name=new.table_name,
        kind=new.kind,
        status=status,
        attempt=1,
        seq=seq,
        predicate=new.predicate,
        generation=new.generation,
    )


def _ranges(plan: TablePlan) -> list[CursorRange]:
    return [CursorRange.from_predicate(b.predicate or "") for b in plan.batches]


def _shape(ranges: list[CursorRange]) -> list[tuple[Any, Any, bool, bool, bool]]:
    return [(r.lo, r.hi, r.lo_inclusive, r.hi_inclusive, r.nulls) for r in ranges]


def _plan(
    spec: PipelineSpec,
    cursor: CursorColumn | None,
    state: dict[str, Any] | None = None,
    existing: list[Batch] | None = None,
    bounds: Callable[[], CursorBounds] = _no_bounds,
    fingerprint: Callable[[], str] = _no_fingerprint,
) -> TablePlan:
    return plan_table(spec, _table(spec), cursor, state, existing or [], bounds, fingerprint)


# ---------------------------------------------------------------- the first plan


def test_the_first_plan_cuts_min_to_max_into_chunks() -> None:
    spec = _spec(backfill={"window": "7d"})
    cursor = _cursor(spec, TS)
    plan = _plan(
        spec,
        cursor,
        bounds=_bounds(TS, dt.datetime(2024, 1, 1, 3), dt.datetime(2024, 1, 20)),
    )
    assert plan.planning
    assert plan.notes == []
    assert plan.cursor == {
        "column": "updated_at",
        "kind": "timestamp",
        "type": TS,
        "value": None,
        "planned_to": "2024-01-20T00:00:00",
    }
    assert _shape(_ranges(plan)) == [
        ("2024-01-01T03:00:00", "2024-01-08T03:00:00", True, False, True),
        ("2024-01-08T03:00:00", "2024-01-15T03:00:00", True, False, False),
        ("2024-01-15T03:00:00", "2024-01-20T00:00:00", True, True, False),
    ]
    for batch in plan.batches:
        assert batch.kind == "chunk"
        assert batch.table_name == "orders"
        assert batch.generation == 0
        assert re.fullmatch(r"chunk:orders:g0:[0-9a-f]{32}", batch.batch_id)
    assert len({b.batch_id for b in plan.batches}) == len(plan.batches)


def test_the_first_plan_is_plan_ranges_of_the_bounds() -> None:
    spec = _spec(backfill={"window": 1000}, incremental="id")
    cursor = _cursor(spec, "bigint")
    plan = _plan(spec, cursor, bounds=_bounds("bigint", 1, 2500))
    expected = plan_ranges(cursor, 1, 2500, 1000, nulls_in_first=True)
    assert _ranges(plan) == expected
    assert [b.batch_id for b in plan.batches] == [
        chunk_batch("orders", r).batch_id for r in expected
    ]
    assert plan.cursor is not None
    assert plan.cursor["kind"] == "numeric"
    assert plan.cursor["planned_to"] == 2500


def test_the_first_plan_of_an_aware_cursor_keeps_the_offset() -> None:
    spec = _spec()
    cursor = _cursor(spec, TSTZ)
    plus_one = dt.timezone(dt.timedelta(hours=1))
    plan = _plan(
        spec,
        cursor,
        bounds=_bounds(
            TSTZ,
            dt.datetime(2024, 1, 1, 1, tzinfo=plus_one),
            dt.datetime(2024, 2, 1, tzinfo=dt.UTC),
        ),
    )
    assert _shape(_ranges(plan)) == [
        ("2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00", True, True, True)
    ]
    assert plan.cursor is not None
    assert plan.cursor["planned_to"] == "2024-02-01T00:00:00+00:00"


def test_the_first_plan_without_a_window_is_one_chunk() -> None:
    spec = _spec()
    plan = _plan(
        spec,
        _cursor(spec, TS),
        bounds=_bounds(TS, dt.datetime(2020, 1, 1), dt.datetime(2024, 1, 1)),
    )
    assert _shape(_ranges(plan)) == [
        ("2020-01-01T00:00:00", "2024-01-01T00:00:00", True, True, True)
    ]


def test_the_first_plan_skips_nulls_when_told_to() -> None:
    spec = _spec(
        incremental={"column": "updated_at", "on_null_cursor": "skip"}, backfill={"window": "1d"}
    )
    plan = _plan(
        spec,
        _cursor(spec, TS),
        bounds=_bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 5)),
    )
    assert len(plan.batches) == 4
    assert not any(r.nulls for r in _ranges(plan))


def test_the_first_plan_of_an_empty_table_records_the_cursor_only() -> None:
    spec = _spec(backfill={"window": "7d"})
    plan = _plan(spec, _cursor(spec, TS), bounds=_bounds(TS, None, None))
    assert plan.batches == []
    assert plan.planning
    assert plan.cursor == {
        "column": "updated_at",
        "kind": "timestamp",
        "type": TS,
        "value": None,
        "planned_to": None,
    }


def test_a_table_that_was_empty_is_planned_from_scratch_once_it_has_rows() -> None:
    spec = _spec()
    cursor = _cursor(spec, TS)
    empty = _plan(spec, cursor, bounds=_bounds(TS, None, None))
    plan = _plan(
        spec,
        cursor,
        state=empty.cursor,
        bounds=_bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 2)),
    )
    assert plan.planning
    assert _shape(_ranges(plan)) == [
        ("2024-01-01T00:00:00", "2024-01-02T00:00:00", True, True, True)
    ]


def test_a_different_cursor_column_is_planned_from_scratch() -> None:
    spec = _spec(incremental="id")
    cursor = _cursor(spec, "bigint")
    old_state = {
        "column": "updated_at",
        "kind": "timestamp",
        "type": TS,
        "value": "2024-01-01T00:00:00",
        "planned_to": "2024-01-01T00:00:00",
    }
    plan = _plan(spec, cursor, state=old_state, bounds=_bounds("bigint", 5, 50))
    assert plan.planning
    assert plan.cursor == {
        "column": "id",
        "kind": "numeric",
        "type": "bigint",
        "value": None,
        "planned_to": 50,
    }
    assert _shape(_ranges(plan)) == [(5, 50, True, True, True)]


def test_start_from_replaces_the_minimum() -> None:
    spec = _spec(backfill={"window": "10d", "start_from": "2024-01-10"})
    plan = _plan(
        spec,
        _cursor(spec, TSTZ),
        bounds=_bounds(
            TSTZ, dt.datetime(2020, 1, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 25, tzinfo=dt.UTC)
        ),
    )
    assert _shape(_ranges(plan)) == [
        ("2024-01-10T00:00:00+00:00", "2024-01-20T00:00:00+00:00", True, False, True),
        ("2024-01-20T00:00:00+00:00", "2024-01-25T00:00:00+00:00", True, True, False),
    ]


def test_a_numeric_start_from() -> None:
    spec = _spec(incremental="id", backfill={"start_from": 1000})
    plan = _plan(spec, _cursor(spec, "bigint"), bounds=_bounds("bigint", 1, 5000))
    assert _shape(_ranges(plan)) == [(1000, 5000, True, True, True)]


def test_a_table_level_incremental_overrides_the_pipeline() -> None:
    spec = _spec(tables=[{"name": "orders", "incremental": "id"}])
    assert incremental_of(spec, _table(spec)) == "id"
    plan = _plan(spec, _cursor(spec, "integer"), bounds=_bounds("integer", 1, 9))
    assert plan.cursor is not None and plan.cursor["column"] == "id"
    assert _shape(_ranges(plan)) == [(1, 9, True, True, True)]


def test_a_garbage_start_from_is_a_hakiri_error() -> None:
    spec = _spec(backfill={"start_from": "last tuesday"})
    with pytest.raises(HakiriError, match="last tuesday"):
        _plan(
            spec,
            _cursor(spec, TS),
            bounds=_bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 2, 1)),
        )


def test_rows_before_start_from_are_never_planned() -> None:
    spec = _spec(backfill={"start_from": "2024-03-01"})
    cursor = _cursor(spec, TS)
    first = _plan(
        spec, cursor, bounds=_bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 2, 1))
    )
    assert first.batches == []
    second = _plan(
        spec,
        cursor,
        state=first.cursor,
        bounds=_bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 3, 15)),
    )
    assert not any(
        r.overlaps("2024-02-15T00:00:00", "2024-02-15T00:00:00") for r in _ranges(second)
    )


# ---------------------------------------------------------------- an earlier plan still running


@pytest.mark.parametrize(
    "status", [BatchStatus.PENDING, BatchStatus.PROCESSING, BatchStatus.FAILED]
)
def test_unfinished_batches_hold_back_new_ones(status: BatchStatus) -> None:
    spec = _spec(backfill={"window": "7d"})
    cursor = _cursor(spec, TS)
    ranges = plan_ranges(cursor, "2024-01-01", "2024-02-01", "7d")
    existing = [_stored(chunk_batch("orders", r)) for r in ranges]
    existing[2] = _stored(chunk_batch("orders", ranges[2]), status)
    existing[3] = _stored(chunk_batch("orders", ranges[3]), status)
    plan = _plan(spec, cursor, state={"column": "updated_at"}, existing=existing)
    assert plan.batches == []
    assert plan.cursor is None
    assert not plan.planning
    assert plan.notes == ["orders: 2 batch(es) of an earlier plan to finish"]


# ---------------------------------------------------------------- streaming


def _streaming_state(planned_to: Any, column: str = "updated_at", pg_type: str = TS) -> dict:
    kind = "numeric" if pg_type in ("bigint", "integer") else "timestamp"
    return {
        "column": column,
        "kind": kind,
        "type": pg_type,
        "value": planned_to,
        "planned_to": planned_to,
    }


def _committed_backfill(cursor: CursorColumn, start: Any, end: Any) -> list[Batch]:
    return [
        _stored(chunk_batch("orders", r), seq=i)
        for i, r in enumerate(plan_ranges(cursor, start, end, None))
    ]


def test_streaming_plans_the_new_rows_past_planned_to() -> None:
    spec = _spec()
    cursor = _cursor(spec, TS)
    state = _streaming_state("2024-01-20T00:00:00")
    plan = _plan(
        spec,
        cursor,
        state=state,
        existing=_committed_backfill(cursor, "2024-01-01T00:00:00", "2024-01-20T00:00:00"),
        bounds=_bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 1, 21, 6)),
    )
    assert not plan.planning
    assert plan.notes == []
    assert plan.cursor == {**state, "planned_to": "2024-01-21T06:00:00"}
    assert _shape(_ranges(plan)) == [
        ("2024-01-20T00:00:00", "2024-01-21T06:00:00", False, True, False)
    ]
    assert re.fullmatch(r"chunk:orders:g0:[0-9a-f]{32}", plan.batches[0].batch_id)


def test_streaming_a_numeric_cursor() -> None:
    spec = _spec(incremental="id")
    cursor = _cursor(spec, "bigint")
    state = _streaming_state(2500, column="id", pg_type="bigint")
    plan = _plan(spec, cursor, state=state, bounds=_bounds("bigint", 1, 2600))
    assert _shape(_ranges(plan)) == [(2500, 2600, False, True, False)]
    assert plan.cursor == {**state, "planned_to": 2600}


def test_streaming_goes_back_by_the_lag_and_reads_nulls_in_upsert() -> None:
    spec = _spec(incremental={"column": "updated_at", "lag": "1h"}, load=UPSERT)
    cursor = _cursor(spec, TSTZ)
    state = _streaming_state("2024-01-20T00:00:00+00:00", pg_type=TSTZ)
    plan = _plan(
        spec,
        cursor,
        state=state,
        bounds=_bounds(TSTZ, None, dt.datetime(2024, 1, 20, 0, 30, tzinfo=dt.UTC)),
    )
    assert _shape(_ranges(plan)) == [
        ("2024-01-19T23:00:00+00:00", "2024-01-20T00:30:00+00:00", False, True, True)
    ]
    assert plan.cursor == {**state, "planned_to": "2024-01-20T00:30:00+00:00"}


def test_streaming_upsert_skips_nulls_when_told_to() -> None:
    spec = _spec(incremental={"column": "updated_at", "on_null_cursor": "skip"}, load=UPSERT)
    cursor = _cursor(spec, TS)
    plan = _plan(
        spec,
        cursor,
        state=_streaming_state("2024-01-20T00:00:00"),
        bounds=_bounds(TS, None, dt.datetime(2024, 1, 21)),
    )
    assert [r.nulls for r in _ranges(plan)] == [False]


def test_streaming_append_never_reads_nulls_again() -> None:
    spec = _spec()  # append, on_null_cursor = include
    cursor = _cursor(spec, TS)
    assert cursor.include_nulls
    plan = _plan(
        spec,
        cursor,
        state=_streaming_state("2024-01-20T00:00:00"),
        bounds=_bounds(TS, None, dt.datetime(2024, 1, 21)),
    )
    assert [r.nulls for r in _ranges(plan)] == [False]


def test_streaming_a_long_gap_is_one_range_whatever_the_window() -> None:
    spec = _spec(backfill={"window": "7d"})
    cursor = _cursor(spec, TS)
    plan = _plan(
        spec,
        cursor,
        state=_streaming_state("2024-01-01T00:00:00"),
        bounds=_bounds(TS, None, dt.datetime(2024, 1, 20)),
    )
    assert _shape(_ranges(plan)) == [
        ("2024-01-01T00:00:00", "2024-01-20T00:00:00", False, True, False),
    ]
    assert not plan.planning


@pytest.mark.parametrize(
    "high",
    [dt.datetime(2024, 1, 20), dt.datetime(2024, 1, 19), None],
    ids=["unchanged", "lower", "emptied"],
)
def test_streaming_without_a_new_maximum_plans_nothing(high: dt.datetime | None) -> None:
    spec = _spec(incremental={"column": "updated_at", "lag": "1h"}, load=UPSERT)
    cursor = _cursor(spec, TS)
    plan = _plan(
        spec,
        cursor,
        state=_streaming_state("2024-01-20T00:00:00"),
        bounds=_bounds(TS, None, high),
    )
    assert plan == TablePlan()


def test_start_from_does_not_matter_once_streaming() -> None:
    spec = _spec(backfill={"start_from": "2024-01-15"})
    plan = _plan(
        spec,
        _cursor(spec, TS),
        state=_streaming_state("2024-01-20T00:00:00"),
        bounds=_bounds(TS, None, dt.datetime(2024, 1, 21)),
    )
    assert [r.lo for r in _ranges(plan)] == ["2024-01-20T00:00:00"]


def test_a_cursor_whose_column_type_changed_is_not_a_crash() -> None:
    spec = _spec()
    cursor = _cursor(spec, TSTZ)  # the column is now timestamptz
    state = _streaming_state("2024-01-20T00:00:00", pg_type=TS)  # planned as timestamp
    plan = _plan(
        spec,
        cursor,
        state=state,
        bounds=_bounds(TSTZ, None, dt.datetime(2024, 1, 21, tzinfo=dt.UTC)),
    )
    # timestamp -> timestamptz keeps the cursor's kind: streaming goes on past planned_to,
    # read as UTC, and the cursor now records the new type.
    assert not plan.planning
    assert plan.notes == []
    assert _shape(_ranges(plan)) == [
        ("2024-01-20T00:00:00+00:00", "2024-01-21T00:00:00+00:00", False, True, False)
    ]
    assert [r.pg_type for r in _ranges(plan)] == [TSTZ]
    assert plan.cursor == {**state, "type": TSTZ, "planned_to": "2024-01-21T00:00:00+00:00"}


def test_a_cursor_whose_kind_changed_is_refused_with_a_hint() -> None:
    spec = _spec()
    cursor = _cursor(spec, "bigint")  # the column is now a number
    state = _streaming_state("2024-01-20T00:00:00", pg_type=TS)  # planned as timestamp
    with pytest.raises(HakiriError) as refused:
        _plan(spec, cursor, state=state, bounds=_bounds("bigint", 1, 2600))
    assert refused.value.reason == (
        "cursor column updated_at of source table orders is a numeric cursor now (bigint), "
        "but its backfill was planned as timestamp"
    )
    assert refused.value.hint == "change the column back, or load the table under a new pipeline id"


# ---------------------------------------------------------------- snapshots


@pytest.mark.parametrize(
    ("overrides", "pg_type"),
    [
        ({"load": {"mode": "truncate"}}, TS),
        ({"load": {"mode": "blue_green"}}, TS),
        ({"load": {"mode": "truncate"}, "incremental": None}, None),
        ({"load": UPSERT, "incremental": None}, None),
    ],
    ids=["truncate", "blue_green", "truncate-no-cursor", "upsert-no-cursor"],
)
def test_full_refresh_or_no_cursor_reads_one_snapshot(
    overrides: dict[str, Any], pg_type: str | None
) -> None:
    spec = _spec(**overrides)
    cursor = _cursor(spec, pg_type) if pg_type else None
    plan = _plan(spec, cursor, fingerprint=lambda: "1200:987654321")
    digest = hashlib.sha256(b"1200:987654321").hexdigest()
    assert plan.batches == [
        NewBatch(f"snapshot:orders:{digest}", "orders", "snapshot", predicate="rows 1200:987654321")
    ]
    assert plan.cursor is None
    assert not plan.planning


def test_an_unchanged_table_is_not_snapshotted_again() -> None:
    spec = _spec(load={"mode": "truncate"}, incremental=None)
    loaded = _stored(snapshot_table_batch("orders", "1200:987654321"))
    assert _plan(spec, None, existing=[loaded], fingerprint=lambda: "1200:987654321") == (
        TablePlan()
    )
    changed = _plan(spec, None, existing=[loaded], fingerprint=lambda: "1201:55")
    assert [b.batch_id for b in changed.batches] == [
        snapshot_table_batch("orders", "1201:55").batch_id
    ]


def test_rows_the_table_held_before_another_snapshot_are_loaded_again() -> None:
    """Deleting the rows inserted since a snapshot brings the fingerprint back to it; the
    target, loaded from the later snapshot, holds those rows: it must follow again."""
    spec = _spec(load={"mode": "scd2", "key": ["id"]}, incremental=None)
    first = _stored(snapshot_table_batch("orders", "2:20"), seq=1)
    second = _stored(snapshot_table_batch("orders", "5:50"), seq=2)
    back = _plan(spec, None, existing=[first, second], fingerprint=lambda: "2:20")
    [batch] = back.batches
    assert batch.batch_id not in (first.batch_id, second.batch_id)
    assert batch.batch_id == snapshot_table_batch("orders", "2:20", after=second.batch_id).batch_id
    # loaded, it is the table as last loaded
    third = _stored(batch, seq=3)
    assert _plan(spec, None, existing=[first, second, third], fingerprint=lambda: "2:20") == (
        TablePlan()
    )


def test_a_snapshot_from_a_catalog_without_fingerprints_still_tells_an_unchanged_table() -> None:
    spec = _spec(load={"mode": "truncate"}, incremental=None)
    old = _stored(replace(snapshot_table_batch("orders", "7:7"), predicate=None))
    assert _plan(spec, None, existing=[old], fingerprint=lambda: "7:7") == TablePlan()


def test_an_unfinished_snapshot_holds_back_the_next() -> None:
    spec = _spec(load={"mode": "truncate"}, incremental=None)
    pending = _stored(snapshot_table_batch("orders", "1:1"), BatchStatus.FAILED)
    plan = _plan(spec, None, existing=[pending])
    assert plan.batches == []
    assert len(plan.notes) == 1 and plan.notes[0].startswith("orders: 1 ")


def test_snapshot_batch_ids_are_deterministic() -> None:
    assert (
        snapshot_table_batch("orders", "a").batch_id == snapshot_table_batch("orders", "a").batch_id
    )
    assert (
        snapshot_table_batch("orders", "a").batch_id != snapshot_table_batch("orders", "b").batch_id
    )
    assert (
        snapshot_table_batch("orders", "a").batch_id != snapshot_table_batch("items", "a").batch_id
    )


# ---------------------------------------------------------------- check_cursor_fits_mode

WHERE = "pipeline `shop` (source table public.orders)"


def test_append_without_a_cursor_is_refused() -> None:
    with pytest.raises(HakiriError) as caught:
        check_cursor_fits_mode(_spec(incremental=None), None, WHERE)
    assert WHERE in caught.value.reason
    assert "no incremental cursor" in caught.value.reason
    assert caught.value.hint is not None and "incremental" in caught.value.hint


@pytest.mark.parametrize(
    "load", [UPSERT, {"mode": "truncate"}, {"mode": "blue_green"}], ids=lambda m: m["mode"]
)
def test_other_modes_without_a_cursor_are_fine(load: dict[str, Any]) -> None:
    check_cursor_fits_mode(_spec(incremental=None, load=load), None, WHERE)


def test_append_with_a_cursor_is_fine() -> None:
    spec = _spec()
    check_cursor_fits_mode(spec, _cursor(spec, TS), WHERE)


@pytest.mark.parametrize("mode", ["append", "truncate", "blue_green"])
def test_lag_without_upsert_is_refused(mode: str) -> None:
    spec = _spec(incremental={"column": "updated_at", "lag": "10m"}, load={"mode": mode})
    with pytest.raises(HakiriError) as caught:
        check_cursor_fits_mode(spec, _cursor(spec, TS), WHERE)
    assert "`lag`" in caught.value.reason
    assert f"'{mode}'" in caught.value.reason
    assert caught.value.hint is not None and "upsert" in caught.value.hint


def test_lag_with_upsert_is_fine() -> None:
    spec = _spec(incremental={"column": "updated_at", "lag": "10m"}, load=UPSERT)
    check_cursor_fits_mode(spec, _cursor(spec, TS), WHERE)


# ---------------------------------------------------------------- chunk ids

CHUNK = CursorRange("id", "numeric", "bigint", 0, 1000)


def test_chunk_batch_ids_are_deterministic() -> None:
    first, again = chunk_batch("orders", CHUNK), chunk_batch("orders", CHUNK)
    assert first == again
    assert first.predicate == CHUNK.to_predicate()
    assert first.kind == "chunk"
    assert first.table_name == "orders"
    digest = hashlib.sha256(CHUNK.to_predicate().encode()).hexdigest()[:32]
    assert first.batch_id == f"chunk:orders:g0:{digest}"
    # an equal range rebuilt from its stored predicate has the same id
    assert chunk_batch("orders", CursorRange.from_predicate(first.predicate or "")) == first


def test_a_generation_changes_the_chunk_id() -> None:
    g0, g1, g2 = (chunk_batch("orders", CHUNK, generation=g) for g in (0, 1, 2))
    assert len({g0.batch_id, g1.batch_id, g2.batch_id}) == 3
    assert g1.batch_id.startswith("chunk:orders:g1:")
    assert g1.generation == 1
    assert g0.predicate == g1.predicate == g2.predicate
    assert g0.batch_id.rsplit(":", 1)[1] == g1.batch_id.rsplit(":", 1)[1]


def test_the_table_and_any_part_of_the_range_change_the_chunk_id() -> None:
    ids = {
        chunk_batch("orders", CHUNK).batch_id,
        chunk_batch("items", CHUNK).batch_id,
        chunk_batch("orders", CursorRange("id", "numeric", "bigint", 0, 1001)).batch_id,
        chunk_batch("orders", CursorRange("id", "numeric", "bigint", 0, 1000, nulls=True)).batch_id,
        chunk_batch(
            "orders", CursorRange("id", "numeric", "bigint", 0, 1000, hi_inclusive=True)
        ).batch_id,
    }
    assert len(ids) == 5


def test_planning_twice_gives_the_same_batches() -> None:
    spec = _spec(backfill={"window": "7d"})
    cursor = _cursor(spec, TS)
    bounds = _bounds(TS, dt.datetime(2024, 1, 1), dt.datetime(2024, 3, 1))
    assert _plan(spec, cursor, bounds=bounds) == _plan(spec, cursor, bounds=bounds)


# ---------------------------------------------------------------- committed_cursor


def _chunks(generation: int = 0) -> list[NewBatch]:
    ranges = plan_ranges(CursorColumn.resolve("id", "bigint", "orders"), 0, 400, 100)
    return [chunk_batch("orders", r, generation) for r in ranges]


STATE = {"column": "id", "kind": "numeric", "type": "bigint", "value": None, "planned_to": 400}


def test_committed_cursor_advances_over_every_committed_chunk() -> None:
    existing = [_stored(b) for b in _chunks()]
    assert committed_cursor(existing, STATE) == {**STATE, "value": 400}


def test_committed_cursor_stops_at_the_first_unfinished_chunk() -> None:
    a, b, c, d = _chunks()
    existing = [
        _stored(a),
        _stored(b),
        _stored(c, BatchStatus.PENDING),
        _stored(d),  # committed, but after a gap
    ]
    assert committed_cursor(existing, STATE) == {**STATE, "value": 200}


@pytest.mark.parametrize(
    "status", [BatchStatus.PENDING, BatchStatus.PROCESSING, BatchStatus.FAILED]
)
def test_committed_cursor_keeps_the_value_when_the_first_chunk_is_unfinished(
    status: BatchStatus,
) -> None:
    a, b, c, d = _chunks()
    existing = [_stored(a, status), _stored(b), _stored(c), _stored(d)]
    assert committed_cursor(existing, STATE) == STATE
    assert committed_cursor(existing, {**STATE, "value": 7}) == {**STATE, "value": 7}


def test_committed_cursor_orders_chunks_by_range_not_by_catalog_order() -> None:
    a, b, c, d = _chunks()
    existing = [_stored(d, seq=0), _stored(b, seq=1), _stored(c, seq=2), _stored(a, seq=3)]
    assert committed_cursor(existing, STATE)["value"] == 400
    existing = [
        _stored(d, seq=0),
        _stored(c, BatchStatus.PENDING, seq=1),
        _stored(a, seq=2),
        _stored(b, seq=3),
    ]
    assert committed_cursor(existing, STATE)["value"] == 200


def test_committed_cursor_uses_the_highest_generation_of_a_range() -> None:
    old = _chunks(0)
    rewound = _chunks(1)
    # chunk b was rewound (generation 1) and is not committed again yet
    existing = [_stored(b) for b in old] + [_stored(rewound[1], BatchStatus.PENDING)]
    assert committed_cursor(existing, STATE)["value"] == 100
    # the rewound chunk is committed: the cursor runs through again
    existing[-1] = _stored(rewound[1])
    assert committed_cursor(existing, STATE)["value"] == 400
    # an old generation that failed does not matter once a newer one committed
    existing = [
        _stored(old[0]),
        _stored(old[1], BatchStatus.FAILED),
        _stored(rewound[1]),
        _stored(old[2]),
        _stored(old[3]),
    ]
    assert committed_cursor(existing, STATE)["value"] == 400


def test_committed_cursor_ignores_other_batch_kinds_and_keeps_other_keys() -> None:
    snapshot = _stored(snapshot_table_batch("orders", "x"), BatchStatus.PENDING)
    a, b, *_ = _chunks()
    state = {**STATE, "extra": "kept"}
    result = committed_cursor([snapshot, _stored(a), _stored(b, BatchStatus.PENDING)], state)
    assert result == {**state, "value": 100}
    assert committed_cursor([], state) == state


def test_committed_cursor_over_a_backfill_and_a_lagged_stream() -> None:
    spec = _spec(incremental={"column": "updated_at", "lag": "1h"}, load=UPSERT)
    cursor = _cursor(spec, TSTZ)
    first = _plan(
        spec,
        cursor,
        bounds=_bounds(
            TSTZ, dt.datetime(2024, 1, 1, tzinfo=dt.UTC), dt.datetime(2024, 1, 2, tzinfo=dt.UTC)
        ),
    )
    assert first.cursor is not None
    backfill = [_stored(b) for b in first.batches]
    state = committed_cursor(backfill, first.cursor)
    assert state["value"] == "2024-01-02T00:00:00+00:00"
    stream = _plan(
        spec,
        cursor,
        state=state,
        existing=backfill,
        bounds=_bounds(TSTZ, None, dt.datetime(2024, 1, 2, 5, tzinfo=dt.UTC)),
    )
    assert stream.cursor is not None
    pending = [*backfill, *(_stored(b, BatchStatus.PENDING) for b in stream.batches)]
    assert committed_cursor(pending, stream.cursor)["value"] == "2024-01-02T00:00:00+00:00"
    done = [*backfill, *(_stored(b) for b in stream.batches)]
    assert committed_cursor(done, stream.cursor)["value"] == "2024-01-02T05:00:00+00:00"
