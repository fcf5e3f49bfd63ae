"""Benchmark: staging 1,000,000 rows into PostgreSQL with hakiri's COPY writer and Spark's JDBC writer, against `psql \\copy`.

Run by hand (a minute or two on the reference machine):

    .venv/bin/python bench/stage_throughput.py [--rows 1000000] [--repeat 1] [--pg-url URL]

All paths land the same rows (bigint id, text name, double amount, timestamp
at, boolean flag) in an UNLOGGED table, as hakiri's staging tables are; the rows
are cached in Spark first, so only the write is timed, with a warm session (as
`hakiri serve` runs it):

- COPY: hakiri's CopyStageWriter (the default): each of the 2 partitions streams
  its Arrow batches, encoded as CSV by pyarrow, into `COPY … FROM STDIN`.
- JDBC: Spark's writer, 2 partitions, batchsize 10000, reWriteBatchedInserts=true.
- COPY: Spark writes the rows to one CSV file (coalesce(1), not timed), then
  `psql \\copy ... FROM file (FORMAT csv)` loads it (timed, psql start-up included).

Without --pg-url it starts a throwaway PostgreSQL (tests.support.postgres, the
test suite's server: fsync off) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

import psycopg
from psycopg import sql
from tests.support.postgres import TestPostgres

from hakiri.destinations.postgres.copy_writer import CopyStageWriter
from hakiri.spark.session import build_spark_session, jdbc_url_from_postgres_url, resolve_jdbc_jars

COLUMNS = "id bigint, name text, amount double precision, at timestamptz, flag boolean"
JDBC_TABLE = "bench_stage_jdbc"
COPY_TABLE = "bench_stage_copy"
WRITER_TABLE = "bench_stage_writer"
TABLES = (JDBC_TABLE, COPY_TABLE, WRITER_TABLE)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each path")
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url  # type: ignore[union-attr]
    try:
        run(url, args.rows, args.repeat, args.master)
    finally:
        if server is not None:
            server.stop()


def run(url: str, rows: int, repeat: int, master: str) -> None:
    from pyspark.sql import functions as F

    with psycopg.connect(url, autocommit=True) as conn:
        server_version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        for table in TABLES:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(table)))
            conn.execute(
                sql.SQL("CREATE UNLOGGED TABLE {} ({})").format(
                    sql.Identifier(table), sql.SQL(COLUMNS)
                )
            )

    began = time.monotonic()
    driver = resolve_jdbc_jars(None)
    spark = build_spark_session(master=master, jars=list(driver.jars), app_name="bench-stage")
    spark_start = time.monotonic() - began

    frame = (
        spark.range(0, rows, numPartitions=2)
        .select(
            F.col("id"),
            F.concat(F.lit("name-"), F.col("id").cast("string")).alias("name"),
            (F.col("id") * 0.25).alias("amount"),
            F.timestamp_seconds(F.lit(1_700_000_000) + F.col("id")).alias("at"),
            (F.col("id") % 2 == 0).alias("flag"),
        )
        .cache()
    )
    assert frame.count() == rows

    workdir = Path(tempfile.mkdtemp(prefix="hakiri-bench-"))
    try:
        began = time.monotonic()
        frame.coalesce(1).write.option("header", False).csv(str(workdir / "csv"))
        csv_write = time.monotonic() - began
        (csv_file,) = (workdir / "csv").glob("part-*.csv")

        jdbc_url, props = jdbc_url_from_postgres_url(url)
        jdbc_times, copy_times, writer_times = [], [], []
        writer = CopyStageWriter(url)
        for _ in range(repeat):
            _truncate(url)
            began = time.monotonic()
            assert writer.write(frame, "public", WRITER_TABLE) == rows
            writer_times.append(time.monotonic() - began)

            began = time.monotonic()
            (
                frame.write.format("jdbc")
                .option("url", jdbc_url)
                .option("dbtable", JDBC_TABLE)
                .options(**props)
                .option("batchsize", "10000")
                .option("reWriteBatchedInserts", "true")
                .option("numPartitions", "2")
                .mode("append")
                .save()
            )
            jdbc_times.append(time.monotonic() - began)

            began = time.monotonic()
            subprocess.run(
                [
                    shutil.which("psql") or "psql",
                    url,
                    "-v",
                    "ON_ERROR_STOP=1",
                    "-q",
                    "-c",
                    f"\\copy {COPY_TABLE} FROM '{csv_file}' WITH (FORMAT csv)",
                ],
                check=True,
            )
            copy_times.append(time.monotonic() - began)
            _check_counts(url, rows)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        spark.stop()

    jdbc, copy, writer_best = min(jdbc_times), min(copy_times), min(writer_times)
    print(f"rows: {rows:,} x 5 columns; PostgreSQL {server_version}; Spark {spark.version}")
    print(f"SparkSession start: {spark_start:.1f} s; CSV written by Spark: {csv_write:.1f} s")
    print(
        f"COPY writer : {writer_best:6.2f} s  {rows / writer_best:>10,.0f} rows/s  "
        f"(runs: {_fmt(writer_times)})"
    )
    print(f"JDBC writer : {jdbc:6.2f} s  {rows / jdbc:>10,.0f} rows/s  (runs: {_fmt(jdbc_times)})")
    print(f"psql \\copy  : {copy:6.2f} s  {rows / copy:>10,.0f} rows/s  (runs: {_fmt(copy_times)})")
    print(f"ratio COPY writer / psql \\copy (rows/s): {copy / writer_best:.2f}")
    print(f"ratio JDBC writer / psql \\copy (rows/s): {copy / jdbc:.2f}")


def _truncate(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table in TABLES:
            conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(table)))


def _check_counts(url: str, rows: int) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for table in TABLES:
            got = conn.execute(
                sql.SQL("SELECT count(*), count(DISTINCT id) FROM {}").format(sql.Identifier(table))
            ).fetchone()
            assert got == (rows, rows), f"{table}: {got}"


def _fmt(times: list[float]) -> str:
    return ", ".join(f"{t:.2f}" for t in times)


if __name__ == "__main__":
    main()
