"""Row rules compiled to Spark Columns: what each rule rejects, what each on_fail does, one pass."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter

from hakiri.errors import HakiriError, RuleViolation, SourceDataError
from hakiri.quality.rules import CheckedBatch, check_rows
from hakiri.spec.quality import RowRule
from tests.support.spark_scans import cached_rdds, jobs_during

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

_RULE = TypeAdapter(RowRule)
UUID = "123e4567-e89b-12d3-a456-426614174000"


def rule(kind: str, column: str, on_fail: str = "abort", **keys: Any) -> Any:
    return _RULE.validate_python({"type": kind, "column": column, "on_fail": on_fail, **keys})


def rows(frame: DataFrame) -> list[tuple[Any, ...]]:
    # Test frames are a handful of rows; collecting them is what the assertion needs.
    return sorted((tuple(r) for r in frame.collect()), key=repr)


INTERNALS = "reads Spark's jobs, cache and plans (its UI and physical plan), which Sail lacks"


def persistent_rdds(spark: SparkSession) -> int | None:
    """Spark's cached RDDs (from its UI); None on Sail, which has no UI (its cache is not seen)."""
    ui = getattr(spark, "_hakiri_test_ui", None)
    return None if ui is None else cached_rdds(ui)


def records(batch: CheckedBatch) -> list[tuple[str, str, bool, Any]]:
    """Quarantine records as (rule_id, on_fail, dropped, id of the row)."""
    assert batch.quarantine is not None
    return sorted(
        (r.rule_id, r.on_fail, r.dropped, json.loads(r.row)["id"])
        for r in batch.quarantine.collect()
    )


# --- every rule kind x every on_fail -----------------------------------------------------


@dataclass(frozen=True)
class Case:
    kind: str
    schema: str  # "id int, <column> <type>"
    data: list[tuple[Any, Any]]
    keys: dict[str, Any]
    violators: list[int]  # ids of the rows that violate

    @property
    def column(self) -> str:
        return self.schema.split(",")[1].split()[0]


CASES = [
    # '' is NULL for not_null on strings; a blank is not.
    Case(
        "not_null",
        "id int, email string",
        [(1, "a@x"), (2, None), (3, ""), (4, " "), (5, "b@y")],
        {},
        [2, 3],
    ),
    # Searched, not anchored; NULL and '' pass.
    Case(
        "regex",
        "id int, email string",
        [(1, "a@x"), (2, "nope"), (3, None), (4, ""), (5, "x@")],
        {"pattern": "@"},
        [2],
    ),
    # Bounds inclusive; NaN violates; NULL passes.
    Case(
        "range",
        "id int, amount double",
        [(1, 0.0), (2, -1.0), (3, None), (4, 100.5), (5, float("nan")), (6, 100.0)],
        {"min": 0, "max": 100},
        [2, 4, 5],
    ),
    # Characters, not bytes.
    Case(
        "max_length",
        "id int, code string",
        [(1, "abc"), (2, "abcd"), (3, None), (4, ""), (5, "héé")],
        {"max": 3},
        [2],
    ),
    Case(
        "field_type",
        "id int, n string",
        [(1, "12"), (2, "1.5"), (3, None), (4, "x"), (5, " 7 ")],
        {"expected": "integer"},
        [2, 4],
    ),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.kind)
@pytest.mark.parametrize("on_fail", ["abort", "warn", "skip"])
def test_each_rule_kind_with_each_on_fail(spark: SparkSession, case: Case, on_fail: str) -> None:
    frame = spark.createDataFrame(case.data, case.schema)
    the_rule = rule(case.kind, case.column, on_fail, **case.keys)
    rule_id = f"{case.kind}:{case.column}"
    everything = rows(frame)
    n = len(case.violators)

    if on_fail == "abort":
        before = persistent_rdds(spark)
        with pytest.raises(RuleViolation) as raised:
            check_rows(frame, [the_rule], label="orders batch 1")
        reason = raised.value.reason
        assert reason.startswith(f"rule {rule_id} (abort) failed on orders batch 1: ")
        assert (
            f": {n} rows violate it; first: " in reason if n > 1 else "1 row violates it" in reason
        )
        first = json.loads(reason.split("; first: ", 1)[1])
        assert first["id"] in case.violators
        assert set(first) == {"id", case.column}  # the original row, null fields kept
        assert 'on_fail = "warn" or "skip"' in (raised.value.hint or "")
        assert persistent_rdds(spark) == before  # the cache was released before raising
        return

    batch = check_rows(frame, [the_rule], label="orders batch 1")
    try:
        assert batch.report is not None
        assert batch.report.counts == {rule_id: n}
        assert batch.report.rows_in == len(case.data)
        assert batch.report.quarantined == n
        dropped = on_fail == "skip"
        kept = [r for r in everything if not (dropped and r[0] in case.violators)]
        assert repr(rows(batch.clean)) == repr(kept)  # repr: NaN != NaN
        assert batch.clean.columns == frame.columns
        assert batch.report.rows_kept == len(kept)
        assert records(batch) == [(rule_id, on_fail, dropped, i) for i in case.violators]
    finally:
        batch.release()


def test_abort_passes_when_no_row_violates(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, "a"), (2, "b")], "id int, name string")
    batch = check_rows(frame, [rule("not_null", "name")], label="t")
    try:
        assert batch.quarantine is None  # no warn/skip rule: nothing to quarantine
        assert batch.report is not None
        assert batch.report.counts == {"not_null:name": 0}
        assert (batch.report.rows_in, batch.report.rows_kept, batch.report.quarantined) == (2, 2, 0)
        assert rows(batch.clean) == [(1, "a"), (2, "b")]
    finally:
        batch.release()


# --- field_type on strings ---------------------------------------------------------------

FIELD_TYPES = {
    "string": (["anything", "1", "{"], []),
    "integer": (
        ["12", " +3 ", "-0", "9223372036854775807"],
        ["1.5", "1.0", "1e3", "abc", "9223372036854775808", "0x1F", "1L"],
    ),
    "float": (
        ["1.5", "-2", "1e3", ".5", "NaN", "-Infinity", "inf", " 3.25 ", "1.0"],
        ["abc", "1d", "1f", "1,5", "0x1F", "1.5.1"],
    ),
    "boolean": (
        ["true", "FALSE", "t", "f", "Yes", "no", "y", "N", "on", "OFF", "1", "0", " true "],
        ["2", "tru", "ja", "truee", "-1"],
    ),
    "date": (
        ["2024-01-02", "2024-1-5", " 2024-12-31 ", "2024-02-29"],
        ["2024", "2024-01", "2024-02-30", "2024-01-02 10:00", "02/01/2024", "2024-13-01", "x"],
    ),
    "timestamp": (
        [
            "2024-01-02",
            "2024-01-02 10:00:00",
            "2024-01-02T10:00:00Z",
            "2024-01-02T10:00:00+02:00",
            "2024-01-02 10:00:00.123",
        ],
        ["2024", "2024-01-02T25:00", "2024-01-02 garbage", "yesterday", "20240102"],
    ),
    "json": (
        ['{"a": 1}', "[1, 2]", "3", '"x"', "null", "true", ' {"a":1} ', '{"a": {"b": [1]}}'],
        ['{"a":1} x', "{a:1}", "{'a':1}", "[1,]", "1 2", "NaN", '{"a":1}}', "1,2", "{"],
    ),
    "uuid": (
        [UUID, UUID.upper()],
        [UUID.replace("-", ""), "{" + UUID + "}", UUID[:-1] + "g", " " + UUID, UUID + "0"],
    ),
}


@pytest.mark.parametrize("expected", sorted(FIELD_TYPES))
def test_field_type_on_strings(spark: SparkSession, expected: str) -> None:
    good, bad = FIELD_TYPES[expected]
    values = [*good, *bad, None, ""]  # NULL and '' always pass
    frame = spark.createDataFrame(list(enumerate(values)), "id int, v string")
    batch = check_rows(frame, [rule("field_type", "v", "skip", expected=expected)], label="t")
    try:
        kept = sorted(v for _, v in batch.clean.collect() if v)
        assert kept == sorted(good)
        rejected = sorted(json.loads(r.row)["v"] for r in batch.quarantine.collect())  # type: ignore[union-attr]
        assert rejected == sorted(bad)
    finally:
        batch.release()


TYPED = [
    # (Spark type, values, expected, the values that violate)
    ("bigint", [1, -5, 0], "integer", []),
    ("bigint", [1, -5], "float", []),
    ("bigint", [0, 1, 2], "boolean", [2]),
    ("bigint", [7], "uuid", [7]),
    ("bigint", [7], "json", [7]),
    ("bigint", [7], "date", [7]),
    ("bigint", [7], "string", []),
    ("double", [1.0, 1.5, 1e30, -3.0], "integer", [1.5, 1e30]),
    ("double", [1.5], "float", []),
    ("decimal(10,2)", [Decimal("2.00"), Decimal("2.50")], "integer", [Decimal("2.50")]),
    ("decimal(10,2)", [Decimal("2.50")], "float", []),
    ("boolean", [True, False], "boolean", []),
    ("boolean", [True], "integer", [True]),
    ("date", [dt.date(2024, 1, 2)], "date", []),
    ("date", [dt.date(2024, 1, 2)], "timestamp", []),
    ("timestamp", [dt.datetime(2024, 1, 2, 10)], "timestamp", []),
    ("timestamp", [dt.datetime(2024, 1, 2, 10)], "date", [dt.datetime(2024, 1, 2, 10)]),
    ("array<int>", [[1, 2]], "json", []),
    ("struct<a:int>", [(1,)], "json", []),
    ("struct<a:int>", [(1,)], "integer", [(1,)]),
]


@pytest.mark.parametrize(("spark_type", "values", "expected", "bad"), TYPED)
def test_field_type_on_typed_columns(
    spark: SparkSession, spark_type: str, values: list[Any], expected: str, bad: list[Any]
) -> None:
    frame = spark.createDataFrame(
        [(i, v) for i, v in enumerate([*values, None])], f"id int, v {spark_type}"
    )
    batch = check_rows(frame, [rule("field_type", "v", "warn", expected=expected)], label="t")
    try:
        assert batch.report is not None
        assert batch.report.counts == {"field_type:v": len(bad)}
        violating = sorted(i for (_, _, _, i) in records(batch))
        assert violating == sorted(values.index(v) for v in bad)
    finally:
        batch.release()


# --- the other kinds on other column types -----------------------------------------------


def test_range_on_strings_reads_numbers_and_rejects_the_rest(spark: SparkSession) -> None:
    values = ["5", "abc", "150", " 7 ", "1d", "100", "0", "NaN", None, ""]
    frame = spark.createDataFrame(list(enumerate(values)), "id int, v string")
    batch = check_rows(frame, [rule("range", "v", "skip", min=0, max=100)], label="t")
    try:
        assert sorted(v for _, v in batch.clean.collect() if v) == sorted(["5", " 7 ", "100", "0"])
        assert batch.report is not None
        assert batch.report.counts == {"range:v": 4}  # abc, 150, 1d, NaN
    finally:
        batch.release()


def test_range_with_one_bound_on_integers(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, 10), (2, 11), (3, None), (4, -100)], "id int, v bigint")
    batch = check_rows(frame, [rule("range", "v", "warn", max=10)], label="t")
    try:
        assert records(batch) == [("range:v", "warn", False, 2)]
    finally:
        batch.release()


def test_range_refuses_a_non_numeric_column(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, dt.date(2024, 1, 1))], "id int, day date")
    with pytest.raises(SourceDataError, match=r"range:day checks a numeric range.*type date"):
        check_rows(frame, [rule("range", "day", "warn", min=0)], label="t")


def test_regex_and_max_length_read_non_strings_as_text(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, 12), (2, 21), (3, 12345), (4, None)], "id int, v int")
    batch = check_rows(
        frame,
        [rule("regex", "v", "warn", pattern="^1"), rule("max_length", "v", "warn", max=3)],
        label="t",
    )
    try:
        assert records(batch) == [("max_length:v", "warn", False, 3), ("regex:v", "warn", False, 2)]
    finally:
        batch.release()


def test_not_null_on_a_typed_column(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, 0.0), (2, None)], "id int, v double")
    batch = check_rows(frame, [rule("not_null", "v", "skip")], label="t")
    try:
        assert rows(batch.clean) == [(1, 0.0)]
    finally:
        batch.release()


# --- several rules at once ---------------------------------------------------------------


def test_several_rules_one_pass(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(1, "a@x", 5), (2, "nope", 5), (3, "nope", None), (4, "b@y", None), (5, None, 7)],
        "id int, email string, qty int",
    )
    rules = [
        rule("regex", "email", "warn", pattern="@"),
        rule("not_null", "qty", "skip"),
        rule("range", "qty", "abort", min=0),
    ]
    batch = check_rows(frame, rules, label="t")
    try:
        # Row 3 violates a warn and a skip rule: two records, both dropped.
        # Row 2 violates only the warn rule: kept, dropped=False.
        assert records(batch) == [
            ("not_null:qty", "skip", True, 3),
            ("not_null:qty", "skip", True, 4),
            ("regex:email", "warn", False, 2),
            ("regex:email", "warn", True, 3),
        ]
        assert rows(batch.clean) == [(1, "a@x", 5), (2, "nope", 5), (5, None, 7)]
        assert batch.report is not None
        assert batch.report.counts == {"regex:email": 2, "not_null:qty": 2, "range:qty": 0}
        assert (batch.report.rows_in, batch.report.rows_kept, batch.report.quarantined) == (5, 3, 4)
        assert [f.simpleString() for f in batch.quarantine.schema.fields] == [  # type: ignore[union-attr]
            "rule_id:string",
            "on_fail:string",
            "dropped:boolean",
            "row:string",
        ]
    finally:
        batch.release()


def test_several_abort_rules_name_the_first_and_count_the_others(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, None, -1, "toolong")], "id int, a string, b int, c string")
    rules = [
        rule("not_null", "a", "warn"),
        rule("range", "b", "abort", min=0),
        rule("max_length", "c", "abort", max=3),
        rule("regex", "c", "abort", pattern="^t"),  # passes
        rule("not_null", "a", "abort", id="a-present"),
    ]
    with pytest.raises(RuleViolation) as raised:
        check_rows(frame, rules, label="batch 7")
    assert raised.value.reason == (
        "rule range:b (abort) failed on batch 7: 1 row violates it; "
        'first: {"id":1,"a":null,"b":-1,"c":"toolong"} '
        "(2 other abort rules failed too: max_length:c, a-present)"
    )


def test_the_sample_row_is_truncated(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, "x" * 1000)], "id int, v string")
    with pytest.raises(RuleViolation) as raised:
        check_rows(frame, [rule("max_length", "v", max=10)], label="t")
    sample = raised.value.reason.split("; first: ", 1)[1]
    assert sample.startswith('{"id":1,"v":"xxx') and sample.endswith("…")
    assert len(sample) == 301


# --- names, errors, fast path, release ---------------------------------------------------


def test_the_quarantined_row_is_the_same_json_on_every_engine(spark: SparkSession) -> None:
    """Written exactly: NULL fields kept, timestamps in milliseconds with their zone (Spark's
    to_json), dates as ISO days, decimals as written."""
    frame = spark.createDataFrame(
        [
            (
                1,
                None,
                dt.datetime(2024, 9, 21, 12, 10, 52, 123456, tzinfo=dt.UTC),
                dt.datetime(2024, 9, 21, 12, 10, 52),
                dt.date(2024, 1, 2),
                Decimal("10.50"),
            )
        ],
        "id int, note string, at timestamp, local timestamp_ntz, day date, amount decimal(10,2)",
    )
    batch = check_rows(frame, [rule("not_null", "note", "skip")], label="t")
    try:
        [record] = batch.quarantine.collect()  # type: ignore[union-attr]
        assert record.row == (
            '{"id":1,"note":null,"at":"2024-09-21T12:10:52.123Z",'
            '"local":"2024-09-21T12:10:52.000","day":"2024-01-02","amount":10.50}'
        )
    finally:
        batch.release()


def test_awkward_column_names(spark: SparkSession) -> None:
    frame = spark.createDataFrame(
        [(1, "a", "x"), (None, "b", "y"), (3, None, "z")],
        '`order id` int, `a.b` string, `We"ird` string',
    )
    rules = [
        rule("not_null", "order id", "skip"),
        rule("not_null", "a.b", "warn"),
        rule("regex", 'We"ird', "warn", pattern="^[xz]$"),
    ]
    batch = check_rows(frame, rules, label="t")
    try:
        assert batch.clean.columns == ["order id", "a.b", 'We"ird']
        assert rows(batch.clean) == [(1, "a", "x"), (3, None, "z")]
        got = sorted((r.rule_id, json.loads(r.row)) for r in batch.quarantine.collect())  # type: ignore[union-attr]
        assert got == [
            ("not_null:a.b", {"order id": 3, "a.b": None, 'We"ird': "z"}),
            ("not_null:order id", {"order id": None, "a.b": "b", 'We"ird': "y"}),
            ('regex:We"ird', {"order id": None, "a.b": "b", 'We"ird': "y"}),
        ]
    finally:
        batch.release()


def test_a_column_named_like_the_internal_one_survives(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, "keep"), (2, None)], "id int, _hakiri_violated string")
    batch = check_rows(frame, [rule("not_null", "_hakiri_violated", "skip")], label="t")
    try:
        assert batch.clean.columns == ["id", "_hakiri_violated"]
        assert rows(batch.clean) == [(1, "keep")]
    finally:
        batch.release()


def test_missing_column(spark: SparkSession) -> None:
    frame = spark.createDataFrame([(1, "a")], "id int, Email string")
    with pytest.raises(SourceDataError) as raised:
        check_rows(frame, [rule("not_null", "email", "warn")], label="t")
    assert raised.value.reason == (
        "rule not_null:email checks column 'email', which the rows do not have (columns: id, Email)"
    )


@pytest.mark.spark_only(INTERNALS)
def test_invalid_regex_is_refused_before_any_job(spark: SparkSession, spark_ui: str) -> None:
    frame = spark.createDataFrame([(1, "a")], "id int, v string")
    raised: list[HakiriError] = []

    def check() -> None:
        with pytest.raises(HakiriError) as caught:
            check_rows(frame, [rule("regex", "v", "skip", pattern="a(b")], label="t")
        raised.append(caught.value)

    assert jobs_during(spark_ui, check) == 0
    assert not isinstance(raised[0], (SourceDataError, RuleViolation))
    assert raised[0].reason == (
        "rule regex:v has an invalid Java regular expression 'a(b': "
        "missing ), unterminated subpattern at position 1"
    )


@pytest.mark.spark_only(INTERNALS)
def test_no_rules_runs_no_job(spark: SparkSession, spark_ui: str) -> None:
    frame = spark.createDataFrame([(1, "a")], "id int, v string")
    checked = []
    assert jobs_during(spark_ui, lambda: checked.append(check_rows(frame, [], label="t"))) == 0
    batch = checked[0]
    assert batch.clean is frame
    assert batch.quarantine is None and batch.report is None
    batch.release()


@pytest.mark.spark_only(INTERNALS)
def test_release_unpersists_and_is_idempotent(spark: SparkSession, spark_ui: str) -> None:
    frame = spark.createDataFrame([(1, "a"), (2, None)], "id int, v string")
    before = cached_rdds(spark_ui)
    batch = check_rows(frame, [rule("not_null", "v", "skip")], label="t")
    cached = batch._cached
    assert cached is not None and cached.storageLevel.useMemory
    assert cached_rdds(spark_ui) == before + 1
    batch.release()
    batch.release()
    assert not cached.storageLevel.useMemory and not cached.storageLevel.useDisk
    assert cached_rdds(spark_ui) == before


# --- one pass over the source --------------------------------------------------------------


@pytest.mark.spark_only(INTERNALS)
def test_clean_and_quarantine_read_the_cache_not_the_source(
    spark: SparkSession, tmp_path: Path
) -> None:
    source = tmp_path / "orders.parquet"
    spark.createDataFrame(
        [(i, None if i % 4 == 0 else f"u{i}@x", i % 3) for i in range(40)],
        "id int, email string, qty int",
    ).write.parquet(str(source))
    frame = spark.read.parquet(str(source))
    rules = [rule("not_null", "email", "skip"), rule("range", "qty", "warn", max=1)]

    batch = check_rows(frame, rules, label="t")
    try:
        assert batch.quarantine is not None
        for derived in (batch.clean, batch.quarantine):
            plan = derived._explain_string(mode="simple")  # the physical plan
            assert "InMemoryTableScan" in plan
            # The only file scan is the one inside the cached relation's own plan.
            assert plan.count("FileScan") == 1
            assert plan.index("InMemoryRelation") < plan.index("FileScan")

        # The proof: with the source gone, a re-scan would fail; the cached rows do not.
        shutil.rmtree(source)
        with pytest.raises(Exception, match=r"(?i)does not exist"):
            frame.count()  # the source frame itself is not cached
        assert batch.clean.count() == 30
        assert batch.quarantine.count() == 10 + 13  # 10 null emails; 13 rows with qty 2
        assert batch.quarantine.where("dropped").count() == 10 + 3  # null email and qty 2
        assert batch.report is not None
        assert batch.report.counts == {"not_null:email": 10, "range:qty": 13}
    finally:
        batch.release()
