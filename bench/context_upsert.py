"""Benchmark: MERGE of 1,000,000 changed rows into a 6,000,000-row Delta table, delta-rs in the driver against delta-spark.

Run by hand (generating the data the first time takes a few minutes; each MERGE, tens of seconds):

    .venv/bin/python bench/context_upsert.py [--base-rows 6000000] [--changed-rows 1000000]
        [--repeat 3] [--driver-memory 2g] [--spark-conf KEY=VALUE ...] [--json FILE] [--keep]

The base table (bigint key `id` 0..N-1 and 7 columns: integer, double, decimal(15,2),
date, timestamp, string, boolean; values hashed from the key, so deterministic) is written
once by delta-spark into bench/.data/context-upsert-<N>/base, with protocol reader 1 /
writer 2 and no table features, so that delta-rs reads it. The changes are staged once as
Parquet files (TIMESTAMP_MICROS) in .../changes-<M>: half of them update keys spread evenly
over the table (so every base file is touched; every non-key column changes), half insert
new keys >= N. Each run MERGEs them into a fresh copy of the base (shutil.copytree, not
timed), in a process of its own (`--worker`), the two paths alternating:

- deltars: the previous hakiri path. delta-rs opens the table in the Python process and
  MERGEs the Parquet files streamed through a pyarrow dataset reader.
- delta-spark: `DeltaTable.forPath(...).merge(...)` run by Spark on local[2], the session
  built by hakiri (Delta jars from hakiri's jar cache, hakiri's Spark defaults).

Timed: the MERGE call alone (`open` reports the table open apart; for delta-spark, the
SparkSession start too, once per worker). Memory: peak RSS of the worker's Python process
(ru_maxrss) and, for delta-spark, of its JVM (VmHWM). After each round both results are
checked in Spark, not in this process: N + M/2 rows, the checksum (sum of the hash of every
column) of the expected rows, and `exceptAll` empty both ways; any mismatch exits 1.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import time
from datetime import date
from importlib.metadata import version
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from collections.abc import Callable

    from pyspark.sql import DataFrame, SparkSession

DATA = Path(__file__).resolve().parent / ".data"
COLUMNS = ("id", "qty", "amount", "price", "day", "at", "name", "active")
PATHS = ("deltars", "delta-spark")
SEED = 20240601
ROWS_PER_FILE = 500_000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--base-rows", type=int, default=6_000_000)
    parser.add_argument("--changed-rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each path")
    parser.add_argument("--driver-memory", default="2g", help="spark.driver.memory (the JVM)")
    parser.add_argument(
        "--spark-conf", action="append", default=[], metavar="KEY=VALUE", help="for delta-spark"
    )
    parser.add_argument("--json", type=Path, help="write the results to this file")
    parser.add_argument("--keep", action="store_true", help="keep the result tables")
    parser.add_argument("--worker", choices=PATHS, help=argparse.SUPPRESS)
    parser.add_argument("--table", help=argparse.SUPPRESS)
    parser.add_argument("--changes", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.worker:
        files = sorted(str(f) for f in Path(args.changes).glob("*.parquet"))
        merge = merge_deltars if args.worker == "deltars" else merge_delta_spark
        print(json.dumps(merge(args.table, files, spark_conf(args))), flush=True)
        return
    updates = args.changed_rows // 2
    if not 0 < updates <= args.base_rows:
        raise SystemExit("--changed-rows must be at least 2 and at most twice --base-rows")
    run(args)


def spark_conf(args: argparse.Namespace) -> dict[str, str]:
    pairs = [item.partition("=")[::2] for item in args.spark_conf]
    return {"spark.driver.memory": args.driver_memory, **dict(pairs)}


def session(conf: dict[str, str]) -> SparkSession:
    """local[2] with Delta's SQL, its jars from hakiri's jar cache, hakiri's Spark defaults."""
    from hakiri.spark.delta import delta_jars, with_delta_conf
    from hakiri.spark.session import build_spark_session

    # As `hakiri apply` starts it for a context-store project (Delta's settings, hakiri's).
    settings = {k: str(v) for k, v in with_delta_conf(conf).items()}
    return build_spark_session(
        master="local[2]", conf=settings, jars=delta_jars(()), app_name="bench"
    )


def run(args: argparse.Namespace) -> None:
    n, m, updates = args.base_rows, args.changed_rows, args.changed_rows // 2
    data = DATA / f"context-upsert-{n}"
    base, changes = data / "base", data / f"changes-{m}"
    # Verification shuffles 2 x (N + M/2) rows: more, smaller partitions than hakiri's 4.
    spark = session({"spark.driver.memory": "2g", "spark.sql.shuffle.partitions": "8"})
    try:
        expected = prepare(spark, data, base, changes, n, m)
        results: list[dict[str, Any]] = []
        for round_ in range(args.repeat):
            order = PATHS if round_ % 2 == 0 else PATHS[::-1]
            tables = {name: data / "runs" / f"{round_}-{name}" for name in order}
            for name, table in tables.items():
                shutil.rmtree(table, ignore_errors=True)
                shutil.copytree(base, table)
                result = worker(name, table, changes, args)
                if (result["updated"], result["inserted"]) != (updates, m - updates):
                    raise SystemExit(
                        f"round {round_}, {name}: updated {result['updated']:,} and inserted "
                        f"{result['inserted']:,} rows, expected {updates:,} and {m - updates:,}"
                    )
                results.append({"round": round_, **result})
            checked = verify(spark, tables, expected)
            print(f"round {round_}: both results equal, {checked}", flush=True)
            if not args.keep:
                for table in tables.values():
                    shutil.rmtree(table)
    finally:
        spark.stop()
    print(f"base: {n:,} rows, {size(base)}; changes: {m:,} rows, {size(changes)}")
    report(args, expected, results)


def prepare(
    spark: SparkSession, data: Path, base: Path, changes: Path, n: int, m: int
) -> dict[str, int]:
    """Write the base table and the changes unless there already; the expected result's
    row count and checksum (cached beside them)."""
    from pyspark.sql import functions as F

    def write_base(path: str) -> None:
        frame = rows(spark.range(0, n, numPartitions=max(1, n // ROWS_PER_FILE)))
        frame.write.format("delta").option("delta.enableDeletionVectors", "false").save(path)
        check_readable(path, n)

    def write_changes(path: str) -> None:
        updates, parts = m // 2, max(1, m // ROWS_PER_FILE)
        keys = spark.range(0, updates, numPartitions=parts).select(
            (F.col("id") * (n // updates)).alias("id")  # spread over the whole table
        )
        inserts = spark.range(n, n + m - updates, numPartitions=parts)
        changed(rows(keys)).unionByName(rows(inserts)).write.parquet(path)

    fresh = write_once(base, write_base) | write_once(changes, write_changes)
    cached = data / f"expected-{m}.json"
    if fresh or not cached.exists():
        source = spark.read.parquet(str(changes))
        target = spark.read.format("delta").load(str(base))
        merged = target.join(source.select("id"), "id", "left_anti").unionByName(source)
        cached.write_text(json.dumps(dict(zip(("rows", "checksum"), summary(merged), strict=True))))
    return json.loads(cached.read_text())


def write_once(target: Path, write: Callable[[str], None]) -> bool:
    """`write` into a sibling renamed to `target` when done, unless `target` is there."""
    if target.exists():
        return False
    began = time.monotonic()
    partial = target.with_name(target.name + ".tmp")
    shutil.rmtree(partial, ignore_errors=True)
    target.parent.mkdir(parents=True, exist_ok=True)
    write(str(partial))
    partial.rename(target)
    print(f"{target} written: {time.monotonic() - began:.1f} s", flush=True)
    return True


def rows(ids: DataFrame) -> DataFrame:
    """The 8 columns for the keys in `ids`, every value hashed from the key."""
    from pyspark.sql import functions as F

    h = F.xxhash64(F.lit(SEED), F.col("id"))

    def bits(shift: int, mod: int) -> Any:
        return F.pmod(F.shiftright(h, shift), F.lit(mod))

    return ids.select(
        "id",
        bits(0, 1000).cast("int").alias("qty"),
        (bits(10, 100_000_000) / 100).alias("amount"),
        (bits(20, 1_000_000_000) / 100).cast("decimal(15,2)").alias("price"),
        F.date_add(F.lit(date(2020, 1, 1)), bits(30, 2000).cast("int")).alias("day"),
        F.timestamp_micros(F.lit(1_577_836_800_000_000) + bits(0, 10**14)).alias("at"),
        F.concat_ws("-", F.lit("customer"), F.col("id").cast("string"), F.hex(h)).alias("name"),
        (bits(40, 2) == 0).alias("active"),
    )


def changed(frame: DataFrame) -> DataFrame:
    """Every non-key column different from the base row's."""
    from pyspark.sql import functions as F

    return frame.select(
        "id",
        (F.col("qty") + 1).cast("int").alias("qty"),
        (F.col("amount") + 0.5).alias("amount"),
        (F.col("price") + 1).cast("decimal(15,2)").alias("price"),
        F.date_add("day", 1).alias("day"),
        (F.col("at") + F.expr("INTERVAL 1 SECOND")).alias("at"),
        F.concat(F.lit("u-"), F.col("name")).alias("name"),
        (~F.col("active")).alias("active"),
    )


def check_readable(table: str, n: int) -> None:
    """delta-rs opens the table, finds protocol 1/2 and no features, and reads its rows."""
    from deltalake import DeltaTable

    protocol = DeltaTable(table).protocol()
    versions = (protocol.min_reader_version, protocol.min_writer_version)
    if versions != (1, 2) or protocol.reader_features or protocol.writer_features:
        raise SystemExit(f"{table}: delta-spark wrote {protocol}, expected reader 1 / writer 2")
    dataset = DeltaTable(table).to_pyarrow_dataset()
    if dataset.count_rows() != n or dataset.head(10).num_rows != 10:
        raise SystemExit(f"{table}: delta-rs does not read {n:,} rows")


def worker(name: str, table: Path, changes: Path, args: argparse.Namespace) -> dict[str, Any]:
    """One MERGE in a process of its own; what it printed (JSON)."""
    argv = [sys.executable, __file__, "--worker", name, "--table", str(table)]
    argv += ["--changes", str(changes), "--driver-memory", args.driver_memory]
    argv += [f"--spark-conf={item}" for item in args.spark_conf]
    done = subprocess.run(argv, stdout=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"{name} worker failed (exit {done.returncode}): {done.stdout[-2000:]}")
    result = json.loads(done.stdout.strip().splitlines()[-1])
    memory = result["py_peak_mb"] + result.get("jvm_peak_mb", 0)
    print(f"  {name:11}: MERGE {result['merge_s']:6.2f} s, peak RSS {memory:,} MB", flush=True)
    return result


def merge_deltars(table: str, files: list[str], _: dict[str, str]) -> dict[str, Any]:
    import pyarrow.dataset as ds
    from deltalake import DeltaTable

    rss_before = proc_mb("self", "VmRSS")
    began = time.monotonic()
    target = DeltaTable(table)
    opened = time.monotonic()
    metrics = (
        target.merge(
            source=ds.dataset(files, format="parquet").scanner().to_reader(),
            predicate='t."id" = s."id"',
            source_alias="s",
            target_alias="t",
        )
        .when_matched_update_all()
        .when_not_matched_insert_all()
        .execute()
    )
    done = time.monotonic()
    return {
        "path": "deltars",
        "open_s": opened - began,
        "merge_s": done - opened,
        "updated": int(metrics["num_target_rows_updated"]),
        "inserted": int(metrics["num_target_rows_inserted"]),
        "py_rss_before_mb": rss_before,
        "py_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
    }


def merge_delta_spark(table: str, files: list[str], conf: dict[str, str]) -> dict[str, Any]:
    from delta.tables import DeltaTable

    began = time.monotonic()
    spark = session(conf)
    started = time.monotonic()
    jvm = str(spark.sparkContext._jvm.java.lang.ProcessHandle.current().pid())  # type: ignore[union-attr]
    jvm_before, py_before = proc_mb(jvm, "VmRSS"), proc_mb("self", "VmRSS")
    source = spark.read.parquet(*files)
    began_open = time.monotonic()
    target = DeltaTable.forPath(spark, table)
    opened = time.monotonic()
    result = (
        target.alias("t")
        .merge(source.alias("s"), "t.`id` = s.`id`")
        .whenMatchedUpdate(set={c: f"s.`{c}`" for c in COLUMNS if c != "id"})
        .whenNotMatchedInsert(values={c: f"s.`{c}`" for c in COLUMNS})
        .execute()
    )
    done = time.monotonic()
    metrics = result.first().asDict()  # type: ignore[union-attr]
    out = {
        "path": "delta-spark",
        "spark_start_s": started - began,
        "open_s": opened - began_open,
        "merge_s": done - opened,
        "updated": int(metrics["num_updated_rows"]),
        "inserted": int(metrics["num_inserted_rows"]),
        "py_rss_before_mb": py_before,
        "py_peak_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss // 1024,
        "jvm_rss_before_mb": jvm_before,
        "jvm_peak_mb": proc_mb(jvm, "VmHWM"),
    }
    spark.stop()
    return out


def proc_mb(pid: str, field: str) -> int:
    """A figure of /proc/<pid>/status in MB (VmRSS: resident now, VmHWM: its peak)."""
    status = Path(f"/proc/{pid}/status").read_text().splitlines()
    return next(int(line.split()[1]) // 1024 for line in status if line.startswith(f"{field}:"))


def summary(frame: DataFrame) -> tuple[int, int]:
    """Row count and checksum: the sum of the hash of every column, computed by Spark."""
    from pyspark.sql import functions as F

    row = frame.agg(F.count("*"), F.sum(F.hash(*COLUMNS).cast("bigint"))).first()
    return int(row[0]), int(row[1])  # type: ignore[index]


def verify(spark: SparkSession, tables: dict[str, Path], expected: dict[str, int]) -> str:
    frames = {
        n: spark.read.format("delta").load(str(t)).select(*COLUMNS) for n, t in tables.items()
    }
    for name, frame in frames.items():
        count, checksum = summary(frame)
        if (count, checksum) != (expected["rows"], expected["checksum"]):
            raise SystemExit(
                f"{name}: {count:,} rows, checksum {checksum}; expected {expected['rows']:,} "
                f"rows, checksum {expected['checksum']} ({tables[name]})"
            )
    (a, first), (b, second) = frames.items()
    only_a, only_b = first.exceptAll(second).count(), second.exceptAll(first).count()
    if only_a or only_b:
        raise SystemExit(f"results differ: {only_a:,} rows only in {a}, {only_b:,} only in {b}")
    return f"{expected['rows']:,} rows, checksum {expected['checksum']}"


def size(path: Path) -> str:
    files = list(path.glob("*.parquet"))
    return f"{len(files)} files, {sum(f.stat().st_size for f in files) / 1e6:.0f} MB"


def report(args: argparse.Namespace, expected: dict[str, int], results: list[dict]) -> None:
    import deltalake
    import pyarrow
    import pyspark

    machine = {"cpus": os.cpu_count(), "python": platform.python_version()}
    machine |= {"pyspark": pyspark.__version__, "delta-spark": version("delta-spark")}
    machine |= {"deltalake": deltalake.__version__, "pyarrow": pyarrow.__version__}
    print(f"\n{'path':12} {'MERGE s (runs)':24} {'median':>7} {'open s':>7}  peak RSS MB (median)")
    medians: dict[str, dict[str, float]] = {}
    for name in PATHS:
        runs = [r for r in results if r["path"] == name]
        medians[name] = {
            k: statistics.median(r[k] for r in runs) for k in runs[0] if k[-2:] in ("_s", "mb")
        }
        med = medians[name]
        times = ", ".join(f"{r['merge_s']:.2f}" for r in runs)
        memory = f"python {med['py_peak_mb']:,.0f}"
        memory += f" + JVM {med['jvm_peak_mb']:,.0f}" if "jvm_peak_mb" in med else ""
        print(f"{name:12} {times:24} {med['merge_s']:7.2f} {med['open_s']:7.2f}  {memory}")
    ratio = medians["delta-spark"]["merge_s"] / medians["deltars"]["merge_s"]
    print(f"ratio delta-spark / deltars, median MERGE: {ratio:.2f}")
    print(
        f"delta-spark: local[2], {', '.join(f'{k}={v}' for k, v in spark_conf(args).items())}; "
        f"SparkSession start {medians['delta-spark']['spark_start_s']:.1f} s (median, not timed)"
    )
    print("machine: " + ", ".join(f"{k} {v}" for k, v in machine.items()))
    if args.json:
        document = {"args": {k: str(v) for k, v in vars(args).items()}, "machine": machine}
        document |= {"expected": expected, "runs": results, "medians": medians, "ratio": ratio}
        args.json.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
