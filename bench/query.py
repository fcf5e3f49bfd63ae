"""Benchmark: `hakiri query` on a 1M-row context table, per engine, beside DuckDB directly.

Run by hand (a few minutes on 2 cores; the spark rows start hakiri's local Spark Connect
server once, under HAKIRI_CACHE_DIR, and stop it at the end):

    .venv/bin/python bench/query.py [--rows 1000000] [--repeat 5] [--engines duckdb,sail,spark]

The table: ROWS orders (id, customer_id, status of 4, total, created_at) written with delta-rs
into a project's context store (one parquet file, as a load of that size writes), with a
pipeline that names it and a view over it. Two queries:

- group-by: SELECT status, count(*), sum(total) FROM orders GROUP BY status ORDER BY status
- point:    SELECT * FROM orders WHERE id = 424242

Two ways of timing each, median of REPEAT, every answer checked against pyarrow's:

- process: the whole command from start to exit (interpreter, imports, manifests, engine start),
  `hakiri query SQL --format json --engine E` with stdout to a file; "duckdb-direct" is a bare
  script (import duckdb and deltalake, register the table's Arrow dataset, run the SQL, print
  JSON): the comparison the issue asks for; "datafusion-direct" is delta-rs's own QueryBuilder.
- warm: in one process after one warm-up run, the query alone: hakiri's prepare_query +
  run_query + every batch read, on each engine; DuckDB directly on a connection kept open.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

GROUP_BY = (
    "SELECT status, count(*) AS n, sum(total) AS total FROM orders GROUP BY status ORDER BY status"
)
POINT = "SELECT * FROM orders WHERE id = 424242"
QUERIES = {"group-by": GROUP_BY, "point": POINT}

DUCKDB_DIRECT = """
import json, sys
import duckdb
from deltalake import DeltaTable
from pyarrow import fs
path, sql = sys.argv[1:3]
con = duckdb.connect()
local = fs.SubTreeFileSystem(path, fs.LocalFileSystem())
con.register("orders", DeltaTable(path).to_pyarrow_dataset(filesystem=local))
table = con.sql(sql).to_arrow_table()
print(json.dumps({"rows": [list(r.values()) for r in table.to_pylist()]}, default=str))
"""

DATAFUSION_DIRECT = """
import json, sys
from deltalake import DeltaTable, QueryBuilder
import pyarrow as pa
path, sql = sys.argv[1:3]
reader = QueryBuilder().register("orders", DeltaTable(path)).execute(sql)
table = pa.table(reader.read_all())
print(json.dumps({"rows": [list(r.values()) for r in table.to_pylist()]}, default=str))
"""


def _project(root: Path, rows: int) -> Path:
    import numpy as np
    import pyarrow as pa
    from deltalake import write_deltalake

    (root / "data").mkdir(parents=True)
    (root / "hakiri.toml").write_text(
        '[project]\nname = "bench-query"\n\n[[pipeline]]\nid = "orders"\n'
        'source = { connector = "files", config = { path = "data/*.csv", format = "csv" } }\n'
        'tables = ["orders"]\n\n[[view]]\nname = "by_status"\n'
        'sql = "SELECT status, count(*) AS n FROM orders GROUP BY status"\n'
    )
    rng = np.random.default_rng(50)
    start = np.datetime64("2026-01-01T00:00:00")
    table = pa.table(
        {
            "id": pa.array(np.arange(rows, dtype=np.int64)),
            "customer_id": pa.array(rng.integers(0, 10_000, rows)),
            "status": pa.array(
                np.array(["open", "paid", "shipped", "cancelled"])[rng.integers(0, 4, rows)]
            ),
            "total": pa.array(rng.random(rows) * 100),
            "created_at": pa.array(
                (start + rng.integers(0, 300 * 86400, rows).astype("timedelta64[s]")).astype(
                    "datetime64[us]"
                )
            ),
        }
    )
    path = root / ".hakiri" / "context" / "orders"
    write_deltalake(str(path), table, mode="overwrite")
    return path


def _expected(path: Path) -> dict[str, list[list[object]]]:
    import pyarrow.compute as pc
    from deltalake import DeltaTable

    table = DeltaTable(str(path)).to_pyarrow_table()
    grouped = table.group_by("status").aggregate([([], "count_all"), ("total", "sum")])
    grouped = grouped.sort_by("status")
    point = table.filter(pc.equal(table["id"], 424242))
    return {
        "group-by": [[r["status"], r["count_all"], r["total_sum"]] for r in grouped.to_pylist()],
        "point": [
            [str(v) if k == "created_at" else v for k, v in r.items()] for r in point.to_pylist()
        ],
    }


def _same(rows: list[list[object]], expected: list[list[object]]) -> bool:
    if len(rows) != len(expected):
        return False
    for got, want in zip(rows, expected, strict=True):
        for a, b in zip(got, want, strict=True):
            if isinstance(b, float):
                if abs(float(a) - b) > 1e-6 * max(1.0, abs(b)):  # type: ignore[arg-type]
                    return False
            elif str(a).replace("T", " ") != str(b).replace("T", " "):
                return False
    return True


def _process(cmd: list[str], env: dict[str, str], root: Path) -> tuple[float, list[list[object]]]:
    started = time.perf_counter()
    done = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, check=False)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{cmd[:6]} failed:\n{done.stderr[-2000:]}")
    return elapsed, json.loads(done.stdout)["rows"]


def _warm(
    engine: str, root: Path, path: Path, sql: str, repeat: int
) -> tuple[list[float], list[list[object]]]:
    if engine in ("duckdb-direct", "datafusion-direct"):
        import duckdb
        from deltalake import DeltaTable, QueryBuilder
        from pyarrow import fs

        if engine == "duckdb-direct":
            con = duckdb.connect()
            local = fs.SubTreeFileSystem(str(path), fs.LocalFileSystem())
            con.register("orders", DeltaTable(str(path)).to_pyarrow_dataset(filesystem=local))

            def once() -> list[list[object]]:
                return [list(r.values()) for r in con.sql(sql).to_arrow_table().to_pylist()]
        else:
            builder = QueryBuilder().register("orders", DeltaTable(str(path)))

            def once() -> list[list[object]]:
                import pyarrow as pa

                table = pa.table(builder.execute(sql).read_all())
                return [list(r.values()) for r in table.to_pylist()]
    else:
        from hakiri.services.query import prepare_query
        from hakiri.services.query_engines import engine_named, run_query
        from hakiri.services.query_output import json_rows
        from hakiri.spec.loader import load_project

        project = load_project(root, os.environ)
        if engine == "duckdb":

            def once() -> list[list[object]]:
                result = run_query(project, prepare_query(project, sql), engine=engine)
                return [row for batch in result.batches() for row in json_rows(batch)]
        else:  # one session for every run, as a long-lived process would keep it
            runner = engine_named(engine, project, os.environ)

            def once() -> list[list[object]]:
                _, batches, _ = runner.run(prepare_query(project, sql), None, None)
                return [row for batch in batches for row in json_rows(batch)]

    rows = once()  # warm-up: imports, the engine's start, the first scan
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        rows = once()
        times.append(time.perf_counter() - started)
    if engine in ("sail", "spark"):
        runner.spark.stop()  # type: ignore[attr-defined]  # the lease on the local server
    return times, rows


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--engines", default="duckdb,sail,spark")
    args = parser.parse_args()
    engines = args.engines.split(",")

    work = Path(tempfile.mkdtemp(prefix="hakiri-bench-query-"))
    root = work / "project"
    path = _project(root, args.rows)
    expected = _expected(path)
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO / "src"),
        "HAKIRI_CACHE_DIR": os.environ.get("HAKIRI_CACHE_DIR", str(work / "cache")),
    }
    os.environ["HAKIRI_CACHE_DIR"] = env["HAKIRI_CACHE_DIR"]
    hakiri = [sys.executable, "-m", "hakiri.cli.main", "query"]
    print(
        f"# {platform.processor() or platform.machine()}, {os.cpu_count()} CPUs, "
        f"Python {platform.python_version()}, load {os.getloadavg()[0]:.1f}; "
        f"{args.rows:,} rows, {sum(p.stat().st_size for p in path.rglob('*.parquet')) / 1e6:.1f} MB parquet",
        flush=True,
    )
    results: list[tuple[str, str, str, list[float]]] = []
    try:
        for name, sql in QUERIES.items():
            paths: dict[str, list[str]] = {
                "duckdb-direct": [sys.executable, "-c", DUCKDB_DIRECT, str(path), sql],
                "datafusion-direct": [sys.executable, "-c", DATAFUSION_DIRECT, str(path), sql],
            }
            for engine in engines:
                paths[f"hakiri --engine {engine}"] = [
                    *hakiri,
                    sql,
                    "-f",
                    "json",
                    "--engine",
                    engine,
                ]
            if "spark" in engines:  # start the warm server outside the timings
                _process(paths["hakiri --engine spark"], env, root)
            timings: dict[str, list[float]] = {k: [] for k in paths}
            for _ in range(args.repeat):  # alternate the paths: a busy moment hits them all
                for label, cmd in paths.items():
                    elapsed, rows = _process(cmd, env, root)
                    if not _same(rows, expected[name]):
                        raise SystemExit(f"{label} answered {rows!r}, expected {expected[name]!r}")
                    timings[label].append(elapsed)
            for label, times in timings.items():
                results.append((name, "process", label, times))
                print(f"{name} process {label}: {[round(t, 3) for t in times]}", flush=True)
            for engine in ["duckdb-direct", "datafusion-direct", *engines]:
                times, rows = _warm(engine, root, path, sql, args.repeat)
                if not _same(rows, expected[name]):
                    raise SystemExit(f"warm {engine} answered {rows!r}")
                results.append((name, "warm", engine, times))
                print(f"{name} warm {engine}: {[round(t, 4) for t in times]}", flush=True)
    finally:
        if "spark" in engines:
            subprocess.run(
                [sys.executable, "-m", "hakiri.cli.main", "engine", "stop"],
                env=env,
                cwd=root,
                capture_output=True,
                check=False,
            )
    print("| query | timing | path | median | min | max |")
    print("|---|---|---|---|---|---|")
    for name, how, label, times in results:
        print(
            f"| {name} | {how} | {label} | {statistics.median(times):.3f} s | "
            f"{min(times):.3f} s | {max(times):.3f} s |"
        )


if __name__ == "__main__":
    main()
