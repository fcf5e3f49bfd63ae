"""Benchmark: 5 row rules over 1,000,000 rows read from parquet, against the same rows without rules.

Run by hand (about a minute on the reference machine):

    .venv/bin/python bench/quality_rules.py [--rows 1000000] [--repeat 3] [--master local[2]]

Spark generates the rows (6 columns, deterministic, from spark.range) and writes
them to parquet in a temp dir (not timed); every path reads that parquet back:

- no rules: `frame.write.format("noop")` — one full read, nothing else.
- 5 rules: `check_rows` with not_null, regex, range, max_length and field_type
  (warn and skip), then the clean rows and the quarantine records both written
  with the noop format, then `release()`. This is what a hakiri batch does
  before staging, minus the JDBC write.
- rules, no cache (a diagnostic, not a usable path): the annotated frame (the
  rules' one projection) written with noop: what evaluating the rules costs
  without caching, counting or splitting the rows.

For each path it reports the wall time (first run and best of all runs), rows/s,
the Spark jobs the path ran (from the job group's status tracker) and how often
the parquet source was read: the rows that the `Scan parquet` nodes produced in
the path's SQL executions (Spark's own SQL status store, as the SQL UI shows
them), divided by the row count. A scan served from the cache produces 0 rows.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import TypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

from tests.support.spark_scans import rows_scanned_since

from hakiri.quality.rules import check_rows, compile_rules
from hakiri.spark.session import build_spark_session
from hakiri.spec.quality import RowRule

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

RULES = [
    {"type": "not_null", "column": "email", "on_fail": "skip"},
    {"type": "regex", "column": "email", "pattern": "^[^@]+@[^@]+$", "on_fail": "warn"},
    {"type": "range", "column": "amount", "min": 0, "on_fail": "skip"},
    {"type": "max_length", "column": "code", "max": 8, "on_fail": "warn"},
    {"type": "field_type", "column": "qty", "expected": "integer", "on_fail": "skip"},
]


@dataclass
class PathRun:
    seconds: float
    jobs: int
    source_reads: float  # rows read from parquet / rows in the source
    result: Any = None  # what the timed work returned (the rule report)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each path")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    began = time.monotonic()
    spark = build_spark_session(
        master=args.master, conf={"spark.ui.enabled": "false"}, app_name="bench-rules"
    )
    spark_start = time.monotonic() - began
    workdir = Path(tempfile.mkdtemp(prefix="hakiri-bench-"))
    try:
        run(spark, workdir, args.rows, args.repeat, spark_start)
    finally:
        shutil.rmtree(workdir, ignore_errors=True)
        spark.stop()


def run(spark: SparkSession, workdir: Path, rows: int, repeat: int, spark_start: float) -> None:
    began = time.monotonic()
    generate(spark, rows).write.parquet(str(workdir / "rows"))
    written = time.monotonic() - began
    frame = spark.read.parquet(str(workdir / "rows"))
    rules = [TypeAdapter(RowRule).validate_python(r) for r in RULES]

    plain: list[PathRun] = []
    ruled: list[PathRun] = []
    bare: list[PathRun] = []
    annotated = compile_rules(frame, rules).annotated
    for n in range(repeat):
        plain.append(measure(spark, f"plain-{n}", rows, partial(noop, frame)))
        last = n == repeat - 1
        ruled.append(measure(spark, f"rules-{n}", rows, partial(rules_path, frame, rules, last)))
        bare.append(measure(spark, f"bare-{n}", rows, partial(noop, annotated)))
    report = ruled[-1].result[0]

    print(
        f"rows: {rows:,} x 6 columns (parquet, {size_mb(workdir / 'rows'):.0f} MB); Spark {spark.version}"
    )
    print(f"SparkSession start: {spark_start:.1f} s; parquet written: {written:.1f} s")
    print(f"report: {report}")
    for name, runs in (("no rules", plain), ("5 rules ", ruled), ("rules, no cache", bare)):
        best = min(r.seconds for r in runs)
        print(
            f"{name}: first {runs[0].seconds:5.2f} s, best {best:5.2f} s, "
            f"{rows / best:>10,.0f} rows/s; jobs {[r.jobs for r in runs]}; "
            f"source read {[round(r.source_reads, 2) for r in runs]} times"
        )
    for run_ in ruled:
        check, clean, quarantine = run_.result[1]
        print(
            f"  5 rules, by step: check_rows {check:.2f} s (one query: rules, cache, counts), "
            f"clean {clean:.2f} s, quarantine {quarantine:.2f} s"
        )
    first = ruled[0].seconds / plain[0].seconds
    best = min(r.seconds for r in ruled) / min(r.seconds for r in plain)
    print(f"ratio rules / no rules (time): first {first:.2f}, best {best:.2f}")


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


def rules_path(frame: DataFrame, rules: list[Any], show_plan: bool) -> tuple[Any, list[float]]:
    """check_rows, then both outputs written; returns the report and the three steps' times."""
    began = time.monotonic()
    batch = check_rows(frame, rules, label="bench")
    steps = [time.monotonic() - began]
    try:
        for output in (batch.clean, batch.quarantine):
            began = time.monotonic()
            noop(output)  # type: ignore[arg-type]
            steps.append(time.monotonic() - began)
        if show_plan:
            print_plan(batch.clean, "clean")
            print_plan(batch.quarantine, "quarantine")  # type: ignore[arg-type]
    finally:
        batch.release()
    return batch.report, steps


def noop(frame: DataFrame) -> None:
    frame.write.format("noop").mode("overwrite").save()


def measure(spark: SparkSession, group: str, rows: int, work: Any) -> PathRun:
    sc = spark.sparkContext
    store = spark._jsparkSession.sharedState().statusStore()
    first_execution = store.executionsList().size()
    sc.setJobGroup(group, group)
    began = time.monotonic()
    try:
        result = work()
    finally:
        elapsed = time.monotonic() - began
        sc.setJobGroup("", "")
    sc._jsc.sc().listenerBus().waitUntilEmpty()
    return PathRun(
        seconds=elapsed,
        jobs=len(sc.statusTracker().getJobIdsForGroup(group)),
        source_reads=rows_scanned_since(store, first_execution, "Scan parquet") / rows,
        result=result,
    )


def print_plan(frame: DataFrame, name: str) -> None:
    """The physical plan lines that show where the rows come from."""
    plan = frame._jdf.queryExecution().executedPlan().toString()
    print(f"physical plan of {name} (scan lines):")
    for line in plan.splitlines():
        if any(
            word in line for word in ("InMemoryTableScan", "InMemoryRelation", "FileScan", "Scan ")
        ):
            print("   ", line[:140])


def size_mb(path: Path) -> float:
    return sum(f.stat().st_size for f in path.rglob("*.parquet")) / 1e6


if __name__ == "__main__":
    main()
