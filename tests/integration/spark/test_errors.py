"""Real Spark failures, translated: one line each, no stack trace, no password."""

from __future__ import annotations

import socket
import uuid
from pathlib import Path
from typing import TYPE_CHECKING

import psycopg
import pytest
from psycopg import sql

from hakiri.errors import (
    DestinationUnreachable,
    HakiriError,
    LoadError,
    SourceDataError,
    SparkSetupError,
)
from hakiri.spark.errors import spark_errors
from hakiri.spark.session import jdbc_url_from_postgres_url

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

PASSWORD = "hunter2-s3cret"


def _closed_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # closed again when the block ends


def _write_jdbc(frame: DataFrame, url: str, table: str, **options: str) -> None:
    frame.write.format("jdbc").option("url", url).option("dbtable", table).options(**options).mode(
        "append"
    ).save()


def _one_line(error: HakiriError) -> str:
    assert "\n" not in error.reason
    assert "\tat " not in error.reason and ".java:" not in error.reason
    assert PASSWORD not in error.reason and PASSWORD not in (error.hint or "")
    return error.reason


@pytest.mark.parametrize("password_in", ["properties", "jdbc url"])
def test_jdbc_write_to_a_closed_port(spark: SparkSession, password_in: str) -> None:
    port = _closed_port()
    url, props = jdbc_url_from_postgres_url(f"postgresql://app:{PASSWORD}@127.0.0.1:{port}/shop")
    if password_in == "jdbc url":
        url = f"{url}?user=app&password={PASSWORD}"
        props.pop("password")

    with pytest.raises(DestinationUnreachable) as raised, spark_errors("staging orders"):
        _write_jdbc(spark.range(3), url, "orders", **props)

    assert _one_line(raised.value) == (
        f"cannot connect to the PostgreSQL destination: Connection to 127.0.0.1:{port} refused"
    )
    assert raised.value.__cause__ is not None  # the Java trace, for --debug


def test_jdbc_driver_class_that_does_not_exist(spark: SparkSession) -> None:
    url, props = jdbc_url_from_postgres_url("postgresql://app@127.0.0.1:1/shop")
    props["driver"] = "org.example.NoSuchDriver"

    with pytest.raises(SparkSetupError) as raised, spark_errors("staging orders"):
        _write_jdbc(spark.range(3), url, "orders", **props)

    assert _one_line(raised.value) == (
        "JDBC driver class org.example.NoSuchDriver is not on Spark's classpath"
    )
    assert "HAKIRI_SPARK_JARS" in (raised.value.hint or "")


def test_permission_denied_on_the_target_schema(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    role = f"weak_{uuid.uuid4().hex[:8]}"
    pg_conn.execute(
        sql.SQL("CREATE ROLE {} LOGIN PASSWORD {}").format(
            sql.Identifier(role), sql.Literal(PASSWORD)
        )
    )
    try:
        url, props = jdbc_url_from_postgres_url(
            pg_url.replace("postgres@", f"{role}:{PASSWORD}@", 1)
        )
        with pytest.raises(LoadError) as raised, spark_errors("staging orders"):
            _write_jdbc(spark.range(3), url, f'"{pg_schema}"."orders"', **props)
    finally:
        pg_conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))

    assert _one_line(raised.value) == (
        f"the PostgreSQL destination refused: permission denied for schema {pg_schema}"
    )


def test_a_row_postgres_refuses_is_reported_without_its_values(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    from pyspark.sql import functions as F

    pg_conn.execute(
        sql.SQL("CREATE TABLE {} (id bigint, code varchar(2))").format(
            sql.Identifier(pg_schema, "codes")
        )
    )
    url, props = jdbc_url_from_postgres_url(pg_url)
    frame = spark.range(3).select("id", F.lit("private-value").alias("code"))

    with pytest.raises(LoadError) as raised, spark_errors("staging codes"):
        _write_jdbc(frame, url, f'"{pg_schema}"."codes"', **props)

    reason = _one_line(raised.value)
    assert (
        reason == "the PostgreSQL destination refused: value too long for type character varying(2)"
    )
    assert "private-value" not in reason


def test_reading_a_path_that_does_not_exist(spark: SparkSession, tmp_path: Path) -> None:
    missing = tmp_path / "in box" / "nope.csv"

    with pytest.raises(SourceDataError) as raised, spark_errors("reading orders", side="source"):
        spark.read.csv(str(missing)).schema  # noqa: B018 - over Spark Connect, analysis is lazy

    assert _one_line(raised.value) == f"file not found: {missing}"


def test_failfast_malformed_records(spark: SparkSession, tmp_path: Path) -> None:
    path = tmp_path / "bad.csv"
    path.write_text("id,amount\n1,2.5\n2,lots\n")
    frame = spark.read.schema("id INT, amount DOUBLE").options(header=True, mode="FAILFAST")

    with pytest.raises(SourceDataError) as raised, spark_errors("reading orders", side="source"):
        frame.csv(str(path)).write.format("noop").mode("overwrite").save()

    assert _one_line(raised.value) == f"malformed record in {path}"


def test_anything_else_is_one_line_with_the_java_message(spark: SparkSession) -> None:
    with pytest.raises(HakiriError) as raised, spark_errors("transforming orders"):
        spark.range(3).select("no_such_column").count()

    reason = _one_line(raised.value)
    assert reason.startswith("transforming orders: AnalysisException: [UNRESOLVED_COLUMN")
    assert "no_such_column" in reason
    assert "--debug" in (raised.value.hint or "")


def test_a_command_in_this_process_reuses_the_running_session(
    spark: SparkSession, tmp_path: Path
) -> None:
    from hakiri.services.runtime import LazySpark
    from hakiri.spec.loader import load_project

    (tmp_path / "hakiri.toml").write_text('[project]\nname = "p"\n')
    lazy = LazySpark(load_project(tmp_path, {}))
    assert lazy.get() is spark
    lazy.stop()  # not its own: left running
    assert not spark.is_stopped
