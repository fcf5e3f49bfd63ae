"""The suite's Spark session starts, has hakiri's settings and writes to PostgreSQL over JDBC."""

from __future__ import annotations

from typing import TYPE_CHECKING

import psycopg
from psycopg import sql

from hakiri.spark.session import jdbc_url_from_postgres_url, resolve_jdbc_jars

if TYPE_CHECKING:
    # Collection happens before `-m "not integration"` deselects; keep it free of pyspark.
    from pyspark.sql import SparkSession


def test_session_has_hakiri_defaults(spark: SparkSession) -> None:
    """The suite's session is a Spark Connect session on hakiri's local server, started with
    hakiri's settings and the PostgreSQL driver, as a command's is."""
    from hakiri.spark.session import is_connect

    assert is_connect(spark)
    assert spark.conf.get("spark.sql.session.timeZone") == "UTC"
    assert spark.conf.get("spark.sql.parquet.outputTimestampType") == "TIMESTAMP_MICROS"
    assert spark.conf.get("spark.master") == "local[2]"
    for jar in resolve_jdbc_jars(None).jars:
        assert jar in (spark.conf.get("spark.jars") or "")


def test_jdbc_write_lands_every_row(
    spark: SparkSession, pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    from pyspark.sql import functions as F

    jdbc_url, props = jdbc_url_from_postgres_url(pg_url)
    df = spark.range(1000).select(
        F.col("id"),
        (F.col("id") * 2).alias("doubled"),
        F.concat(F.lit("row-"), F.col("id").cast("string")).alias("label"),
    )

    (
        df.write.format("jdbc")
        .option("url", jdbc_url)
        .option("dbtable", f'"{pg_schema}"."numbers"')
        .options(**props)
        .option("batchsize", "500")
        .option("reWriteBatchedInserts", "true")
        .mode("overwrite")
        .save()
    )

    table = sql.Identifier(pg_schema, "numbers")
    got = pg_conn.execute(
        sql.SQL("SELECT count(*), sum(id), sum(doubled), count(DISTINCT label) FROM {}").format(
            table
        )
    ).fetchone()
    assert got == (1000, 499500, 999000, 1000)
