"""Benchmark: a chunked backfill of a 2,000,000-row PostgreSQL table, parallelism 1 against 2.

Run by hand (a few minutes on the reference machine):

    .venv/bin/python bench/backfill.py [--rows 2000000] [--chunks 100] [--pg-url URL]

One source table (bigint id primary key, numeric amount, text label, timestamptz
updated_at), generated in PostgreSQL. For each parallelism (1, then 2, then 1 and
2 again when --repeat 2) a fresh project backfills it through `hakiri apply`'s
own code path (`apply_project`, in this process, one SparkSession shared by all
runs): numeric cursor `id`, `window = rows / chunks`, mode append, a PostgreSQL
target in a schema of its own, a SQLite catalog in the project directory.

Reported per run: wall time of the apply (planning, ledger checks, every chunk,
run record), rows/s, and per chunk the median seconds spent reading + staging
(Spark), in the destination commit, and in the catalog; "overhead" is commit +
catalog, the part of a chunk that is not moving rows through Spark. The target's
row count is checked after each run. A small warm-up backfill runs first (not
reported) so JIT warm-up does not land on whichever run goes first.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

import psycopg
from psycopg import sql
from tests.support.postgres import TestPostgres

from hakiri.services.apply import apply_project
from hakiri.spark.session import build_spark_session, resolve_jdbc_jars

SOURCE_SCHEMA = "bench_src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=2_000_000)
    parser.add_argument("--chunks", type=int, default=100)
    parser.add_argument("--repeat", type=int, default=1, help="timed runs of each parallelism")
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument("--master", default="local[2]")
    args = parser.parse_args()

    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url  # type: ignore[union-attr]
    try:
        run(url, args.rows, args.chunks, args.repeat, args.master)
    finally:
        if server is not None:
            server.stop()


def make_source(url: str, rows: int) -> str:
    with psycopg.connect(url, autocommit=True) as conn:
        version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(SOURCE_SCHEMA))
        )
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(SOURCE_SCHEMA)))
        for table, count in (("src", rows), ("warmup", 20_000)):
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigint PRIMARY KEY, amount numeric(12,2), label text, "
                    "updated_at timestamptz)"
                ).format(sql.Identifier(SOURCE_SCHEMA, table))
            )
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} SELECT g, (g %% 10000) / 100.0, 'row ' || g, "
                    "timestamptz '2020-01-01 00:00+00' + g * interval '1 second' "
                    "FROM generate_series(1, %s) g"
                ).format(sql.Identifier(SOURCE_SCHEMA, table)),
                [count],
            )
            conn.execute(sql.SQL("ANALYZE {}").format(sql.Identifier(SOURCE_SCHEMA, table)))
    return str(version)


def project(
    root: Path, url: str, table: str, target_schema: str, window: int, parallelism: int
) -> Path:
    root.mkdir(parents=True)
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "bench-backfill"

        [connections.wh]
        type = "postgres"
        url = "{url}"

        [[pipeline]]
        id = "backfill"
        source = {{ connector = "postgres", config = {{ connection = "wh", schema = "{SOURCE_SCHEMA}" }} }}
        tables = [{{ name = "{table}", target = "dst", incremental = "id" }}]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{target_schema}" }} }}
        load = {{ mode = "append" }}

        [pipeline.backfill]
        window = {window}
        parallelism = {parallelism}
        """)
    )
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(target_schema))
        )
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target_schema)))
    return root


def backfill(
    url: str, base: Path, name: str, table: str, rows: int, chunks: int, parallelism: int
) -> dict:
    target_schema = f"bench_{name}"
    root = project(base / name, url, table, target_schema, -(-rows // chunks), parallelism)
    started = time.perf_counter()
    [outcome] = apply_project(root, ["backfill"])
    seconds = time.perf_counter() - started
    if outcome.status != "success":
        raise SystemExit(f"{name}: {outcome.error} ({outcome.hint})")
    with psycopg.connect(url, autocommit=True) as conn:
        loaded = conn.execute(
            sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(target_schema, "dst"))
        ).fetchone()[0]  # type: ignore[index]
        conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(target_schema)))
    if loaded != rows or outcome.batches != chunks:
        raise SystemExit(f"{name}: loaded {loaded} rows in {outcome.batches} chunks")

    def median(key: str) -> float:
        return statistics.median(t[key] for t in outcome.timings)

    return {
        "seconds": seconds,
        "rows_per_sec": rows / seconds,
        "read_stage": median("read_stage"),
        "commit": median("commit"),
        "catalog": median("catalog"),
        "overhead": statistics.median(t["commit"] + t["catalog"] for t in outcome.timings),
    }


def run(url: str, rows: int, chunks: int, repeat: int, master: str) -> None:
    started = time.perf_counter()
    version = make_source(url, rows)
    print(
        f"PostgreSQL {version}; source of {rows:,} rows made in {time.perf_counter() - started:.1f} s"
    )
    driver = resolve_jdbc_jars(None)
    started = time.perf_counter()
    spark = build_spark_session(master=master, jars=list(driver.jars), app_name="bench-backfill")
    print(f"Spark {spark.version} {master}; session start {time.perf_counter() - started:.1f} s")
    results: dict[int, list[dict]] = {1: [], 2: []}
    with tempfile.TemporaryDirectory(prefix="hakiri-bench-") as tmp:
        base = Path(tmp)
        backfill(url, base, "warmup", "warmup", 20_000, 4, 2)
        for round_ in range(repeat):
            for parallelism in (1, 2):
                name = f"p{parallelism}_r{round_}"
                result = backfill(url, base, name, "src", rows, chunks, parallelism)
                results[parallelism].append(result)
                print(
                    f"parallelism {parallelism}: {result['seconds']:.1f} s, "
                    f"{result['rows_per_sec'] / 1000:.0f}k rows/s; per chunk (median) "
                    f"read+stage {result['read_stage'] * 1000:.0f} ms, commit {result['commit'] * 1000:.0f} ms, "
                    f"catalog {result['catalog'] * 1000:.0f} ms, overhead {result['overhead'] * 1000:.0f} ms"
                )
    spark.stop()
    best = {p: min(r["seconds"] for r in runs) for p, runs in results.items()}
    print(
        f"best wall time: p1 {best[1]:.1f} s, p2 {best[2]:.1f} s, p1/p2 = {best[1] / best[2]:.2f}"
    )


if __name__ == "__main__":
    main()
