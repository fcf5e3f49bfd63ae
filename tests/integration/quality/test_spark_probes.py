"""Dataset validators as Spark aggregations over a staged batch (the Delta context store).

The expected messages are the ones the PostgreSQL probes give for the same rows
(tests/integration/quality/test_validators.py), written out literally.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator, Sequence
from datetime import UTC, date, datetime, timedelta, timezone
from typing import TYPE_CHECKING, Any

import pytest
from pydantic import TypeAdapter

from hakiri.errors import SourceUnreachable, ValidationFailed
from hakiri.quality.spark_probes import probe_frame
from hakiri.quality.validators import ProbeResult, validator_check_id
from hakiri.spec.quality import DatasetValidator

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

IST = timezone(timedelta(hours=5, minutes=30))
ON_FAIL = pytest.mark.parametrize("on_fail", ["abort", "warn"])
_VALIDATOR: TypeAdapter[Any] = TypeAdapter(DatasetValidator)


def validator(**fields: Any) -> Any:
    return _VALIDATOR.validate_python(fields)


def frame(
    spark: SparkSession, columns: Sequence[tuple[str, str]], rows: Sequence[Any]
) -> DataFrame:
    """A staged batch with exactly these (possibly awkward) column names and Spark types."""
    from pyspark.sql.types import DataType, StructField, StructType

    schema = StructType([StructField(n, DataType.fromDDL(t)) for n, t in columns])
    return spark.createDataFrame([tuple(r) for r in rows], schema)


def no_refs(name: str) -> DataFrame:
    raise AssertionError(f"no ref table expected, got {name!r}")


def probe_one(staged: DataFrame, refs: Any = no_refs, **fields: Any) -> ProbeResult:
    [result] = probe_frame(staged, [validator(**fields)], ref_table=refs)
    return result


@pytest.fixture
def tables(spark: SparkSession) -> Iterator[dict[str, DataFrame]]:
    """Context-store tables by name, resolved the way the store does: spark.table(name)."""
    views: dict[str, DataFrame] = {}
    yield views
    for name in views:
        spark.catalog.dropTempView(name)


def register(spark: SparkSession, tables: dict[str, DataFrame], name: str, df: DataFrame) -> None:
    df.createOrReplaceTempView(name)
    tables[name] = df


# ------------------------------------------------------------------ row_count


@ON_FAIL
def test_row_count_within_bounds_passes(spark: SparkSession, on_fail: str) -> None:
    staged = frame(spark, [("id", "bigint")], [(i,) for i in range(5)])
    result = probe_one(staged, type="row_count", min=1, max=10, on_fail=on_fail)
    assert result == ProbeResult(
        "row_count", on_fail, True, "row_count: 5 rows, expected between 1 and 10", 5
    )


@ON_FAIL
def test_row_count_outside_bounds_fails(spark: SparkSession, on_fail: str) -> None:
    staged = frame(spark, [("id", "bigint")], [(i,) for i in range(5)])
    few = probe_one(staged, type="row_count", min=1000, on_fail=on_fail)
    assert (few.ok, few.observed, few.on_fail) == (False, 5, on_fail)
    assert few.message == "row_count: 5 rows, expected at least 1,000"
    many = probe_one(staged, type="row_count", max=3, on_fail=on_fail)
    assert (many.ok, many.observed) == (False, 5)
    assert many.message == "row_count: 5 rows, expected at most 3"


# ------------------------------------------------------------------ freshness


def _two_hours_ago() -> datetime:
    return datetime.now(UTC) - timedelta(hours=2)


FRESHNESS_CASES = {
    "timestamp": ("timestamp", lambda t: t),
    "timestamp_ntz": ("timestamp_ntz", lambda t: t.replace(tzinfo=None)),
    "string-iso-offset": ("string", lambda t: t.astimezone(UTC).isoformat()),
    "string-iso-other-offset": ("string", lambda t: t.astimezone(IST).isoformat()),
    "string-no-offset-is-utc": ("string", lambda t: t.replace(tzinfo=None).isoformat(" ")),
    "string-iso-z": ("string", lambda t: t.strftime("%Y-%m-%dT%H:%M:%S.%fZ")),
}


@ON_FAIL
@pytest.mark.parametrize("case", sorted(FRESHNESS_CASES))
def test_freshness_judges_the_newest_value(spark: SparkSession, case: str, on_fail: str) -> None:
    spark_type, as_value = FRESHNESS_CASES[case]
    newest = _two_hours_ago()
    rows = [(1, as_value(newest)), (2, as_value(newest - timedelta(days=3))), (3, None)]
    if spark_type == "string":
        rows.append((4, ""))  # '' is published as NULL: it must not count as unreadable
    staged = frame(spark, [("id", "bigint"), ("created_at", spark_type)], rows)
    check = {"type": "freshness", "column": "created_at", "on_fail": on_fail}

    fresh = probe_one(staged, within_hours=24, **check)
    stale = probe_one(staged, within_hours=1, **check)

    assert fresh.check == stale.check == "freshness:created_at"
    assert (fresh.ok, fresh.on_fail) == (True, on_fail)
    assert (stale.ok, stale.on_fail) == (False, on_fail)
    observed = datetime.fromisoformat(fresh.observed)
    assert observed.utcoffset() == timedelta(0)
    assert abs(observed - newest) < timedelta(milliseconds=1)
    assert stale.observed == fresh.observed
    assert fresh.message.startswith(f"freshness(created_at): newest value {fresh.observed} is 2")
    assert fresh.message.endswith("old (allowed: 24 hours)")
    assert stale.message.endswith("old (allowed: 1 hour)")


def test_freshness_reads_an_offset_as_an_instant(spark: SparkSession) -> None:
    staged = frame(spark, [("at", "string")], [("2024-05-01T12:00:00+02:00",), ("2024-05-01",)])
    result = probe_one(staged, type="freshness", column="at", within_hours=1)
    assert (result.ok, result.observed) == (False, "2024-05-01T10:00:00+00:00")
    assert result.message.startswith("freshness(at): newest value 2024-05-01T10:00:00+00:00 is ")


def test_freshness_in_the_future(spark: SparkSession) -> None:
    ahead = datetime.now(UTC) + timedelta(hours=5)
    staged = frame(spark, [("at", "timestamp")], [(ahead,)])
    result = probe_one(staged, type="freshness", column="at", within_hours=1)
    assert result.ok
    assert result.message.endswith("in the future (allowed: 1 hour)")


@ON_FAIL
def test_freshness_on_a_date_column(spark: SparkSession, on_fail: str) -> None:
    day = date.today() - timedelta(days=2)
    staged = frame(spark, [("day", "date")], [(day,), (day - timedelta(days=9),), (None,)])
    check = {"type": "freshness", "column": "day", "on_fail": on_fail}
    fresh = probe_one(staged, within_hours=24 * 5, **check)
    stale = probe_one(staged, within_hours=24, **check)
    assert (fresh.ok, fresh.observed, fresh.on_fail) == (True, day.isoformat(), on_fail)
    assert (stale.ok, stale.observed, stale.on_fail) == (False, day.isoformat(), on_fail)
    assert f"newest value {day.isoformat()} is" in stale.message
    assert "(allowed: 24 hours)" in stale.message


def test_freshness_with_no_values_fails(spark: SparkSession) -> None:
    staged = frame(spark, [("created_at", "string")], [(None,), ("",)])
    result = probe_one(
        staged, type="freshness", column="created_at", within_hours=1, on_fail="warn"
    )
    assert result == ProbeResult(
        "freshness:created_at",
        "warn",
        False,
        "freshness(created_at): no values in created_at to judge freshness",
        None,
    )


def test_freshness_text_that_is_not_a_timestamp_is_refused(spark: SparkSession) -> None:
    staged = frame(spark, [("created_at", "string")], [("2024-05-01",), ("soon",), ("",)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(staged, type="freshness", column="created_at", within_hours=1)
    assert caught.value.reason == (
        "validator freshness:created_at could not run on the staged rows: "
        '1 value in created_at is not an ISO 8601 timestamp (e.g. "soon")'
    )
    assert caught.value.hint == (
        "created_at must hold ISO 8601 timestamps (e.g. 2024-05-01T12:00:00Z): "
        "fix or cast the values in a transform"
    )


def test_freshness_on_a_number_column_is_refused(spark: SparkSession) -> None:
    staged = frame(spark, [("n", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(staged, type="freshness", column="n", within_hours=1)
    # Word for word what PostgreSQL says: bigint is bigint in both.
    assert caught.value.reason == (
        "validator freshness:n could not run on the staged rows: column 'n' has type bigint; "
        "freshness needs a timestamp, a date or text holding ISO 8601 timestamps"
    )


# --------------------------------------------------------------- fk_integrity


@pytest.fixture
def customers(spark: SparkSession, tables: dict[str, DataFrame]) -> DataFrame:
    df = frame(spark, [("id", "bigint")], [(1,), (2,), (3,)])
    register(spark, tables, "customers", df)
    return df


@ON_FAIL
def test_fk_integrity_passes_when_every_value_matches(
    spark: SparkSession, customers: DataFrame, on_fail: str
) -> None:
    staged = frame(spark, [("customer_id", "int")], [(1,), (2,), (2,), (None,)])
    result = probe_one(
        staged,
        spark.table,
        type="fk_integrity",
        column="customer_id",
        ref_table="customers",
        ref_column="id",
        on_fail=on_fail,
    )
    assert result == ProbeResult(
        "fk_integrity:customer_id",
        on_fail,
        True,
        "fk_integrity(customer_id): every value has a match in customers(id)",
        0,
    )


@ON_FAIL
def test_fk_integrity_counts_orphans_and_quotes_three(
    spark: SparkSession, customers: DataFrame, on_fail: str
) -> None:
    values = [1, 4, 5, 5, 6, 7, None]
    staged = frame(spark, [("customer_id", "bigint")], [(v,) for v in values])
    result = probe_one(
        staged,
        lambda name: {"customers": customers}[name],
        type="fk_integrity",
        column="customer_id",
        ref_table="customers",
        ref_column="id",
        on_fail=on_fail,
    )
    assert (result.ok, result.observed, result.on_fail) == (False, 5, on_fail)
    assert result.message == (
        "fk_integrity(customer_id): 5 values with no match in customers(id) (e.g. '4', '5', '6')"
    )


def test_fk_integrity_with_a_missing_ref_table_names_it(spark: SparkSession) -> None:
    staged = frame(spark, [("customer_id", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            staged,
            spark.table,
            type="fk_integrity",
            column="customer_id",
            ref_table="clients",
            ref_column="id",
        )
    reason, hint = caught.value.reason, caught.value.hint or ""
    assert reason.startswith(
        "validator fk_integrity:customer_id could not run on the staged rows: "
    )
    assert "clients" in reason  # in the engine's words: `clients` (Spark), clients (Sail)
    assert hint == (
        "check ref_table 'clients': it must name a table of the context store that exists "
        "before the load"
    )
    for noise in ("Traceback", "\n", "JVM"):
        assert noise not in reason + hint


def test_fk_integrity_keeps_the_resolvers_own_words(spark: SparkSession) -> None:
    def resolve(name: str) -> DataFrame:
        raise SourceUnreachable(f"context table {name} does not exist", "run its pipeline first")

    staged = frame(spark, [("customer_id", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            staged,
            resolve,
            type="fk_integrity",
            column="customer_id",
            ref_table="clients",
            ref_column="id",
        )
    assert caught.value.reason == (
        "validator fk_integrity:customer_id could not run on the staged rows: "
        "context table clients does not exist"
    )
    assert caught.value.hint == "run its pipeline first"


def test_fk_integrity_with_a_missing_ref_column(spark: SparkSession, customers: DataFrame) -> None:
    staged = frame(spark, [("customer_id", "bigint")], [(1,)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            staged,
            spark.table,
            type="fk_integrity",
            column="customer_id",
            ref_table="customers",
            ref_column="ID",
        )
    assert caught.value.reason == (
        "validator fk_integrity:customer_id could not run on the staged rows: "
        'column "ID" does not exist in customers'
    )
    assert "case-sensitive" in (caught.value.hint or "")


def test_fk_integrity_across_types_that_cannot_be_compared(
    spark: SparkSession, customers: DataFrame
) -> None:
    # Spark would cast the strings to numbers, and under ANSI fail the job on 'x'.
    staged = frame(spark, [("customer_id", "string")], [("1",), ("x",)])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(
            staged,
            spark.table,
            type="fk_integrity",
            column="customer_id",
            ref_table="customers",
            ref_column="id",
        )
    assert caught.value.reason == (
        "validator fk_integrity:customer_id could not run on the staged rows: "
        "customer_id (string) cannot be compared with customers.id (bigint)"
    )
    assert "cast the column in a transform" in (caught.value.hint or "")


# ------------------------------------------------------------- cardinality


@ON_FAIL
def test_cardinality(spark: SparkSession, on_fail: str) -> None:
    staged = frame(spark, [("country", "string")], [("DE",), ("FR",), ("DE",), (None,), ("IT",)])
    check = {"type": "cardinality", "column": "country", "on_fail": on_fail}
    enough = probe_one(staged, min_distinct=3, **check)
    too_few = probe_one(staged, min_distinct=4, **check)
    assert enough == ProbeResult(
        "cardinality:country",
        on_fail,
        True,
        "cardinality(country): 3 distinct values, expected at least 3",
        3,
    )
    assert (too_few.ok, too_few.observed, too_few.on_fail) == (False, 3, on_fail)
    assert too_few.message == "cardinality(country): 3 distinct values, expected at least 4"


# ------------------------------------------------------------ duplicate_key


@ON_FAIL
def test_duplicate_key_passes_on_unique_keys(spark: SparkSession, on_fail: str) -> None:
    staged = frame(spark, [("id", "bigint"), ("email", "string")], [(1, "a"), (1, "b"), (2, "a")])
    result = probe_one(staged, type="duplicate_key", columns=["id", "email"], on_fail=on_fail)
    assert result == ProbeResult(
        "duplicate_key:id,email",
        on_fail,
        True,
        "duplicate_key(id, email): every key value appears once",
        0,
    )


@ON_FAIL
def test_duplicate_key_counts_repeated_keys(spark: SparkSession, on_fail: str) -> None:
    rows = [(9, "c"), (7, "a"), (7, "a"), (8, "b"), (8, "b"), (8, "b"), (7, "z")]
    staged = frame(spark, [("id", "bigint"), ("email", "string")], rows)
    pair = probe_one(staged, type="duplicate_key", columns=["id", "email"], on_fail=on_fail)
    assert (pair.ok, pair.observed, pair.on_fail) == (False, 2, on_fail)
    assert pair.message == (
        "duplicate_key(id, email): 2 key values appear more than once (e.g. id=7, email=a)"
    )
    single = probe_one(staged, type="duplicate_key", columns=["id"])
    assert (single.check, single.observed) == ("duplicate_key:id", 2)
    assert single.message == "duplicate_key(id): 2 key values appear more than once (e.g. id=7)"
    one = probe_one(frame(spark, [("k", "int")], [(1,), (1,)]), type="duplicate_key", columns=["k"])
    assert one.message == "duplicate_key(k): 1 key value appears more than once (e.g. k=1)"


def test_a_key_with_a_null_part_is_not_a_duplicate(spark: SparkSession) -> None:
    staged = frame(
        spark,
        [("id", "bigint"), ("email", "string")],
        [(1, None), (1, None), (None, "a"), (None, "a")],
    )
    result = probe_one(staged, type="duplicate_key", columns=["id", "email"])
    assert (result.ok, result.observed) == (True, 0)


# ------------------------------------------------ '' is NULL in string columns


def test_empty_strings_count_as_null_in_string_columns(
    spark: SparkSession, tables: dict[str, DataFrame]
) -> None:
    register(spark, tables, "codes", frame(spark, [("code", "string")], [("A",), ("B",)]))
    staged = frame(
        spark,
        [("id", "bigint"), ("code", "string")],
        [(1, "A"), (1, ""), (1, ""), (2, "B"), (3, "")],
    )
    checks = [
        validator(type="cardinality", column="code", min_distinct=3),
        validator(type="duplicate_key", columns=["id", "code"]),
        validator(type="fk_integrity", column="code", ref_table="codes", ref_column="code"),
    ]
    results = probe_frame(staged, checks, ref_table=spark.table)
    # What PostgreSQL reports for the same rows loaded with text_columns=["code"].
    assert [(r.check, r.ok, r.observed) for r in results] == [
        ("cardinality:code", False, 2),
        ("duplicate_key:id,code", True, 0),
        ("fk_integrity:code", True, 0),
    ]


# ------------------------------------------------------------ awkward names


def test_awkward_column_names(spark: SparkSession, tables: dict[str, DataFrame]) -> None:
    order_id, created, country, dotted = "Order Id", 'Created "At"', "Land Ü", "a.b`c"
    register(spark, tables, "ref_orders", frame(spark, [(order_id, "bigint")], [(1,), (2,)]))
    staged = frame(
        spark,
        [(order_id, "bigint"), (created, "string"), (country, "string"), (dotted, "int")],
        [
            (1, _two_hours_ago().isoformat(), "DE", 1),
            (1, "", "FR", 2),
            (3, None, "", 2),
        ],
    )
    checks = [
        validator(type="row_count", min=3, max=3),
        validator(type="freshness", column=created, within_hours=3),
        validator(
            type="fk_integrity", column=order_id, ref_table="ref_orders", ref_column=order_id
        ),
        validator(type="cardinality", column=country, min_distinct=2),
        validator(type="duplicate_key", columns=[order_id]),
        validator(type="duplicate_key", columns=[dotted, country]),
    ]
    results = probe_frame(staged, checks, ref_table=spark.table)
    assert [(r.check, r.ok, r.observed) for r in results[:1] + results[2:]] == [
        ("row_count", True, 3),
        ("fk_integrity:Order Id", False, 1),
        ("cardinality:Land Ü", True, 2),
        ("duplicate_key:Order Id", False, 1),
        ("duplicate_key:a.b`c,Land Ü", True, 0),
    ]
    assert results[1].check == 'freshness:Created "At"' and results[1].ok
    assert results[2].message.endswith("(e.g. '3')")
    assert results[4].message.endswith("(e.g. Order Id=1)")


def test_a_missing_column_is_a_readable_failure(spark: SparkSession) -> None:
    # Matched case-sensitively, as PostgreSQL does, though Spark itself would not.
    staged = frame(spark, [("id", "bigint"), ("email", "string")], [(1, "a")])
    with pytest.raises(ValidationFailed) as caught:
        probe_one(staged, type="duplicate_key", columns=["id", "Email"])
    assert caught.value.reason == (
        "validator duplicate_key:id,Email could not run on the staged rows: "
        'column "Email" does not exist'
    )
    assert "case-sensitive" in (caught.value.hint or "")


# ------------------------------------------------------------------ the rest


def test_no_validators_run_no_job(spark: SparkSession) -> None:
    staged = frame(spark, [("id", "bigint")], [(1,)])
    assert probe_frame(staged, [], ref_table=no_refs) == []


def test_check_ids_and_on_fail_are_the_postgres_ones(spark: SparkSession) -> None:
    staged = frame(
        spark, [("id", "bigint"), ("at", "timestamp")], [(1, _two_hours_ago()), (2, None)]
    )
    checks = [
        validator(type="row_count", min=1, on_fail="warn"),
        validator(type="freshness", column="at", within_hours=1),
        validator(type="fk_integrity", column="id", ref_table="refs", ref_column="id"),
        validator(type="cardinality", column="id", min_distinct=1, on_fail="warn"),
        validator(type="duplicate_key", columns=["id"]),
    ]
    refs = frame(spark, [("id", "int")], [(1,), (2,)])
    results = probe_frame(staged, checks, ref_table=lambda name: refs)
    assert [(r.check, r.on_fail, r.ok) for r in results] == [
        (validator_check_id(v), v.on_fail, ok)
        for v, ok in zip(checks, [True, False, True, True, True], strict=True)
    ]


def test_importing_the_probes_does_not_import_pyspark() -> None:
    code = (
        "import sys, hakiri.quality.spark_probes; "
        "sys.exit('pyspark' in sys.modules or 'pyspark.sql' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
