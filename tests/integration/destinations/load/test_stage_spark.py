"""stage() with a real Spark DataFrame (through the JDBC or the COPY writer), then commit."""

from __future__ import annotations

from datetime import UTC, date, datetime
from decimal import Decimal
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql

from hakiri.destinations.postgres.names import parse_marker
from hakiri.destinations.postgres.staging import JdbcStageWriter
from hakiri.errors import DestinationUnreachable, LoadError
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode
from tests.integration.destinations.load.support import (
    PROJECT,
    columns_of,
    create_table,
    destination,
    exists,
    insert,
    no_checkpoint,
    pipeline_of,
    primary_key_of,
    request,
    rows_of,
    tables_in,
)

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

SCHEMA_DDL = (
    '`Order Id` BIGINT NOT NULL, `c2` STRING, `c1` INT, `Qu"ote` SMALLINT, `tiny` TINYINT, '
    "`Prïce €` DECIMAL(12,2), `ratio` DOUBLE, `f` FLOAT, `ok` BOOLEAN, `day` DATE, "
    "`at` TIMESTAMP, `local_at` TIMESTAMP_NTZ, `blob` BINARY"
)
AT = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)


def test_a_dataframe_is_staged_unlogged_and_committed_into_an_auto_created_target(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    rows = [
        (1, "", 7, 3, 1, Decimal("9.99"), 0.5, 1.5, True, date(2024, 5, 1), AT,
         datetime(2024, 5, 1, 12, 30), b"\x00\x01"),
        (2, "two", None, None, None, None, None, None, None, None, None, None, None),
    ]  # fmt: skip
    frame = spark.createDataFrame(rows, SCHEMA_DDL).repartition(2)
    dest = destination(pg_url, pg_schema, batch_size=1)
    req = request(pg_schema, "Orders", LoadMode.UPSERT, upsert_key=["Order Id"], run="run-spark")

    staged = dest.stage(RuleCheck.unchecked(frame), req)

    assert staged.rows == 2 and staged.batch_id == "batch-1" and staged.staging_schema == pg_schema
    assert staged.staging_table.startswith("_hakiri_stg_") and len(staged.staging_table) == 28
    persistence, comment = pg_conn.execute(
        "SELECT relpersistence, obj_description(oid, 'pg_class') FROM pg_class WHERE oid = %s::regclass",
        (sql.Identifier(pg_schema, staged.staging_table).as_string(pg_conn),),
    ).fetchone() or (None, None)
    assert persistence == "u"
    marker = parse_marker(comment)
    assert marker is not None and marker["kind"] == "staging"
    assert (marker["project"], marker["pipeline"], marker["run"], marker["batch"]) == (
        PROJECT, pipeline_of(pg_schema), "run-spark", "batch-1",
    )  # fmt: skip
    expected_types = [
        ("Order Id", "bigint"), ("c2", "text"), ("c1", "integer"), ('Qu"ote', "smallint"),
        ("tiny", "smallint"), ("Prïce €", "numeric(12,2)"), ("ratio", "double precision"),
        ("f", "real"), ("ok", "boolean"), ("day", "date"), ("at", "timestamp with time zone"),
        ("local_at", "timestamp without time zone"), ("blob", "bytea"),
    ]  # fmt: skip
    assert [(c.name, c.type) for c in staged.columns] == expected_types
    assert [
        (n, t) for n, t, _ in columns_of(pg_url, pg_schema, staged.staging_table)
    ] == expected_types

    result = dest.commit(staged, req, no_checkpoint)

    assert result.created_target and result.rows_loaded == 2
    assert columns_of(pg_url, pg_schema, "Orders") == [
        (name, type_, name != "Order Id") for name, type_ in expected_types
    ]
    assert primary_key_of(pg_url, pg_schema, "Orders") == ("Order Id",)
    assert rows_of(pg_conn, pg_schema, "Orders") == [
        (1, None, 7, 3, 1, Decimal("9.99"), 0.5, 1.5, True, date(2024, 5, 1), AT,
         datetime(2024, 5, 1, 12, 30), b"\x00\x01"),
        (2, "two", None, None, None, None, None, None, None, None, None, None, None),
    ]  # fmt: skip
    assert tables_in(pg_conn, pg_schema) == ["Orders"]


def test_an_all_null_column_stages_as_text(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    from pyspark.sql import functions as F

    frame = spark.range(3).withColumn("nothing", F.lit(None))
    dest = destination(pg_url, pg_schema)

    staged = dest.stage(RuleCheck.unchecked(frame), request(pg_schema, "t"))

    assert [(c.name, c.type) for c in staged.columns] == [("id", "bigint"), ("nothing", "text")]
    assert staged.rows == 3
    dest.discard(staged)
    assert not exists(pg_conn, pg_schema, staged.staging_table)


def test_a_type_hakiri_cannot_load_is_refused_before_anything_is_created(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    frame = spark.createDataFrame([(1, [1, 2])], "id INT, tags ARRAY<INT>")

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).stage(RuleCheck.unchecked(frame), request(pg_schema, "t"))

    assert caught.value.reason == (
        "column 'tags' has Spark type array<int>, which hakiri cannot load into PostgreSQL"
    )
    assert "to_json" in (caught.value.hint or "")
    assert tables_in(pg_conn, pg_schema) == []


@pytest.mark.spark_only("compares with or uses Spark's JDBC writer, which Sail does not have")
def test_a_failed_spark_write_drops_the_staging_table_and_says_why_in_one_line(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    frame = spark.createDataFrame([(1,)], "id INT")
    # psycopg creates the staging table; Spark's JDBC writer is pointed at a closed port.
    writer = JdbcStageWriter("postgresql://loader:s3cret@127.0.0.1:1/hakiri_test")
    dest = destination(pg_url, pg_schema, stage_writer=writer)

    with pytest.raises(DestinationUnreachable) as caught:
        dest.stage(RuleCheck.unchecked(frame), request(pg_schema, "t"))

    assert caught.value.reason.startswith("Spark cannot connect to PostgreSQL at ")
    assert "\n" not in caught.value.reason and "s3cret" not in caught.value.reason
    assert "executor" in (caught.value.hint or "")
    assert tables_in(pg_conn, pg_schema) == []


# ---------------------------------------------------------------- empty strings, blue_green's staging


def _oid(conn: psycopg.Connection, schema: str, table: str) -> int:
    row = conn.execute(
        "SELECT %s::regclass::oid", (sql.Identifier(schema, table).as_string(conn),)
    ).fetchone()
    assert row is not None
    return int(row[0])


@pytest.mark.parametrize("writer", ["copy", "jdbc"])
def test_an_empty_string_is_staged_as_null_where_the_target_stores_text(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str, writer: str
) -> None:
    create_table(
        pg_conn,
        pg_schema,
        "t",
        "id bigint, name text, code varchar(5), grade char(2), tags text[]",
    )
    frame = spark.createDataFrame(
        [(1, "", "", "", ""), (2, "bob", "B", "y", "{a}"), (3, None, None, None, None)],
        "id bigint, name string, code string, grade string, note string",
    )
    dest = destination(pg_url, pg_schema, writer=writer)
    req = request(pg_schema, "t")

    dest.commit(dest.stage(RuleCheck.unchecked(frame), req), req, no_checkpoint)
    # A new table: the created columns are text, so '' is NULL there too.
    created = request(pg_schema, "fresh", batch="batch-2")
    dest.commit(dest.stage(RuleCheck.unchecked(frame), created), created, no_checkpoint)

    assert rows_of(pg_conn, pg_schema, "t") == [
        (1, None, None, None, None),
        (2, "bob", "B", "y ", None),  # `note` is not a column of t
        (3, None, None, None, None),
    ]
    assert rows_of(pg_conn, pg_schema, "fresh") == [
        (1, None, None, None, None),
        (2, "bob", "B", "y", "{a}"),
        (3, None, None, None, None),
    ]


def test_blue_green_with_copy_stages_a_table_like_the_target_and_swaps_it_in(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "c", "id bigint PRIMARY KEY, name text NOT NULL, tier text")
    pg_conn.execute(
        sql.SQL("CREATE INDEX c_by_name ON {} (name)").format(sql.Identifier(pg_schema, "c"))
    )
    pg_conn.execute(
        sql.SQL("CREATE VIEW {} AS SELECT id, upper(name) AS shout FROM {}").format(
            sql.Identifier(pg_schema, "c_names"), sql.Identifier(pg_schema, "c")
        )
    )
    insert(pg_conn, pg_schema, "c", [(1, "ann", "gold")])
    frame = spark.createDataFrame([(1, "ann"), (3, "cy")], "id bigint, name string")
    dest = destination(pg_url, pg_schema, writer="copy")
    req = request(pg_schema, "c", LoadMode.BLUE_GREEN)

    staged = dest.stage(RuleCheck.unchecked(frame), req)

    assert staged.like_target and staged.rows == 2
    assert [(c.name, c.type) for c in staged.columns] == [("id", "bigint"), ("name", "text")]
    persistence = pg_conn.execute(
        "SELECT relpersistence FROM pg_class WHERE oid = %s",
        (_oid(pg_conn, pg_schema, staged.staging_table),),
    ).fetchone()
    assert persistence == ("p",)  # logged: it becomes the target
    staged_oid = _oid(pg_conn, pg_schema, staged.staging_table)

    result = dest.commit(staged, req, no_checkpoint)

    assert result.rows_loaded == 2
    assert _oid(pg_conn, pg_schema, "c") == staged_oid  # swapped in, not copied
    assert rows_of(pg_conn, pg_schema, "c") == [(1, "ann", None), (3, "cy", None)]
    shout = pg_conn.execute(
        sql.SQL("SELECT shout FROM {} ORDER BY id").format(sql.Identifier(pg_schema, "c_names"))
    ).fetchall()
    assert shout == [("ANN",), ("CY",)]
    indexes = pg_conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'c' ORDER BY 1",
        (pg_schema,),
    ).fetchall()
    assert indexes == [("c_by_name",), ("c_pkey",)]
    comment = pg_conn.execute("SELECT obj_description(%s, 'pg_class')", (staged_oid,)).fetchone()
    assert comment == (None,)  # the staging marker went with the swap
    assert tables_in(pg_conn, pg_schema) == ["c"]


def test_blue_green_copies_the_rows_when_the_target_changed_after_staging(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "c", "id bigint PRIMARY KEY, name text")
    frame = spark.createDataFrame([(1, "ann"), (3, "cy")], "id bigint, name string")
    dest = destination(pg_url, pg_schema, writer="copy")
    req = request(pg_schema, "c", LoadMode.BLUE_GREEN)
    staged = dest.stage(RuleCheck.unchecked(frame), req)
    staged_oid = _oid(pg_conn, pg_schema, staged.staging_table)
    # Someone indexes the target between staging and commit: the staged copy lacks the index.
    pg_conn.execute(
        sql.SQL("CREATE INDEX c_by_name ON {} (name)").format(sql.Identifier(pg_schema, "c"))
    )

    result = dest.commit(staged, req, no_checkpoint)

    assert result.rows_loaded == 2
    assert _oid(pg_conn, pg_schema, "c") != staged_oid
    assert rows_of(pg_conn, pg_schema, "c") == [(1, "ann"), (3, "cy")]
    indexes = pg_conn.execute(
        "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'c' ORDER BY 1",
        (pg_schema,),
    ).fetchall()
    assert indexes == [("c_by_name",), ("c_pkey",)]
    assert tables_in(pg_conn, pg_schema) == ["c"]


def test_blue_green_with_jdbc_or_a_type_copy_would_read_differently_stages_as_usual(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "c", "id integer PRIMARY KEY, name text")
    frame = spark.createDataFrame([(1, "ann")], "id bigint, name string")
    req = request(pg_schema, "c", LoadMode.BLUE_GREEN)

    by_jdbc = destination(pg_url, pg_schema, writer="jdbc").stage(RuleCheck.unchecked(frame), req)
    # bigint staged into an integer column: the commit's cast, not COPY's parser, decides.
    by_copy = destination(pg_url, pg_schema, writer="copy").stage(RuleCheck.unchecked(frame), req)

    assert not by_jdbc.like_target and not by_copy.like_target
