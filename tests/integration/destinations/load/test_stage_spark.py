"""stage() with a real Spark DataFrame through the JDBC writer, then commit."""

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
    destination,
    exists,
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
