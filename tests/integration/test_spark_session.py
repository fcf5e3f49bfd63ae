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


def test_which_settings_a_session_holds_is_sparks_own_rule(spark: SparkSession) -> None:
    """hakiri decides without a server which `[spark] conf` keys name a local server and which
    each session sets (`hakiri.spark.recipe`); the server's own `isModifiable` agrees: every
    static SQL setting is fixed, and the runtime ones hakiri sets (its defaults, Delta's, and
    the ones users set most) are a session's."""
    from hakiri.spark.delta import with_delta_conf
    from hakiri.spark.recipe import STATIC_SQL_CONFS, session_settable
    from hakiri.spark.session import default_spark_conf

    for key in sorted(STATIC_SQL_CONFS):
        assert not session_settable(key)
        assert spark.conf.isModifiable(key) is False, key
    common = [
        "spark.sql.ansi.enabled",
        "spark.sql.adaptive.enabled",
        "spark.sql.files.maxPartitionBytes",
    ]
    runtime = [
        k
        for k in [*with_delta_conf(default_spark_conf()), *common]
        if k.startswith("spark.sql.")
        and not k.startswith(("spark.sql.catalog.", "spark.sql.extensions"))
    ]
    assert "spark.sql.session.timeZone" in runtime and "spark.sql.shuffle.partitions" in runtime
    for key in runtime:
        assert session_settable(key), key
        assert spark.conf.isModifiable(key) is True, key
    # Delta's settings: a session sets them (the server answers for a registered key only).
    for key, value in with_delta_conf({}).items():
        if key.startswith("spark.databricks.delta."):
            assert session_settable(key)
            spark.conf.set(key, value)


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
