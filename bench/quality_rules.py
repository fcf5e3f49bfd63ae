"""Benchmark: a load with 5 row rules against the same load without rules, 1,000,000 rows into PostgreSQL.

Run by hand (a minute or two on the reference machine):

    .venv/bin/python bench/quality_rules.py [--rows 1000000] [--repeat 3] [--pg-url URL]

Spark generates the rows (6 columns, deterministic, from spark.range) and writes
them to parquet in a temp dir (not timed); every path reads that parquet back and
loads it with `PostgresDestination` as `hakiri apply` does: stage (Spark writes the
staging table), judge the rules, commit (truncate into the target, the quarantine
records into `<target>_quarantine`, one transaction). Warm session, as `hakiri
serve` runs it. Four paths, alternating:

- COPY, no rules / COPY, 5 rules: the default writer. With rules, the one pass
  that reads the parquet also evaluates the rules, counts their violations
  (Spark observed metrics) and writes the kept rows and the quarantine records.
- JDBC, no rules / JDBC, 5 rules: `writer = "jdbc"`. Spark's JDBC writer writes one
  table per job, so the rules are evaluated once into a cache (one counting job),
  then the rows and the records are written from it (the context store does the same).

The rules: not_null, regex, range, max_length and field_type (warn and skip), with
a quarantine. For each path: wall time (first and best), rows/s, the Spark jobs it
ran, and how often the parquet was read (rows the `Scan parquet` nodes produced in
the path's SQL executions, Spark's SQL status store, divided by the row count; a
scan served from the cache produces 0 rows) with the number of such scan nodes.

Without --pg-url it starts a throwaway PostgreSQL (tests.support.postgres, the
test suite's server: fsync off) and stops it afterwards.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

import psycopg
from psycopg import sql
from tests.support.postgres import TestPostgres
from tests.support.spark_scans import rows_scanned_since, scan_nodes_since

from hakiri.destinations.base import LoadRequest, QuarantineTable
from hakiri.destinations.postgres.client import PostgresDestination
from hakiri.quality.rules import RuleCheck
from hakiri.spark.session import build_spark_session, resolve_jdbc_jars
from hakiri.spec.load import LoadMode, LoadSpec
from hakiri.spec.quality import RowRule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

SCHEMA = "bench_rules"
RULES = [
    {"type": "not_null", "column": "email", "on_fail": "skip"},
    {"type": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$", "on_fail": "warn"},
    {"type": "range", "column": "amount", "min": 0, "on_fail": "skip"},
    {"type": "max_length", "column": "code", "max": 8, "on_fail": "warn"},
    {"type": "field_type", "column": "qty", "expected": "integer", "on_fail": "skip"},
]
PATHS = ("copy, no rules", "copy, 5 rules", "jdbc, no rules", "jdbc, 5 rules")


@dataclass
class PathRun:
    seconds: float
    jobs: int
    source_reads: float  # rows read from parquet / rows in the source
    scan_nodes: int
    loaded: int
    quarantined: int
    report: Any


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each path")
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    args = parser.parse_args()

    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url  # type: ignore[union-attr]
    began = time.monotonic()
    spark = build_spark_session(
        master=args.master,
        conf={"spark.ui.enabled": "false"},
        jars=list(resolve_jdbc_jars(None).jars),
        app_name="bench-rules",
    )
    spark_start = time.monotonic() - began
    workdir = Path(tempfile.mkdtemp(prefix="hakiri-bench-"))
    try:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SCHEMA)))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SCHEMA)))
        run(spark, url, workdir, args.rows, args.repeat, spark_start)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        spark.stop()
        if server is not None:
            server.stop()


def run(
    spark: SparkSession, url: str, workdir: Path, rows: int, repeat: int, spark_start: float
) -> None:
    began = time.monotonic()
    generate(spark, rows).write.parquet(str(workdir / "rows"))
    written = time.monotonic() - began
    frame = spark.read.parquet(str(workdir / "rows"))
    rules = [TypeAdapter(RowRule).validate_python(r) for r in RULES]

    runs: dict[str, list[PathRun]] = {name: [] for name in PATHS}
    sitting = uuid.uuid4().hex[:8]  # batch ids the load ledger has not seen
    for n in range(repeat):
        for name in PATHS:
            writer = name.split(",")[0]
            with_rules = rules if "5 rules" in name else []
            group = f"{sitting}-{n}-{name}"
            path_run = measure(spark, url, frame, with_rules, writer, group, rows)
            expected = rows if not with_rules else path_run.report.rows_kept
            if path_run.loaded != expected:
                raise SystemExit(f"{name}: loaded {path_run.loaded:,} rows, expected {expected:,}")
            runs[name].append(path_run)

    print(
        f"rows: {rows:,} x 6 columns (parquet, {size_mb(workdir / 'rows'):.0f} MB); "
        f"Spark {spark.version}, {spark.sparkContext.master}"
    )
    print(f"SparkSession start: {spark_start:.1f} s; parquet written: {written:.1f} s")
    print(f"report: {runs['copy, 5 rules'][-1].report}")
    for name, path_runs in runs.items():
        best = min(r.seconds for r in path_runs)
        last = path_runs[-1]
        print(
            f"{name:15}: first {path_runs[0].seconds:5.2f} s, best {best:5.2f} s, "
            f"{rows / best:>10,.0f} rows/s; jobs {[r.jobs for r in path_runs]}; "
            f"source read {[round(r.source_reads, 2) for r in path_runs]} times by "
            f"{last.scan_nodes} scan node(s); loaded {last.loaded:,}, quarantined {last.quarantined:,}"
        )
    for writer in ("copy", "jdbc"):
        plain, ruled = runs[f"{writer}, no rules"], runs[f"{writer}, 5 rules"]
        first = ruled[0].seconds / plain[0].seconds
        best = min(r.seconds for r in ruled) / min(r.seconds for r in plain)
        print(f"ratio 5 rules / no rules, {writer}: first {first:.2f}, best {best:.2f}")


def generate(spark: SparkSession, rows: int) -> DataFrame:
    """6 columns; a few rows in every thousand break one rule or another."""
    from pyspark.sql import functions as F

    id_ = F.col("id")
    return spark.range(0, rows, numPartitions=2).select(
        id_,
        F.when(id_ % 2000 == 7, None)
        .when(id_ % 1000 == 3, F.concat(F.lit("user"), id_.cast("string"), F.lit(".example.com")))
        .otherwise(F.concat(F.lit("user"), id_.cast("string"), F.lit("@example.com")))
        .alias("email"),
        F.when(id_ % 997 == 0, F.lit(-1.0)).otherwise((id_ % 10_000) * 0.5).alias("amount"),
        F.when(id_ % 50_000 == 11, F.lit("C-TOO-LONG-CODE"))
        .otherwise(F.concat(F.lit("C"), (id_ % 100_000).cast("string")))
        .alias("code"),
        F.when(id_ % 10_007 == 5, F.lit("n/a")).otherwise((id_ % 100).cast("string")).alias("qty"),
        F.timestamp_seconds(F.lit(1_700_000_000) + id_).alias("at"),
    )


def load(url: str, frame: DataFrame, rules: list[Any], writer: str, batch: str) -> tuple[Any, Any]:
    """Stage, judge the rules, commit (truncate): as the engine loads one batch."""
    destination = PostgresDestination(url, SCHEMA, writer=writer)
    request = LoadRequest(
        project="bench",
        pipeline_id="bench_rules",
        run_id=batch,
        batch_id=batch,
        target_schema=SCHEMA,
        target_table="t",
        load=LoadSpec(mode=LoadMode.TRUNCATE),
        quarantine=QuarantineTable(SCHEMA, "t_quarantine", "t"),
    )
    checked = RuleCheck(frame, rules, label="bench")
    try:
        staged = destination.stage(checked, request)
        report = checked.finish()
        return destination.commit(staged, request, lambda _: None), report
    finally:
        checked.release()


def measure(
    spark: SparkSession,
    url: str,
    frame: DataFrame,
    rules: list[Any],
    writer: str,
    group: str,
    rows: int,
) -> PathRun:
    sc = spark.sparkContext
    store = spark._jsparkSession.sharedState().statusStore()
    first_execution = store.executionsList().size()
    sc.setJobGroup(group, group)
    began = time.monotonic()
    try:
        result, report = load(url, frame, rules, writer, group)
    finally:
        elapsed = time.monotonic() - began
        sc.setJobGroup("", "")
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    return PathRun(
        seconds=elapsed,
        jobs=len(sc.statusTracker().getJobIdsForGroup(group)),
        source_reads=rows_scanned_since(store, first_execution, "Scan parquet") / rows,
        scan_nodes=scan_nodes_since(store, first_execution, "Scan parquet"),
        loaded=result.rows_loaded,
        quarantined=result.quarantined,
        report=report,
    )


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*.parquet")) / 1e6


if __name__ == "__main__":
    main()
