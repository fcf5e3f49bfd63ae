"""Cursor values and chunk ranges of a table source: pure data, no database."""

from __future__ import annotations

import datetime as dt
import itertools
import json
import random
from decimal import Decimal

import pytest

from hakiri.errors import HakiriError
from hakiri.sources.cursors import ranges as cursors
from hakiri.sources.cursors.ranges import (
    MAX_CHUNKS,
    CursorColumn,
    CursorRange,
    as_json,
    as_python,
    cursor_kind_of,
    parse_value,
    plan_ranges,
    shift_back,
)
from hakiri.spec.pipeline import CursorKind, IncrementalSpec

WHERE = "source table public.orders"
TS = "timestamp without time zone"
TSTZ = "timestamp with time zone"


def _cursor(pg_type: str = TS, column: str = "updated_at", **options: object) -> CursorColumn:
    if options:
        return CursorColumn.resolve(
            IncrementalSpec.model_validate({"column": column, **options}), pg_type, WHERE
        )
    return CursorColumn.resolve(column, pg_type, WHERE)


def _ids(pg_type: str = "bigint") -> CursorColumn:
    return _cursor(pg_type, column="id")


def _shape(ranges: list[CursorRange]) -> list[tuple[object, object, bool, bool, bool]]:
    return [(r.lo, r.hi, r.lo_inclusive, r.hi_inclusive, r.nulls) for r in ranges]


# ---------------------------------------------------------------- cursor_kind_of


@pytest.mark.parametrize(
    ("pg_type", "kind"),
    [
        ("timestamp with time zone", CursorKind.TIMESTAMP),
        ("timestamp without time zone", CursorKind.TIMESTAMP),
        ("TIMESTAMP WITH TIME ZONE", CursorKind.TIMESTAMP),
        ("date", CursorKind.TIMESTAMP),
        ("smallint", CursorKind.NUMERIC),
        ("integer", CursorKind.NUMERIC),
        ("bigint", CursorKind.NUMERIC),
        ("numeric", CursorKind.NUMERIC),
        ("numeric(12,2)", CursorKind.NUMERIC),
        ("text", None),
        ("uuid", None),
        ("character varying(20)", None),
        ("boolean", None),
        ("double precision", None),
        ("time without time zone", None),
        ("time with time zone", None),
        ("interval", None),
        ("jsonb", None),
    ],
)
def test_cursor_kind_of_a_postgres_type(pg_type: str, kind: CursorKind | None) -> None:
    assert cursor_kind_of(pg_type) is kind


@pytest.mark.parametrize(
    "pg_type", ["integer[]", "bigint[]", "timestamp with time zone[]", "daterange"]
)
def test_array_and_range_types_are_not_cursors(pg_type: str) -> None:
    assert cursor_kind_of(pg_type) is None


# ---------------------------------------------------------------- CursorColumn.resolve


def test_resolve_discovers_the_kind_from_the_type() -> None:
    stamp = _cursor(TSTZ)
    assert stamp == CursorColumn("updated_at", CursorKind.TIMESTAMP, TSTZ, 0, True)
    assert stamp.aware
    assert not _cursor(TS).aware
    assert not _cursor("date").aware

    ids = _ids("numeric(12,2)")
    assert ids.kind is CursorKind.NUMERIC
    assert ids.pg_type == "numeric(12,2)"
    assert not ids.aware


def test_resolve_accepts_an_incremental_spec_whose_kind_matches() -> None:
    assert _cursor("bigint", column="id", kind="numeric").kind is CursorKind.NUMERIC
    assert _cursor(TSTZ, kind="timestamp").kind is CursorKind.TIMESTAMP


def test_a_declared_kind_the_column_type_contradicts_is_refused() -> None:
    with pytest.raises(HakiriError) as caught:
        _cursor("bigint", column="order_no", kind="timestamp")
    error = caught.value
    assert "order_no" in error.reason
    assert WHERE in error.reason
    assert "bigint" in error.reason
    assert "not a timestamp cursor" in error.reason
    assert error.hint is not None and "kind = 'numeric'" in error.hint

    with pytest.raises(HakiriError) as caught:
        _cursor(TS, kind="numeric")
    assert "updated_at" in caught.value.reason
    assert caught.value.hint is not None and "kind = 'timestamp'" in caught.value.hint


@pytest.mark.parametrize("pg_type", ["text", "uuid", "boolean"])
def test_a_column_type_that_cannot_be_a_cursor_is_refused(pg_type: str) -> None:
    with pytest.raises(HakiriError) as caught:
        _cursor(pg_type, column="code")
    assert "code" in caught.value.reason
    assert pg_type in caught.value.reason
    assert "cannot be a cursor" in caught.value.reason
    assert caught.value.hint


def test_lag_on_a_numeric_cursor_is_refused() -> None:
    with pytest.raises(HakiriError) as caught:
        _cursor("bigint", column="id", lag="5m")
    assert "`lag`" in caught.value.reason
    assert "id" in caught.value.reason
    assert caught.value.hint is not None and "timestamp" in caught.value.hint


@pytest.mark.parametrize(
    ("lag", "seconds"), [("30s", 30), ("15m", 900), ("2h", 7200), ("1d", 86400)]
)
def test_lag_is_parsed_into_seconds(lag: str, seconds: int) -> None:
    assert _cursor(TSTZ, lag=lag).lag_seconds == seconds


def test_on_null_cursor_sets_include_nulls() -> None:
    assert _cursor(TS).include_nulls
    assert _cursor(TS, on_null_cursor="include").include_nulls
    assert not _cursor(TS, on_null_cursor="skip").include_nulls


# ---------------------------------------------------------------- to_json / from_config


def test_to_json_of_an_aware_datetime_on_a_timestamptz_column_is_utc_with_offset() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    value = dt.datetime(2024, 1, 1, 12, 30, 15, 123456, tzinfo=plus_two)
    assert _cursor(TSTZ).to_json(value) == "2024-01-01T10:30:15.123456+00:00"


def test_to_json_of_an_aware_datetime_on_a_naive_column_drops_the_offset_after_converting() -> None:
    plus_two = dt.timezone(dt.timedelta(hours=2))
    value = dt.datetime(2024, 1, 1, 1, 0, tzinfo=plus_two)
    assert _cursor(TS).to_json(value) == "2023-12-31T23:00:00"


def test_to_json_of_a_naive_datetime_keeps_it() -> None:
    assert _cursor(TS).to_json(dt.datetime(2024, 2, 29, 23, 59, 59)) == "2024-02-29T23:59:59"


def test_to_json_of_a_date_is_midnight() -> None:
    assert _cursor("date").to_json(dt.date(2024, 1, 31)) == "2024-01-31T00:00:00"


def test_to_json_of_none_is_none() -> None:
    assert _cursor(TSTZ).to_json(None) is None
    assert _ids().to_json(None) is None


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (42, 42),
        (2**62, 2**62),
        (-7, -7),
        (Decimal("12"), 12),
        (Decimal("12.00"), 12),
        (Decimal("1E+3"), 1000),
        (Decimal("12.50"), "12.50"),
        (Decimal("0.001"), "0.001"),
    ],
)
def test_to_json_of_numbers(value: object, stored: object) -> None:
    result = _ids("numeric(12,2)").to_json(value)
    assert result == stored
    assert type(result) is type(stored)


def test_to_json_round_trips_through_as_python() -> None:
    moment = dt.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=dt.UTC)
    assert as_python(CursorKind.TIMESTAMP, _cursor(TSTZ).to_json(moment)) == moment
    naive = dt.datetime(2024, 5, 6, 7, 8, 9)
    assert as_python(CursorKind.TIMESTAMP, _cursor(TS).to_json(naive)) == naive
    for number in (Decimal("12.50"), Decimal(7), Decimal("-0.5")):
        assert as_python(CursorKind.NUMERIC, _ids("numeric").to_json(number)) == number


def test_from_config_follows_the_column_awareness() -> None:
    assert _cursor(TSTZ).from_config("2024-01-31") == "2024-01-31T00:00:00+00:00"
    assert _cursor(TS).from_config("2024-01-31T12:00:00Z") == "2024-01-31T12:00:00"
    assert _ids().from_config(1000) == 1000
    assert _ids().from_config("1000") == 1000


# ---------------------------------------------------------------- parse_value


@pytest.mark.parametrize(
    ("text", "naive", "aware"),
    [
        ("2024-01-31T12:00:00Z", "2024-01-31T12:00:00", "2024-01-31T12:00:00+00:00"),
        ("2024-01-31T12:00:00+02:00", "2024-01-31T10:00:00", "2024-01-31T10:00:00+00:00"),
        ("2024-01-31T01:00:00-05:30", "2024-01-31T06:30:00", "2024-01-31T06:30:00+00:00"),
        ("2024-01-31 12:00:00+00:00", "2024-01-31T12:00:00", "2024-01-31T12:00:00+00:00"),
        ("2024-01-31T12:00:00", "2024-01-31T12:00:00", "2024-01-31T12:00:00+00:00"),
        ("2024-01-31", "2024-01-31T00:00:00", "2024-01-31T00:00:00+00:00"),
        ("2024-01-01T00:30:00+01:00", "2023-12-31T23:30:00", "2023-12-31T23:30:00+00:00"),
    ],
)
def test_parse_value_normalises_timestamps_to_utc(text: str, naive: str, aware: str) -> None:
    assert parse_value(CursorKind.TIMESTAMP, text, "updated_at") == naive
    assert parse_value(CursorKind.TIMESTAMP, text, "updated_at", aware=True) == aware


def test_parse_value_is_idempotent() -> None:
    for aware in (False, True):
        once = parse_value(CursorKind.TIMESTAMP, "2024-01-31T12:00:00+02:00", "c", aware=aware)
        assert parse_value(CursorKind.TIMESTAMP, once, "c", aware=aware) == once
    assert parse_value(CursorKind.NUMERIC, parse_value(CursorKind.NUMERIC, "12.5", "c"), "c") == (
        "12.5"
    )


@pytest.mark.parametrize(
    "garbage",
    ["yesterday", "2024-13-01", "2024-02-30", "", "1000", 1000, "2024-01-01'; DROP TABLE x; --"],
)
def test_parse_value_refuses_what_is_not_a_timestamp(garbage: object) -> None:
    with pytest.raises(HakiriError) as caught:
        parse_value(CursorKind.TIMESTAMP, garbage, "updated_at")
    assert repr(garbage) in caught.value.reason
    assert "updated_at" in caught.value.reason
    assert "timestamp cursor" in caught.value.reason
    assert caught.value.hint is not None and "2024-01-31" in caught.value.hint


@pytest.mark.parametrize(
    ("value", "stored"),
    [
        (1000, 1000),
        ("1000", 1000),
        (" 1000 ", 1000),
        ("-5", -5),
        ("1e3", 1000),
        (1000.0, 1000),
        (Decimal("12.00"), 12),
        ("12.5", "12.5"),
        (12.5, "12.5"),
        (Decimal("0.25"), "0.25"),
    ],
)
def test_parse_value_of_numbers(value: object, stored: object) -> None:
    result = parse_value(CursorKind.NUMERIC, value, "id")
    assert result == stored
    assert type(result) is type(stored)


@pytest.mark.parametrize("garbage", ["abc", "", "NaN", "Infinity", "-inf", None, True, "1; DROP"])
def test_parse_value_refuses_what_is_not_a_number(garbage: object) -> None:
    with pytest.raises(HakiriError) as caught:
        parse_value(CursorKind.NUMERIC, garbage, "id")
    assert repr(garbage) in caught.value.reason
    assert "id is a numeric cursor" in caught.value.reason
    assert caught.value.hint is not None and "integer" in caught.value.hint


# ---------------------------------------------------------------- plan_ranges


def test_plan_ranges_cuts_a_timestamp_interval_by_a_duration() -> None:
    ranges = plan_ranges(_cursor(TS), "2024-01-01T00:00:00", "2024-01-20T00:00:00", "7d")
    assert _shape(ranges) == [
        ("2024-01-01T00:00:00", "2024-01-08T00:00:00", True, False, False),
        ("2024-01-08T00:00:00", "2024-01-15T00:00:00", True, False, False),
        ("2024-01-15T00:00:00", "2024-01-20T00:00:00", True, True, False),
    ]
    assert {(r.column, r.kind, r.pg_type) for r in ranges} == {("updated_at", "timestamp", TS)}


def test_plan_ranges_keeps_the_offset_of_an_aware_cursor() -> None:
    ranges = plan_ranges(
        _cursor(TSTZ), "2024-01-01T00:00:00+00:00", "2024-01-02T12:00:00+00:00", "1d"
    )
    assert [(r.lo, r.hi) for r in ranges] == [
        ("2024-01-01T00:00:00+00:00", "2024-01-02T00:00:00+00:00"),
        ("2024-01-02T00:00:00+00:00", "2024-01-02T12:00:00+00:00"),
    ]


def test_plan_ranges_cuts_a_numeric_interval_by_a_count() -> None:
    ranges = plan_ranges(_ids(), 1, 1000, 300)
    assert _shape(ranges) == [
        (1, 301, True, False, False),
        (301, 601, True, False, False),
        (601, 901, True, False, False),
        (901, 1000, True, True, False),
    ]
    assert {r.kind for r in ranges} == {"numeric"}


def test_plan_ranges_ends_on_the_last_edge_without_an_empty_range() -> None:
    ranges = plan_ranges(_ids(), 0, 900, 300)
    assert _shape(ranges) == [
        (0, 300, True, False, False),
        (300, 600, True, False, False),
        (600, 900, True, True, False),
    ]


def test_plan_ranges_of_non_integer_numeric_bounds() -> None:
    ranges = plan_ranges(_ids("numeric(12,2)"), "0.5", 10, 5)
    assert [(r.lo, r.hi) for r in ranges] == [("0.5", "5.5"), ("5.5", 10)]


def test_plan_ranges_puts_nulls_in_the_first_range_only() -> None:
    ranges = plan_ranges(_ids(), 0, 1000, 300, nulls_in_first=True)
    assert [r.nulls for r in ranges] == [True, False, False, False]


def test_plan_ranges_with_an_exclusive_start() -> None:
    ranges = plan_ranges(_ids(), 100, 1000, 300, start_inclusive=False)
    assert [r.lo_inclusive for r in ranges] == [False, True, True]
    assert ranges[0].lo == 100
    assert ranges[-1].hi_inclusive


def test_plan_ranges_of_a_start_after_the_end_is_empty() -> None:
    assert plan_ranges(_ids(), 10, 9, 300) == []
    assert plan_ranges(_ids(), 10, 9, None) == []
    assert plan_ranges(_cursor(TS), "2024-02-01", "2024-01-01", "7d") == []


def test_plan_ranges_of_a_single_point() -> None:
    [only] = plan_ranges(_ids(), 10, 10, 300)
    assert _shape([only]) == [(10, 10, True, True, False)]
    assert only.overlaps(10, 10)
    assert plan_ranges(_ids(), 10, 10, 300, start_inclusive=False) == []


def test_plan_ranges_without_a_window_is_one_range() -> None:
    [only] = plan_ranges(
        _cursor(TS), "2020-01-01T00:00:00", "2024-01-01T00:00:00", None, nulls_in_first=True
    )
    assert _shape([only]) == [("2020-01-01T00:00:00", "2024-01-01T00:00:00", True, True, True)]
    [exclusive] = plan_ranges(_ids(), 5, 10**12, None, start_inclusive=False)
    assert _shape([exclusive]) == [(5, 10**12, False, True, False)]


def test_a_window_larger_than_the_interval_is_one_range() -> None:
    assert _shape(plan_ranges(_ids(), 1, 10, 1000)) == [(1, 10, True, True, False)]


def test_a_duration_window_on_a_numeric_cursor_is_refused() -> None:
    with pytest.raises(HakiriError) as caught:
        plan_ranges(_ids(), 1, 1000, "7d")
    assert "'7d'" in caught.value.reason
    assert "id is a numeric cursor" in caught.value.reason
    assert caught.value.hint is not None and "window = 100000" in caught.value.hint


def test_an_id_count_window_on_a_timestamp_cursor_is_refused() -> None:
    with pytest.raises(HakiriError) as caught:
        plan_ranges(_cursor(TS), "2024-01-01", "2024-02-01", 1000)
    assert "1000" in caught.value.reason
    assert "updated_at is a timestamp cursor" in caught.value.reason
    assert caught.value.hint is not None and "'30d'" in caught.value.hint


def test_more_than_max_chunks_is_refused() -> None:
    with pytest.raises(HakiriError) as caught:
        plan_ranges(_cursor(TS), "2000-01-01", "2024-01-01", "1s")
    assert f"{MAX_CHUNKS:,}" in caught.value.reason
    assert "updated_at" in caught.value.reason
    assert caught.value.hint is not None and "window" in caught.value.hint
    with pytest.raises(HakiriError):
        plan_ranges(_ids(), 0, MAX_CHUNKS + 1, 1)


def test_exactly_max_chunks_is_allowed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(cursors, "MAX_CHUNKS", 10)
    assert len(plan_ranges(_ids(), 0, 10, 1)) == 10
    with pytest.raises(HakiriError, match="more than 10 chunks"):
        plan_ranges(_ids(), 0, 11, 1)


def _assert_tiles(ranges: list[CursorRange], start: int, end: int, start_inclusive: bool) -> None:
    assert ranges, (start, end)
    assert ranges[0].lo == start
    assert ranges[0].lo_inclusive is start_inclusive
    assert ranges[-1].hi == end
    assert ranges[-1].hi_inclusive
    for before, after in itertools.pairwise(ranges):
        assert before.hi == after.lo  # no gap
        assert not before.hi_inclusive and after.lo_inclusive  # no overlap
    first = start if start_inclusive else start + 1
    for value in range(start - 2, end + 3):
        holders = [r for r in ranges if r.overlaps(value, value)]
        expected = 1 if first <= value <= end else 0
        assert len(holders) == expected, (value, _shape(ranges))


@pytest.mark.parametrize("seed", range(8))
def test_numeric_ranges_tile_the_interval(seed: int) -> None:
    rng = random.Random(seed)
    for _ in range(15):
        start = rng.randint(-500, 500)
        end = start + rng.randint(0, 150)
        window = rng.choice([None, 1, 2, 3, 7, 50, 99, 100, 1000])
        for start_inclusive in (True, False):
            ranges = plan_ranges(_ids(), start, end, window, start_inclusive=start_inclusive)
            if not start_inclusive and start == end:
                assert ranges == []
                continue
            _assert_tiles(ranges, start, end, start_inclusive)
            if window is not None:
                assert all(
                    as_python(CursorKind.NUMERIC, r.hi) - as_python(CursorKind.NUMERIC, r.lo)
                    <= window
                    for r in ranges
                )


@pytest.mark.parametrize("seed", range(4))
def test_timestamp_ranges_tile_the_interval(seed: int) -> None:
    rng = random.Random(seed)
    origin = dt.datetime(2024, 1, 1)
    hour = dt.timedelta(hours=1)
    for _ in range(10):
        start = origin + rng.randint(0, 2000) * dt.timedelta(minutes=1)
        end = start + rng.randint(0, 24 * 10) * hour
        window = rng.choice(["90m", "36h", "7d", "30d"])
        ranges = plan_ranges(_cursor(TS), start.isoformat(), end.isoformat(), window)
        assert ranges[0].lo == start.isoformat()
        assert ranges[-1].hi == end.isoformat() and ranges[-1].hi_inclusive
        for before, after in itertools.pairwise(ranges):
            assert before.hi == after.lo
            assert not before.hi_inclusive and after.lo_inclusive
        point = start
        while point <= end:
            stamp = point.isoformat()
            assert sum(r.overlaps(stamp, stamp) for r in ranges) == 1, stamp
            point += hour


# ---------------------------------------------------------------- CursorRange.where_sql


def test_where_sql_of_a_timestamptz_range() -> None:
    chunk = CursorRange(
        "updated_at",
        "timestamp",
        TSTZ,
        "2024-01-01T00:00:00+00:00",
        "2024-02-01T00:00:00+00:00",
    )
    assert chunk.where_sql() == (
        "(\"updated_at\" >= CAST('2024-01-01 00:00:00+00:00' AS timestamp with time zone) "
        "AND \"updated_at\" < CAST('2024-02-01 00:00:00+00:00' AS timestamp with time zone))"
    )


def test_where_sql_of_a_naive_timestamp_range_with_nulls_and_an_exclusive_start() -> None:
    chunk = CursorRange(
        "updated_at",
        "timestamp",
        TS,
        "2024-01-01T00:00:00",
        "2024-01-02T00:00:00",
        lo_inclusive=False,
        hi_inclusive=True,
        nulls=True,
    )
    assert chunk.where_sql() == (
        "((\"updated_at\" > CAST('2024-01-01 00:00:00' AS timestamp without time zone) "
        "AND \"updated_at\" <= CAST('2024-01-02 00:00:00' AS timestamp without time zone)) "
        'OR "updated_at" IS NULL)'
    )


def test_where_sql_of_a_numeric_range() -> None:
    chunk = CursorRange("id", "numeric", "numeric(12,2)", 0, "10.5", hi_inclusive=True, nulls=True)
    assert chunk.where_sql() == (
        '(("id" >= CAST(\'0\' AS numeric) AND "id" <= CAST(\'10.5\' AS numeric)) OR "id" IS NULL)'
    )


def test_where_sql_of_half_open_and_unbounded_ranges() -> None:
    assert CursorRange("id", "numeric", "bigint", 5, None).where_sql() == (
        "(\"id\" >= CAST('5' AS bigint))"
    )
    assert CursorRange("id", "numeric", "bigint", None, 9).where_sql() == (
        "(\"id\" < CAST('9' AS bigint))"
    )
    assert CursorRange("id", "numeric", "bigint", None, None).where_sql() == "(TRUE)"
    assert CursorRange("id", "numeric", "bigint", None, None, nulls=True).where_sql() == (
        '((TRUE) OR "id" IS NULL)'
    )


def test_where_sql_quotes_the_column() -> None:
    chunk = CursorRange('we"ird col', "numeric", "integer", 1, None)
    assert chunk.where_sql() == '("we""ird col" >= CAST(\'1\' AS integer))'


def test_where_sql_casts_only_to_a_known_type_name() -> None:
    chunk = CursorRange("id", "numeric", "bigint; DROP TABLE x; --", 1, 2)
    with pytest.raises(HakiriError, match="which cannot be a cursor"):
        chunk.where_sql()


@pytest.mark.parametrize(
    ("kind", "pg_type", "lo", "hi"),
    [
        ("timestamp", TSTZ, "2024-01-01'; DROP TABLE x; --", "2024-02-01T00:00:00+00:00"),
        ("timestamp", TS, "2024-01-01T00:00:00", "2024-02-01' OR '1'='1"),
        ("numeric", "bigint", "1'; DROP TABLE x; --", 10),
        ("numeric", "bigint", 1, "10) OR (1=1"),
    ],
)
def test_a_tampered_predicate_cannot_produce_sql(
    kind: str, pg_type: str, lo: object, hi: object
) -> None:
    predicate = json.dumps(
        {
            "column": "c",
            "kind": kind,
            "pg_type": pg_type,
            "lo": lo,
            "hi": hi,
            "lo_inclusive": True,
            "hi_inclusive": False,
            "nulls": False,
        }
    )
    chunk = CursorRange.from_predicate(predicate)
    with pytest.raises((ValueError, ArithmeticError, HakiriError)):
        chunk.where_sql()


def test_a_predicate_of_an_unknown_kind_cannot_produce_sql() -> None:
    with pytest.raises((ValueError, HakiriError)):
        CursorRange("c", "text", "text", "a", "b").where_sql()


# ---------------------------------------------------------------- pg_type_sql


@pytest.mark.parametrize(
    ("pg_type", "cast"),
    [
        ("numeric(12,2)", "numeric"),
        ("numeric", "numeric"),
        (TSTZ, TSTZ),
        (TS, TS),
        ("date", "date"),
        ("smallint", "smallint"),
        ("integer", "integer"),
        ("bigint", "bigint"),
        ("BIGINT", "bigint"),
    ],
)
def test_pg_type_sql_is_the_type_without_its_typmod(pg_type: str, cast: str) -> None:
    kind = cursor_kind_of(pg_type)
    assert kind is not None
    assert CursorRange("c", kind.value, pg_type, None, None).pg_type_sql() == cast


@pytest.mark.parametrize("pg_type", ["text", "uuid", "double precision", "time with time zone"])
def test_pg_type_sql_refuses_other_types(pg_type: str) -> None:
    with pytest.raises(HakiriError) as caught:
        CursorRange("code", "numeric", pg_type, 1, 2).pg_type_sql()
    assert "code" in caught.value.reason
    assert pg_type in caught.value.reason
    assert caught.value.hint


@pytest.mark.parametrize(
    ("pg_type", "cast"),
    [
        ("timestamp(3) with time zone", TSTZ),
        ("timestamp(0) without time zone", TS),
    ],
)
def test_pg_type_sql_of_a_timestamp_with_a_precision(pg_type: str, cast: str) -> None:
    cursor = CursorColumn.resolve("updated_at", pg_type, WHERE)  # accepted as a cursor
    [chunk] = plan_ranges(cursor, "2024-01-01T00:00:00", "2024-01-02T00:00:00", None)
    assert chunk.pg_type_sql() == cast


# ---------------------------------------------------------------- describe


def test_describe() -> None:
    chunk = CursorRange("updated_at", "timestamp", TS, "2024-01-01T00:00:00", "2024-02-01T00:00:00")
    assert chunk.describe() == (
        "updated_at >= 2024-01-01T00:00:00 AND updated_at < 2024-02-01T00:00:00"
    )
    exclusive = CursorRange(
        "id", "numeric", "bigint", 1, 10, lo_inclusive=False, hi_inclusive=True, nulls=True
    )
    assert exclusive.describe() == "(id > 1 AND id <= 10) OR id IS NULL"
    assert CursorRange("id", "numeric", "bigint", 5, None).describe() == "id >= 5"
    assert CursorRange("id", "numeric", "bigint", None, 5).describe() == "id < 5"
    assert CursorRange("id", "numeric", "bigint", None, None).describe() == "all rows"


# ---------------------------------------------------------------- overlaps


def test_overlaps_at_an_inclusive_start_and_exclusive_end() -> None:
    chunk = CursorRange("id", "numeric", "bigint", 10, 20)
    assert not chunk.overlaps(0, 9)
    assert chunk.overlaps(0, 10)
    assert chunk.overlaps(10, 10)
    assert chunk.overlaps(12, 13)
    assert chunk.overlaps(19, 19)
    assert chunk.overlaps(19, 30)
    assert not chunk.overlaps(20, 20)
    assert not chunk.overlaps(20, 30)
    assert chunk.overlaps(0, 100)
    assert chunk.overlaps("19.99", "19.99")


def test_overlaps_at_an_exclusive_start_and_inclusive_end() -> None:
    chunk = CursorRange("id", "numeric", "bigint", 10, 20, lo_inclusive=False, hi_inclusive=True)
    assert not chunk.overlaps(0, 10)
    assert not chunk.overlaps(10, 10)
    assert chunk.overlaps("10.5", "10.5")
    assert chunk.overlaps(0, 11)
    assert chunk.overlaps(20, 20)
    assert chunk.overlaps(20, 30)
    assert not chunk.overlaps(21, 30)


def test_overlaps_of_unbounded_sides_and_nulls() -> None:
    assert CursorRange("id", "numeric", "bigint", None, 5).overlaps(-(10**9), -(10**9))
    assert not CursorRange("id", "numeric", "bigint", None, 5).overlaps(5, 5)
    assert CursorRange("id", "numeric", "bigint", 5, None).overlaps(10**9, 10**9)
    assert CursorRange("id", "numeric", "bigint", None, None).overlaps(0, 0)
    # NULL rows are not values: a nulls range overlaps no more than its bounds say.
    assert not CursorRange("id", "numeric", "bigint", 10, 20, nulls=True).overlaps(0, 5)


def test_overlaps_of_timestamps() -> None:
    chunk = CursorRange(
        "updated_at", "timestamp", TSTZ, "2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00"
    )
    assert chunk.overlaps("2023-12-31T23:59:59+00:00", "2024-01-01T00:00:00+00:00")
    assert not chunk.overlaps("2023-12-01T00:00:00+00:00", "2023-12-31T23:59:59+00:00")
    assert chunk.overlaps("2024-01-31T23:59:59.999999+00:00", "2024-03-01T00:00:00+00:00")
    assert not chunk.overlaps("2024-02-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00")
    # the same instant written in another offset
    assert not chunk.overlaps("2024-02-01T02:00:00+02:00", "2024-02-01T02:00:00+02:00")
    assert chunk.overlaps("2024-02-01T01:59:59+02:00", "2024-02-01T01:59:59+02:00")


# ---------------------------------------------------------------- predicates


def test_to_predicate_and_from_predicate_round_trip() -> None:
    for chunk in (
        CursorRange("updated_at", "timestamp", TSTZ, "2024-01-01T00:00:00+00:00", None),
        CursorRange("id", "numeric", "numeric(12,2)", "0.5", 10, False, True, True),
        CursorRange("id", "numeric", "bigint", None, None),
    ):
        text = chunk.to_predicate()
        assert CursorRange.from_predicate(text) == chunk
        assert CursorRange.from_predicate(text).to_predicate() == text


def test_to_predicate_is_sorted_json() -> None:
    text = CursorRange("id", "numeric", "bigint", 1, 2).to_predicate()
    document = json.loads(text)
    assert list(document) == sorted(document)
    assert document == {
        "column": "id",
        "kind": "numeric",
        "pg_type": "bigint",
        "lo": 1,
        "hi": 2,
        "lo_inclusive": True,
        "hi_inclusive": False,
        "nulls": False,
    }


def test_plan_ranges_output_survives_the_catalog() -> None:
    for chunk in plan_ranges(
        _cursor(TSTZ), "2024-01-01T00:00:00+00:00", "2024-03-01T00:00:00+00:00", "30d"
    ):
        again = CursorRange.from_predicate(chunk.to_predicate())
        assert again == chunk
        assert again.where_sql() == chunk.where_sql()


# ---------------------------------------------------------------- shift_back, as_json


def test_shift_back_moves_a_timestamp_back() -> None:
    assert shift_back(_cursor(TSTZ), "2024-01-01T00:00:00+00:00", 3600) == (
        "2023-12-31T23:00:00+00:00"
    )
    assert shift_back(_cursor(TS), "2024-03-01T00:30:00", 86400) == "2024-02-29T00:30:00"


def test_shift_back_leaves_numbers_and_zero_alone() -> None:
    assert shift_back(_ids(), 1000, 3600) == 1000
    assert shift_back(_cursor(TS), "2024-01-01T00:00:00", 0) == "2024-01-01T00:00:00"


def test_as_json_and_as_python_are_inverse() -> None:
    assert as_json(CursorKind.NUMERIC, Decimal("7")) == 7
    assert as_json(CursorKind.NUMERIC, Decimal("7.25")) == "7.25"
    moment = dt.datetime(2024, 1, 1, tzinfo=dt.UTC)
    assert as_json(CursorKind.TIMESTAMP, moment) == "2024-01-01T00:00:00+00:00"
    for kind, stored in (
        (CursorKind.NUMERIC, 7),
        (CursorKind.NUMERIC, "7.25"),
        (CursorKind.TIMESTAMP, "2024-01-01T00:00:00+00:00"),
        (CursorKind.TIMESTAMP, "2024-01-01T00:00:00"),
    ):
        assert as_json(kind, as_python(kind, stored)) == stored
