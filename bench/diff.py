"""Benchmark: `hakiri diff` on a 6M-row TPC-H-like table against its loaded target (issue 33).

    .venv/bin/python bench/diff.py [--rows 6000000] [--engine sail] [--pg-url URL]

One throwaway PostgreSQL (the suite's) unless --pg-url. `lineitem` (TPC-H's columns,
generated in SQL: keys, numerics, dates, flags, text) is created in schema `bench_diff`
and loaded by `hakiri apply` (upsert on `l_orderkey, l_linenumber`) into `lineitem_copy`.
Then, for 0, 1 and 1,000 differences planted in the target (a third updated, a third
deleted, a third inserted):

- `hakiri diff` (both sides summed in PostgreSQL): wall time, what it reports, and what
  crossed from the server to hakiri (rows, segment sums, bytes, queries);
- the naive comparison it replaces: every row of both tables streamed to the client
  (COPY ... TO STDOUT, binary) and compared there by key and row hash: wall time, rows and
  bytes moved.

Every run checks that diff reported exactly the planted keys.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO)]  # this tree's hakiri, and tests.support

import psycopg  # noqa: E402
from tests.support.postgres import TestPostgres  # noqa: E402

SCHEMA = "bench_diff"
LINEITEM = f"""
CREATE TABLE {SCHEMA}.lineitem (
    l_orderkey bigint, l_linenumber integer, l_partkey bigint, l_suppkey bigint,
    l_quantity numeric(15,2), l_extendedprice numeric(15,2), l_discount numeric(15,2),
    l_tax numeric(15,2), l_returnflag text, l_linestatus text, l_shipdate date,
    l_commitdate date, l_receiptdate date, l_shipinstruct text, l_shipmode text,
    l_comment text, PRIMARY KEY (l_orderkey, l_linenumber))
"""
FILL = f"""
INSERT INTO {SCHEMA}.lineitem
SELECT g / 4 + 1, g % 4 + 1, (g * 7919) % 200000, (g * 104729) % 10000,
       (g % 50) + 1, ((g % 50) + 1) * ((g % 9973) / 10.0 + 900), (g % 11) / 100.0,
       (g % 9) / 100.0, (ARRAY['A','N','R'])[g % 3 + 1], (ARRAY['F','O'])[g % 2 + 1],
       date '1992-01-01' + (g % 2400)::int, date '1992-01-31' + (g % 2400)::int,
       date '1992-02-15' + (g % 2400)::int,
       (ARRAY['DELIVER IN PERSON','COLLECT COD','NONE','TAKE BACK RETURN'])[g % 4 + 1],
       (ARRAY['TRUCK','MAIL','SHIP','AIR','RAIL','FOB','REG AIR'])[g % 7 + 1],
       md5(g::text)
FROM generate_series(0::bigint, {{rows}} - 1) g
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=6_000_000)
    parser.add_argument("--engine", default="sail", help="the engine hakiri loads with")
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: a throwaway one)")
    args = parser.parse_args()
    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url
    try:
        with tempfile.TemporaryDirectory(prefix="hakiri-bench-diff-") as folder:
            root = Path(folder)
            _project(root, url, args.engine)
            started = time.monotonic()
            with psycopg.connect(url, autocommit=True) as conn:
                conn.execute(f"DROP SCHEMA IF EXISTS {SCHEMA} CASCADE")
                conn.execute(f"CREATE SCHEMA {SCHEMA}")
                conn.execute(LINEITEM)
                conn.execute(FILL.format(rows=int(args.rows)))
                conn.execute(f"ANALYZE {SCHEMA}.lineitem")
            print(f"generated {args.rows:,} rows in {time.monotonic() - started:.1f} s")
            started = time.monotonic()
            _hakiri(root, args.engine, "apply")
            print(f"hakiri apply ({args.engine}) loaded them in {time.monotonic() - started:.1f} s")
            size = _table_bytes(url)
            print(f"target: {size / 1e6:,.0f} MB\n")
            print(
                "| planted | diff s | found (src/tgt/changed) | rows moved | sums moved | "
                "MB moved | queries | naive s | naive rows moved | naive MB moved |"
            )
            print("|---|---|---|---|---|---|---|---|---|---|")
            for planted in (0, 1, 1_000):
                expected = _plant(url, planted, args.rows)
                report, seconds = _diff(root, args.engine)
                found = (
                    report["only_in_source"],
                    report["only_in_target"],
                    report["changed"],
                )
                if found != expected:
                    raise SystemExit(f"{planted} planted: expected {expected}, diff found {found}")
                moved = report["moved"]
                rows = moved["source_rows"] + moved["target_rows"]
                sums = moved["source_segments"] + moved["target_segments"]
                mb = (moved["source_bytes"] + moved["target_bytes"]) / 1e6
                queries = moved["source_queries"] + moved["target_queries"]
                naive_s, naive_rows, naive_bytes, naive_found = _naive(url)
                if naive_found != expected:
                    raise SystemExit(f"naive: expected {expected}, found {naive_found}")
                print(
                    f"| {planted:,} | {seconds:.1f} | {'/'.join(map(str, found))} | {rows:,} | "
                    f"{sums:,} | {mb:.2f} | {queries} | {naive_s:.1f} | {naive_rows:,} | "
                    f"{naive_bytes / 1e6:,.0f} |",
                    flush=True,
                )
    finally:
        if server is not None:
            server.stop()


def _project(root: Path, url: str, engine: str) -> None:
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "bench-diff"

        [spark]
        engine = "{engine}"

        [connections.wh]
        type = "postgres"
        url = "{url}"

        [[pipeline]]
        id = "lineitem"
        source = {{ connector = "postgres", config = {{ connection = "wh", schema = "{SCHEMA}" }} }}
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{SCHEMA}" }} }}
        tables = [{{ name = "lineitem", target = "lineitem_copy" }}]
        load = {{ mode = "upsert", upsert_key = ["l_orderkey", "l_linenumber"] }}
        """)
    )


def _hakiri(root: Path, engine: str, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HAKIRI_SPARK_ENGINE": engine}
    command = [sys.executable, "-m", "hakiri.cli.main", *args, "--project", str(root)]
    done = subprocess.run(command, capture_output=True, text=True, env=env)
    if done.returncode not in (0, 2):
        raise SystemExit(f"hakiri {' '.join(args)} failed:\n{done.stderr[-3000:]}")
    return done


def _diff(root: Path, engine: str) -> tuple[dict, float]:
    started = time.monotonic()
    done = _hakiri(root, engine, "diff", "lineitem", "--json")
    seconds = time.monotonic() - started
    [table] = json.loads(done.stdout)["tables"]
    return table, seconds


def _plant(url: str, planted: int, rows: int) -> tuple[int, int, int]:
    """Undo the previous step's differences, then plant `planted` new ones in the target:
    (rows only in the source, only in the target, changed) that diff must report."""
    target = f"{SCHEMA}.lineitem_copy"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"DELETE FROM {target} WHERE l_linenumber > 4")
        conn.execute(
            f"INSERT INTO {target} SELECT * FROM {SCHEMA}.lineitem s WHERE NOT EXISTS "
            f"(SELECT 1 FROM {target} t WHERE (t.l_orderkey, t.l_linenumber) = "
            "(s.l_orderkey, s.l_linenumber))"
        )
        conn.execute(
            f"UPDATE {target} t SET l_comment = s.l_comment FROM {SCHEMA}.lineitem s "
            "WHERE (t.l_orderkey, t.l_linenumber) = (s.l_orderkey, s.l_linenumber) "
            "AND t.l_comment IS DISTINCT FROM s.l_comment"
        )
        if planted == 0:
            return (0, 0, 0)
        if planted == 1:
            conn.execute(f"UPDATE {target} SET l_comment = 'edited' WHERE l_orderkey = 777")
            return (0, 0, 4)  # order 777 has four lines
        third = planted // 3
        updated = planted - 2 * third
        step = max(1, (rows // 4) // (updated + 1))  # orders spread over the whole table
        conn.execute(
            f"UPDATE {target} SET l_comment = 'edited' WHERE l_linenumber = 1 "
            f"AND l_orderkey IN (SELECT 1 + g * {step} FROM generate_series(0, {updated - 1}) g)"
        )
        conn.execute(
            f"DELETE FROM {target} WHERE l_linenumber = 2 "
            f"AND l_orderkey IN (SELECT 1 + g * {step} FROM generate_series(0, {third - 1}) g)"
        )
        conn.execute(
            f"INSERT INTO {target} (l_orderkey, l_linenumber, l_comment) "
            f"SELECT 1 + g * {step}, 9, 'new' FROM generate_series(0, {third - 1}) g"
        )
        return (third, third, updated)


def _table_bytes(url: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT pg_total_relation_size('{SCHEMA}.lineitem_copy')").fetchone()
    return int(row[0]) if row else 0


def _naive(url: str) -> tuple[float, int, int, tuple[int, int, int]]:
    """Every row of both tables to the client, compared there by key and row hash."""
    started = time.monotonic()
    sides, rows, size = [], 0, 0
    with psycopg.connect(url) as conn:
        for table in ("lineitem", "lineitem_copy"):
            hashes: dict[tuple[bytes, bytes], str] = {}
            with conn.cursor().copy(f"COPY {SCHEMA}.{table} TO STDOUT") as copy:
                for line in _lines(copy):
                    size += len(line)
                    rows += 1
                    fields = line.split(b"\t", 2)
                    hashes[(fields[0], fields[1])] = hashlib.md5(line).hexdigest()
            sides.append(hashes)
    ours, theirs = sides
    found = (
        len(ours.keys() - theirs.keys()),
        len(theirs.keys() - ours.keys()),
        sum(1 for k in ours.keys() & theirs.keys() if ours[k] != theirs[k]),
    )
    return time.monotonic() - started, rows, size, found


def _lines(copy: psycopg.Copy) -> Iterator[bytes]:
    """The COPY text stream split into lines (one per row)."""
    rest = b""
    for chunk in copy:
        data = rest + bytes(chunk)
        *lines, rest = data.split(b"\n")
        yield from lines
    if rest:
        yield rest


if __name__ == "__main__":
    main()
