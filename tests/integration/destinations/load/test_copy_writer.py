"""The COPY stage writer lands exactly the values Spark's JDBC writer does, for every type hakiri loads,
in both of its formats: binary COPY (pgpq, into a staging table made from the rows' Spark types)
and CSV (into a table of another's making, e.g. blue_green's copy of the target).

A property test: hypothesis generates rows of every staged type (text with quotes,
delimiters, newlines, backslashes and unicode; NULL next to the empty string;
integers at their limits; floats with NaN, infinities and -0.0; decimals at full
precision; dates and timestamps from year 1 to 9999; booleans; bytes), Spark stages them
through both writers into two tables of the same types, and PostgreSQL compares
the tables (EXCEPT ALL both ways, so NULL and '' differ and duplicates count).
"""

from __future__ import annotations

import string
from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING, Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from hakiri.destinations.postgres.copy_writer import CopyStageWriter
from hakiri.destinations.postgres.staging import JdbcStageWriter
from hakiri.errors import LoadError
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode
from tests.integration.destinations.load.support import destination, request

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

# (Spark type, PostgreSQL type, values)
TEXT = st.one_of(
    st.none(),
    st.sampled_from(["", " ", '"', '""', ",", "\n", "\r\n", "\\", "\\N", "NULL", 'a,b\n"c"\\']),
    st.text(st.characters(exclude_categories=("Cs",), exclude_characters="\x00"), max_size=20),
    st.text(string.printable, max_size=20),
)
COLUMNS: list[tuple[str, str, st.SearchStrategy[Any]]] = [
    ("string", "text", TEXT),
    ("bigint", "bigint", st.none() | st.integers(-(2**63), 2**63 - 1)),
    ("int", "integer", st.none() | st.integers(-(2**31), 2**31 - 1)),
    ("smallint", "smallint", st.none() | st.integers(-(2**15), 2**15 - 1)),
    ("tinyint", "smallint", st.none() | st.integers(-(2**7), 2**7 - 1)),
    ("double", "double precision", st.none() | st.floats()),
    ("float", "real", st.none() | st.floats(width=32)),
    (
        "decimal(38,10)",
        "numeric(38,10)",
        st.none() | st.decimals(min_value=-(10**27) + 1, max_value=10**27 - 1, places=10),
    ),
    ("boolean", "boolean", st.none() | st.booleans()),
    ("date", "date", st.none() | st.dates(date(1, 1, 1), date(9999, 12, 31))),
    (
        "timestamp",
        "timestamp with time zone",
        st.none() | st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31), timezones=st.just(UTC)),
    ),
    (
        "timestamp_ntz",
        "timestamp without time zone",
        st.none() | st.datetimes(datetime(1, 1, 1), datetime(9999, 12, 31)),
    ),
    ("binary", "bytea", st.none() | st.binary(max_size=16)),
]
ROWS = st.lists(st.tuples(*(values for _, _, values in COLUMNS)), min_size=1, max_size=30)


def _create(pg_url: str, schema: str, table: str) -> None:
    body = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(f"c{i}"), sql.SQL(pg_type))
        for i, (_, pg_type, _) in enumerate(COLUMNS)
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(schema, table)))
        conn.execute(sql.SQL("CREATE TABLE {} ({})").format(sql.Identifier(schema, table), body))


def _difference(pg_url: str, schema: str) -> list[tuple[Any, ...]]:
    a, b = sql.Identifier(schema, "by_copy"), sql.Identifier(schema, "by_jdbc")
    query = sql.SQL(
        "(SELECT 'copy only', * FROM {a} EXCEPT ALL SELECT 'copy only', * FROM {b}) UNION ALL "
        "(SELECT 'jdbc only', * FROM {b} EXCEPT ALL SELECT 'jdbc only', * FROM {a})"
    ).format(a=a, b=b)
    with psycopg.connect(pg_url) as conn:
        return conn.execute(query).fetchall()


@settings(
    max_examples=16,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@pytest.mark.spark_only("compares with or uses Spark's JDBC writer, which Sail does not have")
@given(rows=ROWS, binary=st.booleans())
def test_copy_stages_the_same_values_as_jdbc(
    spark: SparkSession, pg_url: str, pg_schema: str, rows: list[tuple[Any, ...]], binary: bool
) -> None:
    ddl = ", ".join(f"c{i} {spark_type}" for i, (spark_type, _, _) in enumerate(COLUMNS))
    frame = spark.createDataFrame(rows, ddl).repartition(2)
    _create(pg_url, pg_schema, "by_copy")
    _create(pg_url, pg_schema, "by_jdbc")

    writer = CopyStageWriter(pg_url)
    if binary:
        written = writer.write(frame, pg_schema, "by_copy")
    else:
        written = writer.write_into(frame, pg_schema, "by_copy", frame.columns)
    JdbcStageWriter(pg_url).write(frame, pg_schema, "by_jdbc")

    assert written == len(rows)
    assert _difference(pg_url, pg_schema) == []
    with psycopg.connect(pg_url) as conn:
        texts = conn.execute(
            sql.SQL("SELECT c0 FROM {}").format(sql.Identifier(pg_schema, "by_copy"))
        ).fetchall()
    # NULL stays NULL and '' stays '' (COPY tells them apart by quoting).
    assert sorted((t for (t,) in texts), key=repr) == sorted((r[0] for r in rows), key=repr)


def test_an_empty_frame_writes_nothing_and_opens_no_connection(
    spark: SparkSession, pg_url: str, pg_schema: str
) -> None:
    _create(pg_url, pg_schema, "by_copy")
    frame = spark.createDataFrame([], ", ".join(f"c{i} {t}" for i, (t, _, _) in enumerate(COLUMNS)))
    assert CopyStageWriter("postgresql://nobody@127.0.0.1:1/none").write(frame, "s", "t") == 0


def test_a_value_postgresql_refuses_is_one_line_naming_the_staging_table(
    spark: SparkSession, pg_url: str, pg_schema: str
) -> None:
    frame = spark.createDataFrame([("a\x00b",)], "note string")
    dest = destination(pg_url, pg_schema)
    with pytest.raises(LoadError) as caught:
        dest.stage(RuleCheck.unchecked(frame), request(pg_schema, "t", LoadMode.APPEND))
    reason = caught.value.reason
    assert reason.startswith(f"Spark could not write the staging table {pg_schema}.")
    assert reason.endswith('invalid byte sequence for encoding "UTF8": 0x00')
    assert "\n" not in reason


def test_decimals_keep_every_digit(spark: SparkSession, pg_url: str, pg_schema: str) -> None:
    value = Decimal("-1234567890123456789012345678.9012345678")
    frame = spark.createDataFrame([(value,)], "c0 decimal(38,10)")
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (c0 numeric(38,10))").format(sql.Identifier(pg_schema, "d"))
        )
    CopyStageWriter(pg_url).write(frame, pg_schema, "d")
    with psycopg.connect(pg_url) as conn:
        got = conn.execute(sql.SQL("SELECT c0 FROM {}").format(sql.Identifier(pg_schema, "d")))
        assert got.fetchall() == [(value,)]
