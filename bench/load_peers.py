"""Benchmark: loading TPC-H lineitem from CSV with hakiri and with its peers, side by side (issue 16).

Run by hand (at scale 0.2 with 3 repetitions, expect a quarter of an hour on 2 cores):

    .venv/bin/python bench/load_peers.py [--scale 0.2] [--repeat 3] [--paths psql,dlt,...]
        [--pg-url URL] [--baseline REV] [--hakiri-python PYTHON] [--json FILE]

One CSV file, `lineitem.csv` from `tpchgen-cli csv -s SCALE --tables lineitem`
(a header line, comma-delimited, text quoted; 1.2M rows at scale 0.2, 6M at 1),
generated once into bench/.data/tpch-s<SCALE>/ and reused. Every path loads all of it:

PostgreSQL (ratios to `psql \\copy`):
- psql: `psql -c "\\copy ... (FORMAT csv, HEADER)"` into a typed table.
- dlt: dlt, pyarrow reads the CSV (typed), parquet files loaded through ADBC
  (checked in dlt's log after every run), write_disposition="replace".
- sling: `sling run --src-stream file://CSV --tgt-conn PG --mode full-refresh`.
- hakiri-truncate: `hakiri apply`, load mode truncate, into a typed table.
- hand-upsert: one psql transaction: `\\copy` into an UNLOGGED staging table, then
  `INSERT ... ON CONFLICT (l_orderkey, l_linenumber) DO UPDATE SET <every other column>`.
- dlt-merge: dlt, write_disposition merge (delete-insert) on the same key.
- hakiri-upsert: `hakiri apply`, load mode upsert on the same key.
- hakiri-blue-green: `hakiri apply`, load mode blue_green, replacing a full typed
  table (with the primary key) by a new one.

The Delta context store (ratios to deltars-direct):
- hakiri-context: `hakiri apply`, load mode truncate, into the context store.
- deltars-direct: `pyarrow.csv.open_csv` streamed into `deltalake.write_deltalake(...,
  mode="overwrite")` (delta-rs), a fresh table each run.

The typed table (bigint keys, integer l_linenumber, numeric(15,2) quantity and
money, date dates, text otherwise; PRIMARY KEY (l_orderkey, l_linenumber) only on the
upsert targets, which need it) is created by the script for psql, hand-upsert and both
hakiri targets; dlt and Sling create their own tables (dlt from the arrow types, Sling
from its own inference; no key on either) and are verified the same way. The upsert paths start from
a full table (loaded untimed: psql `\\copy` for hand-upsert and hakiri-upsert, a first
dlt merge for dlt-merge, then VACUUM ANALYZE), so every row is updated.

Each run is a whole process timed from start to exit (interpreter, JVM and
SparkSession start included). Before it, untimed: the target is truncated or
dropped (dlt, Sling: their dataset or table; delta-rs: the table directory),
upsert targets are refilled, hakiri gets a fresh project directory (its catalog
remembers loaded files) and its ledger rows for the target are deleted. The paths
alternate within each of --repeat repetitions; the median is reported. After every
run (and every untimed refill) the target is checked against figures computed once
from the CSV with pyarrow: row count, count of distinct (l_orderkey, l_linenumber),
and the sums of l_orderkey*10+l_linenumber, l_quantity, l_extendedprice, the days
of l_shipdate and the characters of l_comment. An upsert must also have rewritten
every row (no row keeps the xmin of the refill). Any mismatch stops the run.

The peer tools live in bench/.peers-venv, created from bench/peers-requirements.txt
when missing. hakiri runs as `PYTHON -m hakiri.cli.main apply --project DIR` with
PYTHONPATH=<repo>/src; --baseline REV adds a second hakiri variant from a git
worktree of REV at bench/.baseline-<sha> (same interpreter, PYTHONPATH=<worktree>/src),
so before and after are timed in the same run.

Without --pg-url it starts a throwaway PostgreSQL (tests.support.postgres, the
test suite's server: fsync off) and stops it afterwards. With --pg-url it uses the
schemas bench_peers, bench_dlt_replace, bench_dlt_merge and bench_sling (dropped
at the start and the end). dlt needs a password in the URL: a URL without one
gets a dummy password for dlt (what a trust-authenticated server, like the
throwaway one, ignores). Sling needs an sslmode: a loopback URL without one gets
sslmode=disable for Sling.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from decimal import Decimal
from pathlib import Path
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import psycopg
import pyarrow as pa
import pyarrow.compute as pc
from psycopg import sql
from pyarrow import csv as pa_csv

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
DATA_DIR = BENCH / ".data"
PEERS_VENV = BENCH / ".peers-venv"
PEERS_REQUIREMENTS = BENCH / "peers-requirements.txt"

# name, PostgreSQL type, Spark SQL type (hakiri's `columns`), pyarrow type (factory, args)
COLUMNS: tuple[tuple[str, str, str, tuple[Any, ...]], ...] = (
    ("l_orderkey", "bigint", "bigint", ("int64",)),
    ("l_partkey", "bigint", "bigint", ("int64",)),
    ("l_suppkey", "bigint", "bigint", ("int64",)),
    ("l_linenumber", "integer", "int", ("int32",)),
    ("l_quantity", "numeric(15,2)", "decimal(15,2)", ("decimal128", 15, 2)),
    ("l_extendedprice", "numeric(15,2)", "decimal(15,2)", ("decimal128", 15, 2)),
    ("l_discount", "numeric(15,2)", "decimal(15,2)", ("decimal128", 15, 2)),
    ("l_tax", "numeric(15,2)", "decimal(15,2)", ("decimal128", 15, 2)),
    ("l_returnflag", "text", "string", ("string",)),
    ("l_linestatus", "text", "string", ("string",)),
    ("l_shipdate", "date", "date", ("date32",)),
    ("l_commitdate", "date", "date", ("date32",)),
    ("l_receiptdate", "date", "date", ("date32",)),
    ("l_shipinstruct", "text", "string", ("string",)),
    ("l_shipmode", "text", "string", ("string",)),
    ("l_comment", "text", "string", ("string",)),
)
NAMES = [c[0] for c in COLUMNS]
KEY = ("l_orderkey", "l_linenumber")
UPDATED = [n for n in NAMES if n not in KEY]

SCHEMA = "bench_peers"  # the typed tables
DLT_DATASETS = {"replace": "bench_dlt_replace", "merge": "bench_dlt_merge"}
SLING_SCHEMA = "bench_sling"
BENCH_SCHEMAS = (
    SCHEMA,
    *DLT_DATASETS.values(),
    *(f"{d}_staging" for d in DLT_DATASETS.values()),
    SLING_SCHEMA,
)

PG_PATHS = (
    "psql",
    "dlt",
    "sling",
    "hakiri-truncate",
    "hand-upsert",
    "dlt-merge",
    "hakiri-upsert",
    "hakiri-blue-green",
)
CONTEXT_PATHS = ("hakiri-context", "deltars-direct")
ALL_PATHS = PG_PATHS + CONTEXT_PATHS
HAKIRI_PATHS = ("hakiri-truncate", "hakiri-upsert", "hakiri-blue-green", "hakiri-context")
PEER_PATHS = ("dlt", "sling", "dlt-merge", "deltars-direct")
BASE = {"postgres": "psql", "context": "deltars-direct"}

STAT_SQL = """
SELECT count(*),
       count(DISTINCT (l_orderkey::bigint, l_linenumber::bigint)),
       sum(l_orderkey::bigint * 10 + l_linenumber::bigint),
       sum(l_quantity::numeric(15,2)),
       sum(l_extendedprice::numeric(15,2)),
       sum(l_shipdate::date - DATE '1970-01-01'),
       sum(length(l_comment))
FROM {}
"""
STATS = (
    "rows",
    "distinct_keys",
    "key_sum",
    "quantity_sum",
    "extendedprice_sum",
    "shipdate_days_sum",
    "comment_chars",
)
DECIMAL_STATS = ("quantity_sum", "extendedprice_sum")

# Run in the peers venv. {types} becomes the dict of pyarrow types of COLUMNS.
DLT_SCRIPT = '''"""Written by bench/load_peers.py: lineitem.csv into PostgreSQL with dlt (parquet, ADBC)."""

import sys

import dlt
import pyarrow as pa
from pyarrow import csv

csv_path, url, dataset, disposition, pipelines_dir = sys.argv[1:6]
TYPES = {types}

if disposition == "merge":
    hints = {{
        "write_disposition": {{"disposition": "merge", "strategy": "delete-insert"}},
        "primary_key": ["l_orderkey", "l_linenumber"],
    }}
else:
    hints = {{"write_disposition": "replace"}}


@dlt.resource(name="lineitem", **hints)
def lineitem():
    yield from csv.open_csv(csv_path, convert_options=csv.ConvertOptions(column_types=TYPES))


pipeline = dlt.pipeline(
    pipeline_name=f"bench_{{dataset}}",
    destination=dlt.destinations.postgres(credentials=url),
    dataset_name=dataset,
    pipelines_dir=pipelines_dir,
)
info = pipeline.run(lineitem(), loader_file_format="parquet")
info.raise_on_failed_jobs()
formats = sorted(
    {{
        job.job_file_info.file_format
        for package in info.load_packages
        for job in package.jobs["completed_jobs"]
        if job.job_file_info.table_name == "lineitem"
    }}
)
print("lineitem load jobs:", ", ".join(formats))
'''

DELTARS_SCRIPT = '''"""Written by bench/load_peers.py: lineitem.csv streamed into a Delta table with delta-rs."""

import sys

import pyarrow as pa
from deltalake import write_deltalake
from pyarrow import csv

csv_path, target = sys.argv[1:3]
TYPES = {types}

reader = csv.open_csv(csv_path, convert_options=csv.ConvertOptions(column_types=TYPES))
write_deltalake(target, reader, mode="overwrite")
'''

# dlt's ADBC job logs "<n> rows copied from <file>.parquet to <table>.<schema> in <s> s".
ADBC_COPIED = re.compile(r"(\d+) rows copied from lineitem\.\S+\.parquet to lineitem\.")


class BenchError(SystemExit):
    """Stops the benchmark with a message (a failed run, a mismatch, a missing tool)."""


# ----------------------------------------------------------------------------- setup


def arrow_type(spec: tuple[Any, ...]) -> pa.DataType:
    factory, *args = spec
    return getattr(pa, factory)(*args)


def arrow_types_source() -> str:
    """COLUMNS' pyarrow types as Python source, for the scripts run in the peers venv."""
    items = []
    for name, _, _, (factory, *args) in COLUMNS:
        items.append(f'"{name}": pa.{factory}({", ".join(str(a) for a in args)})')
    return "{\n    " + ",\n    ".join(items) + ",\n}"


def run_checked(argv: list[str], what: str, **kwargs: Any) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(argv, capture_output=True, text=True, **kwargs)
    if done.returncode != 0:
        raise BenchError(f"{what} failed (exit {done.returncode}):\n{tail(done)}")
    return done


def tail(done: subprocess.CompletedProcess[str], lines: int = 40) -> str:
    parts = []
    for name, text in (("stdout", done.stdout), ("stderr", done.stderr)):
        kept = (text or "").rstrip().splitlines()[-lines:]
        if kept:
            parts.append(f"--- {name} (last {len(kept)} lines) ---\n" + "\n".join(kept))
    return "\n".join(parts) or "(no output)"


@dataclass
class Peers:
    """The bench-only virtualenv with dlt, ADBC, Sling, tpchgen-cli, pyarrow and deltalake."""

    root: Path

    @property
    def python(self) -> str:
        return str(self.root / "bin" / "python")

    @property
    def tpchgen(self) -> str:
        return str(self.root / "bin" / "tpchgen-cli")

    def sling(self) -> str:
        # The `sling` wrapper would download its binary; the wheel sling-linux-amd64 has it.
        found = sorted(
            self.root.glob("lib/python*/site-packages/sling_linux_amd64/bin/sling-linux-amd64")
        )
        if not found:
            raise BenchError(f"no sling-linux-amd64 binary under {self.root}/lib")
        return str(found[0])

    def versions(self) -> dict[str, str]:
        names = ["dlt", "adbc-driver-postgresql", "sling-linux-amd64", "deltalake", "pyarrow"]
        code = (
            "import json, sys; from importlib.metadata import version; "
            "print(json.dumps({n: version(n) for n in sys.argv[1:]}))"
        )
        done = run_checked([self.python, "-c", code, *names], "reading the peer tools' versions")
        return json.loads(done.stdout)


def ensure_peers() -> Peers:
    """bench/.peers-venv with bench/peers-requirements.txt installed (created or updated when needed)."""
    peers = Peers(PEERS_VENV)
    digest = hashlib.sha256(PEERS_REQUIREMENTS.read_bytes()).hexdigest()
    marker = PEERS_VENV / ".requirements.sha256"
    if marker.exists() and marker.read_text().strip() == digest:
        return peers
    if not (PEERS_VENV / "bin" / "python").exists():
        print(f"creating {PEERS_VENV.relative_to(REPO)} ...", flush=True)
        run_checked([sys.executable, "-m", "venv", str(PEERS_VENV)], "python -m venv")
    print(f"installing {PEERS_REQUIREMENTS.relative_to(REPO)} into it ...", flush=True)
    run_checked(
        [peers.python, "-m", "pip", "install", "-q", "-r", str(PEERS_REQUIREMENTS)],
        "pip install -r bench/peers-requirements.txt",
    )
    marker.write_text(digest + "\n")
    return peers


def tpch_csv(scale: float, peers: Callable[[], Peers]) -> Path:
    """bench/.data/tpch-s<scale>/lineitem.csv, generated by tpchgen-cli once."""
    folder = DATA_DIR / f"tpch-s{scale:g}"
    csv_file = folder / "lineitem.csv"
    if not csv_file.exists():
        tpchgen = peers().tpchgen
        print(f"generating TPC-H lineitem at scale {scale:g} into {folder} ...", flush=True)
        staging = folder.with_name(folder.name + ".partial")
        shutil.rmtree(staging, ignore_errors=True)
        staging.mkdir(parents=True)
        run_checked(
            [
                *(tpchgen, "csv", "-s", f"{scale:g}", "--tables", "lineitem"),
                *("--output-dir", str(staging), "--no-progress"),
            ],
            "tpchgen-cli",
        )
        if not (staging / "lineitem.csv").exists():
            listed = sorted(str(p.relative_to(staging)) for p in staging.rglob("*"))
            raise BenchError(f"tpchgen-cli wrote no lineitem.csv into {staging}: {listed}")
        shutil.rmtree(folder, ignore_errors=True)
        staging.rename(folder)
    with csv_file.open() as lines:
        header = lines.readline().rstrip("\r\n")
    if header != ",".join(NAMES):
        raise BenchError(
            f"{csv_file}: expected the header line {','.join(NAMES)!r}, found {header!r}"
        )
    return csv_file


def expected_stats(csv_file: Path) -> dict[str, Any]:
    """The figures every target is checked against, from the CSV (cached beside it)."""
    cache = csv_file.with_name("expected.json")
    state = csv_file.stat()
    identity = {"csv_size": state.st_size, "csv_mtime_ns": state.st_mtime_ns}
    if cache.exists():
        cached = json.loads(cache.read_text())
        if {k: cached.get(k) for k in identity} == identity:
            return decode_stats(cached["stats"])
    print(f"computing the expected figures from {csv_file.name} with pyarrow ...", flush=True)
    types = {name: arrow_type(spec) for name, _, _, spec in COLUMNS}
    reader = pa_csv.open_csv(csv_file, convert_options=pa_csv.ConvertOptions(column_types=types))
    stats = arrow_stats(reader)
    cache.write_text(json.dumps({**identity, "stats": encode_stats(stats)}, indent=2) + "\n")
    return stats


def arrow_stats(batches: Iterable[pa.RecordBatch]) -> dict[str, Any]:
    """STAT_SQL's figures over arrow record batches (the CSV, or a Delta table)."""
    rows = key_sum = days = chars = 0
    quantity = price = Decimal(0)
    keys = []
    wide = pa.decimal128(38, 2)
    for batch in batches:
        if batch.num_rows == 0:
            continue
        column = batch.column
        key = pc.add(
            pc.multiply(column("l_orderkey").cast(pa.int64()), 10),
            column("l_linenumber").cast(pa.int64()),
        )
        keys.append(key)
        rows += batch.num_rows
        key_sum += pc.sum(key).as_py() or 0
        quantity += pc.sum(column("l_quantity").cast(wide)).as_py() or 0
        price += pc.sum(column("l_extendedprice").cast(wide)).as_py() or 0
        shipdate = column("l_shipdate").cast(pa.date32()).cast(pa.int32()).cast(pa.int64())
        days += pc.sum(shipdate).as_py() or 0
        chars += pc.sum(pc.utf8_length(column("l_comment").cast(pa.large_string()))).as_py() or 0
    distinct = pc.count_distinct(pa.chunked_array(keys, pa.int64())).as_py() if keys else 0
    return {
        "rows": rows,
        "distinct_keys": distinct,
        "key_sum": key_sum,
        "quantity_sum": quantity,
        "extendedprice_sum": price,
        "shipdate_days_sum": days,
        "comment_chars": chars,
    }


def encode_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: str(v) if k in DECIMAL_STATS else v for k, v in stats.items()}


def decode_stats(stats: dict[str, Any]) -> dict[str, Any]:
    return {k: Decimal(v) if k in DECIMAL_STATS else v for k, v in stats.items()}


def compare(expected: dict[str, Any], got: dict[str, Any], where: str) -> None:
    wrong = [
        f"{k}: expected {expected[k]}, got {got.get(k)}"
        for k in STATS
        if got.get(k) is None or Decimal(got[k]) != Decimal(expected[k])
    ]
    if wrong:
        raise BenchError(f"{where} does not hold the CSV's rows:\n  " + "\n  ".join(wrong))


# ------------------------------------------------------------------------ PostgreSQL


def connect(url: str) -> psycopg.Connection[Any]:
    return psycopg.connect(url, autocommit=True)


def qualified(schema: str, table: str) -> sql.Composed:
    return sql.Identifier(schema, table)  # type: ignore[return-value]


def pg_stats(url: str, schema: str, table: str) -> dict[str, Any]:
    with connect(url) as conn:
        conn.execute("SET work_mem = '512MB'")  # count(DISTINCT ...) sorts in memory at scale 1
        row = conn.execute(sql.SQL(STAT_SQL).format(qualified(schema, table))).fetchone()
    assert row is not None
    return dict(zip(STATS, row, strict=True))


def verify_pg(bench: Bench, schema: str, table: str, where: str) -> None:
    compare(bench.expected, pg_stats(bench.url, schema, table), f"{where}: {schema}.{table}")


def xmins(url: str, schema: str, table: str) -> list[str]:
    """The transaction ids that wrote the table's rows (one after a refill)."""
    with connect(url) as conn:
        rows = conn.execute(
            sql.SQL("SELECT DISTINCT xmin::text FROM {}").format(qualified(schema, table))
        ).fetchall()
    return [r[0] for r in rows]


def verify_rewritten(url: str, schema: str, table: str, before: list[str], where: str) -> None:
    """Every row of an upserted table was written by the upsert, none kept from the refill."""
    with connect(url) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*) FROM {} WHERE xmin::text = ANY(%s)").format(
                qualified(schema, table)
            ),
            (before,),
        ).fetchone()
    assert row is not None
    if row[0]:
        raise BenchError(
            f"{where}: {row[0]:,} rows of {schema}.{table} were not rewritten by the upsert "
            f"(they still carry the refill's xmin {', '.join(before)})"
        )


def create_typed_table(url: str, table: str, *, keyed: bool) -> None:
    """The typed lineitem table; with the primary key the upserts need, or (replace paths)
    without one, as the tables dlt and Sling create have none."""
    columns = [sql.SQL("{} {}").format(sql.Identifier(n), sql.SQL(t)) for n, t, _, _ in COLUMNS]
    if keyed:
        columns.append(
            sql.SQL("PRIMARY KEY ({})").format(sql.SQL(", ").join(map(sql.Identifier, KEY)))
        )
    with connect(url) as conn:
        conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(qualified(SCHEMA, table)))
        conn.execute(
            sql.SQL("CREATE TABLE {} ({})").format(
                qualified(SCHEMA, table), sql.SQL(", ").join(columns)
            )
        )


def reset_schemas(url: str, create: bool) -> None:
    with connect(url) as conn:
        for schema in BENCH_SCHEMAS:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
        if conn.execute("SELECT to_regclass('_hakiri.load_ledger') IS NOT NULL").fetchone()[0]:  # type: ignore[index]
            conn.execute("DELETE FROM _hakiri.load_ledger WHERE target_schema = %s", (SCHEMA,))
        if create:
            for schema in (SCHEMA, SLING_SCHEMA):
                conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def forget_hakiri_loads(url: str, table: str) -> None:
    """Delete the ledger rows of `table`, so hakiri loads the same file into it again."""
    with connect(url) as conn:
        if conn.execute("SELECT to_regclass('_hakiri.load_ledger') IS NOT NULL").fetchone()[0]:  # type: ignore[index]
            conn.execute(
                "DELETE FROM _hakiri.load_ledger WHERE target_schema = %s AND target_table = %s",
                (SCHEMA, table),
            )


def psql_argv(url: str, *args: str) -> list[str]:
    return [shutil.which("psql") or "psql", url, "-X", "-q", "-v", "ON_ERROR_STOP=1", *args]


def copy_command(table: str, csv_file: Path) -> str:
    return f"\\copy {SCHEMA}.{table} FROM '{csv_file}' WITH (FORMAT csv, HEADER true)"


def with_password(url: str) -> str:
    """dlt refuses a URL without a password; a trust-authenticated server ignores this one."""
    parts = urlsplit(url)
    if parts.password is not None or "@" not in parts.netloc:
        return url
    user, host = parts.netloc.rsplit("@", 1)
    return urlunsplit(parts._replace(netloc=f"{user}:bench@{host}"))


def with_sslmode(url: str) -> str:
    """Sling's driver does not fall back to plain connections: name sslmode for loopback servers."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    if "sslmode" in query or parts.hostname not in ("127.0.0.1", "localhost", "::1"):
        return url
    return urlunsplit(parts._replace(query=urlencode({**query, "sslmode": "disable"})))


# ----------------------------------------------------------------------------- paths


@dataclass
class Command:
    argv: list[str]
    env: dict[str, str] | None = None
    cwd: Path | None = None


@dataclass
class HakiriVariant:
    suffix: str  # appended to path names: "" or "@<sha>"
    note: str  # appended to labels
    python: str
    src: Path
    table_suffix: str
    # Where its Spark runs: "driver" (a JVM in the command, the only choice before issue 28),
    # "warm" (hakiri's local Spark Connect server, started untimed before the run) or "cold"
    # (that server, stopped untimed before the run, so the run starts it), or "sail" (Sail's
    # Spark Connect server inside the hakiri process, HAKIRI_SPARK_ENGINE=sail).
    engine: str = "driver"


@dataclass
class Bench:
    url: str  # "" when no PostgreSQL path runs
    csv: Path
    expected: dict[str, Any]
    work: Path
    master: str
    peers: Peers | None
    counter: int = 0

    def fresh_dir(self, name: str) -> Path:
        self.counter += 1
        path = self.work / f"{self.counter:03d}-{name.replace('@', '-')}"
        path.mkdir(parents=True)
        return path

    def need_peers(self) -> Peers:
        assert self.peers is not None
        return self.peers


@dataclass
class LoadPath:
    name: str
    label: str
    group: str  # "postgres" or "context"
    bench: Bench
    times: list[float] = field(default_factory=list)
    # Peak resident memory of each run's process tree as the kernel counts it for the waited
    # process (ru_maxrss of the process and the children it waited for), in MiB. A warm local
    # Spark Connect server is not a child of the run: its JVM is not in this number.
    peaks: list[float] = field(default_factory=list)

    def prepare(self) -> Command:
        """Untimed: reset (or refill) the target and return the command to time."""
        raise NotImplementedError

    def check_output(self, done: subprocess.CompletedProcess[str], where: str) -> None:
        """Checks on the timed process' output (dlt: did it load through ADBC)."""

    def verify(self, where: str) -> None:
        raise NotImplementedError

    def cleanup(self) -> None:
        """Untimed, after verify: remove what the run left in the work directory."""


class PsqlCopy(LoadPath):
    table = "lineitem_psql"

    def prepare(self) -> Command:
        with connect(self.bench.url) as conn:
            conn.execute(sql.SQL("TRUNCATE {}").format(qualified(SCHEMA, self.table)))
        return Command(psql_argv(self.bench.url, "-c", copy_command(self.table, self.bench.csv)))

    def verify(self, where: str) -> None:
        verify_pg(self.bench, SCHEMA, self.table, where)


def refill(bench: Bench, table: str, where: str) -> list[str]:
    """Untimed: the typed table holds every row of the CSV, written by one transaction."""
    with connect(bench.url) as conn:
        conn.execute(sql.SQL("TRUNCATE {}").format(qualified(SCHEMA, table)))
    run_checked(psql_argv(bench.url, "-c", copy_command(table, bench.csv)), f"refilling {table}")
    with connect(bench.url) as conn:
        conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(qualified(SCHEMA, table)))
    verify_pg(bench, SCHEMA, table, f"{where} (refill)")
    return xmins(bench.url, SCHEMA, table)


class HandUpsert(LoadPath):
    table = "lineitem_hand_upsert"
    stage = "lineitem_hand_stage"
    before: list[str]

    def prepare(self) -> Command:
        with connect(self.bench.url) as conn:
            conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(qualified(SCHEMA, self.stage)))
        self.before = refill(self.bench, self.table, self.name)
        target, stage = f"{SCHEMA}.{self.table}", f"{SCHEMA}.{self.stage}"
        updates = ", ".join(f"{n} = EXCLUDED.{n}" for n in UPDATED)
        script = self.bench.work / "hand_upsert.sql"
        script.write_text(
            "BEGIN;\n"
            f"CREATE UNLOGGED TABLE {stage} (LIKE {target} INCLUDING DEFAULTS);\n"
            f"{copy_command(self.stage, self.bench.csv)}\n"
            f"INSERT INTO {target} SELECT * FROM {stage}\n"
            f"  ON CONFLICT ({', '.join(KEY)}) DO UPDATE SET {updates};\n"
            f"DROP TABLE {stage};\n"
            "COMMIT;\n"
        )
        return Command(psql_argv(self.bench.url, "-f", str(script)))

    def verify(self, where: str) -> None:
        verify_pg(self.bench, SCHEMA, self.table, where)
        verify_rewritten(self.bench.url, SCHEMA, self.table, self.before, where)


class DltLoad(LoadPath):
    disposition = "replace"
    pipelines_dir: Path

    @property
    def dataset(self) -> str:
        return DLT_DATASETS[self.disposition]

    def script(self) -> Path:
        path = self.bench.work / "dlt_load.py"
        if not path.exists():
            path.write_text(DLT_SCRIPT.format(types=arrow_types_source()))
        return path

    def command(self) -> Command:
        peers = self.bench.need_peers()
        env = {
            **os.environ,
            "RUNTIME__DLTHUB_TELEMETRY": "false",  # no anonymous usage events
            "RUNTIME__LOG_LEVEL": "INFO",  # the ADBC job logs what it copied
            "DLT_DATA_DIR": str(self.pipelines_dir),
        }
        argv = [peers.python, str(self.script()), str(self.bench.csv)]
        argv += [with_password(self.bench.url), self.dataset, self.disposition]
        argv.append(str(self.pipelines_dir / "pipelines"))
        return Command(argv, env, cwd=self.pipelines_dir)

    def drop_dataset(self) -> None:
        with connect(self.bench.url) as conn:
            for schema in (self.dataset, f"{self.dataset}_staging"):
                conn.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )

    def prepare(self) -> Command:
        self.drop_dataset()
        self.pipelines_dir = self.bench.fresh_dir(self.name)
        return self.command()

    def check_output(self, done: subprocess.CompletedProcess[str], where: str) -> None:
        output = done.stdout + done.stderr
        copied = sum(int(n) for n in ADBC_COPIED.findall(output))
        if copied != self.bench.expected["rows"]:
            raise BenchError(
                f"{where}: dlt's log does not show the {self.bench.expected['rows']:,} rows "
                f"copied through ADBC (found {copied:,}):\n{tail(done)}"
            )

    def verify(self, where: str) -> None:
        verify_pg(self.bench, self.dataset, "lineitem", where)

    def cleanup(self) -> None:
        shutil.rmtree(self.pipelines_dir, ignore_errors=True)


class DltMerge(DltLoad):
    disposition = "merge"
    before: list[str]

    def prepare(self) -> Command:
        command = super().prepare()
        done = subprocess.run(
            command.argv, env=command.env, cwd=command.cwd, capture_output=True, text=True
        )
        if done.returncode != 0:
            raise BenchError(f"{self.name}: the untimed first merge failed:\n{tail(done)}")
        where = f"{self.name} (refill)"
        self.check_output(done, where)
        verify_pg(self.bench, self.dataset, "lineitem", where)
        with connect(self.bench.url) as conn:
            conn.execute(sql.SQL("VACUUM (ANALYZE) {}").format(qualified(self.dataset, "lineitem")))
        self.before = xmins(self.bench.url, self.dataset, "lineitem")
        return command

    def verify(self, where: str) -> None:
        super().verify(where)
        verify_rewritten(self.bench.url, self.dataset, "lineitem", self.before, where)


class SlingLoad(LoadPath):
    home: Path

    def prepare(self) -> Command:
        with connect(self.bench.url) as conn:
            for table in ("lineitem", "lineitem_tmp"):
                conn.execute(
                    sql.SQL("DROP TABLE IF EXISTS {}").format(qualified(SLING_SCHEMA, table))
                )
        self.home = self.bench.fresh_dir(self.name)
        env = {
            **os.environ,
            "PG": with_sslmode(self.bench.url),
            "SLING_HOME_DIR": str(self.home),
            "SLING_DISABLE_TELEMETRY": "true",
        }
        argv = [self.bench.need_peers().sling(), "run", "--src-stream", f"file://{self.bench.csv}"]
        argv += ["--tgt-conn", "PG", "--tgt-object", f"{SLING_SCHEMA}.lineitem"]
        argv += ["--mode", "full-refresh"]
        return Command(argv, env, cwd=self.home)

    def verify(self, where: str) -> None:
        verify_pg(self.bench, SLING_SCHEMA, "lineitem", where)

    def cleanup(self) -> None:
        shutil.rmtree(self.home, ignore_errors=True)


class HakiriLoad(LoadPath):
    """`hakiri apply` of a fresh project: truncate or upsert into PostgreSQL, or truncate into the context store."""

    mode: str
    variant: HakiriVariant
    project: Path
    before: list[str]

    @property
    def table(self) -> str:
        return f"lineitem_hakiri_{self.mode}{self.variant.table_suffix}"

    def prepare(self) -> Command:
        bench = self.bench
        if self.group == "postgres":
            if self.mode in ("upsert", "blue_green"):
                self.before = refill(bench, self.table, self.name)
            else:
                with connect(bench.url) as conn:
                    conn.execute(sql.SQL("TRUNCATE {}").format(qualified(SCHEMA, self.table)))
            forget_hakiri_loads(bench.url, self.table)
        self.project = bench.fresh_dir(self.name)
        write_hakiri_project(
            self.project,
            bench.csv,
            mode=self.mode,
            master=bench.master,
            url=bench.url if self.group == "postgres" else None,
            table=self.table if self.group == "postgres" else "lineitem",
        )
        env = {
            k: v
            for k, v in os.environ.items()
            if k not in ("HAKIRI_CATALOG_URL", "HAKIRI_SPARK_REMOTE", "HAKIRI_SPARK_ENGINE")
        }
        env["PYTHONPATH"] = str(self.variant.src)
        if self.variant.engine == "driver":
            env["HAKIRI_SPARK_REMOTE"] = "in-process"  # the baseline predates the variable
        elif self.variant.engine == "sail":
            env["HAKIRI_SPARK_ENGINE"] = "sail"
        else:
            env["HAKIRI_SPARK_REMOTE"] = "local"
            verb = "start" if self.variant.engine == "warm" else "stop"
            run_checked(
                [self.variant.python, "-m", "hakiri.cli.main", "engine", verb]
                + (["--project", str(self.project)] if verb == "start" else []),
                f"hakiri engine {verb}",
                env=env,
                cwd=self.project,
            )
        argv = [
            self.variant.python,
            "-m",
            "hakiri.cli.main",
            "apply",
            "--project",
            str(self.project),
        ]
        return Command(argv, env, cwd=self.project)

    def verify(self, where: str) -> None:
        if self.group == "postgres":
            verify_pg(self.bench, SCHEMA, self.table, where)
            if self.mode in ("upsert", "blue_green"):
                verify_rewritten(self.bench.url, SCHEMA, self.table, self.before, where)
        else:
            verify_delta(self.bench, self.project / ".hakiri" / "context" / "lineitem", where)

    def cleanup(self) -> None:
        shutil.rmtree(self.project, ignore_errors=True)


class DeltaRsDirect(LoadPath):
    target: Path

    def prepare(self) -> Command:
        script = self.bench.work / "deltars_load.py"
        if not script.exists():
            script.write_text(DELTARS_SCRIPT.format(types=arrow_types_source()))
        self.target = self.bench.work / "deltars" / "lineitem"
        shutil.rmtree(self.target, ignore_errors=True)
        self.target.parent.mkdir(exist_ok=True)
        argv = [self.bench.need_peers().python, str(script), str(self.bench.csv), str(self.target)]
        return Command(argv, cwd=self.bench.work)

    def verify(self, where: str) -> None:
        verify_delta(self.bench, self.target, where)


def verify_delta(bench: Bench, location: Path, where: str) -> None:
    from deltalake import DeltaTable

    if not (location / "_delta_log").is_dir():
        raise BenchError(f"{where}: there is no Delta table at {location}")
    batches = DeltaTable(str(location)).to_pyarrow_dataset().to_batches()
    compare(bench.expected, arrow_stats(batches), f"{where}: Delta table {location}")


def write_hakiri_project(
    root: Path, csv_file: Path, *, mode: str, master: str, url: str | None, table: str
) -> None:
    columns = ", ".join(f"{name} = {json.dumps(spark)}" for name, _, spark, _ in COLUMNS)
    source = (
        '{ connector = "files", config = { '
        f"path = {json.dumps(str(csv_file))}, columns = {{ {columns} }} }} }}"
    )
    if mode == "upsert":
        load = f'{{ mode = "upsert", upsert_key = {json.dumps(list(KEY))} }}'
    else:
        load = f'{{ mode = "{mode}" }}'
    if url is None:
        connection = ""
        destination = '{ connector = "context" }'
    else:
        connection = f'[connections.pg]\ntype = "postgres"\nurl = {json.dumps(url)}\n'
        destination = (
            f'{{ connector = "postgres", config = {{ connection = "pg", schema = "{SCHEMA}" }} }}'
        )
    (root / "hakiri.toml").write_text(
        '[project]\nname = "bench-load-peers"\n\n'
        '[context]\npath = ".hakiri/context"\n\n'
        f'[spark]\nmaster = "{master}"\nconf = {{ "spark.ui.enabled" = "false" }}\n\n'
        f"{connection}\n"
        '[[pipeline]]\nid = "lineitem"\n'
        f"source = {source}\n"
        f'tables = [{{ name = "lineitem", target = "{table}" }}]\n'
        f"destination = {destination}\n"
        f"load = {load}\n"
    )


# -------------------------------------------------------------------------- variants


def compile_tree(src: Path) -> None:
    """Write the tree's bytecode first: an installed hakiri has it (pip compiles, and Python
    writes it on a first import), and under PYTHONDONTWRITEBYTECODE (this reference machine
    sets it) every run would compile ~300 modules again, ~0.3 s of each run's wall time."""
    import compileall

    compileall.compile_dir(str(src), quiet=1)


def hakiri_variants(python: str, baseline: str | None, engines: list[str]) -> list[HakiriVariant]:
    variants = [
        HakiriVariant(
            "" if engine == "driver" else f"+{engine}",
            {"driver": "", "sail": " (Sail)"}.get(
                engine, f" (local Spark Connect server, {engine})"
            ),
            python,
            REPO / "src",
            "" if engine == "driver" else f"_{engine}",
            engine,
        )
        for engine in engines
    ]
    if baseline:
        sha = run_checked(
            ["git", "-C", str(REPO), "rev-parse", "--verify", f"{baseline}^{{commit}}"],
            f"git rev-parse {baseline}",
        ).stdout.strip()
        short = sha[:10]
        tree = BENCH / f".baseline-{short}"
        if not tree.exists():
            print(f"creating a worktree of {baseline} ({short}) at {tree} ...", flush=True)
            run_checked(
                ["git", "-C", str(REPO), "worktree", "add", "--detach", str(tree), sha],
                "git worktree add",
            )
        head = run_checked(["git", "-C", str(tree), "rev-parse", "HEAD"], "git rev-parse").stdout
        if head.strip() != sha:
            raise BenchError(f"{tree} is at {head.strip()}, not {sha}; remove it and run again")
        # The baseline on each engine the tree runs on that it has (Sail since issue 29), so
        # before and after compare the same engine; "driver" for the engines it predates.
        has_sail = (tree / "src" / "hakiri" / "spark" / "sail.py").exists()
        for engine in dict.fromkeys(e if e == "sail" and has_sail else "driver" for e in engines):
            variants.append(
                HakiriVariant(
                    f"@{short}" + ("" if engine == "driver" else f"+{engine}"),
                    f" (baseline {short}" + (", Sail)" if engine == "sail" else ")"),
                    python,
                    tree / "src",
                    "_base" + ("" if engine == "driver" else f"_{engine}"),
                    engine,
                )
            )
    for variant in variants:
        compile_tree(variant.src)
        done = run_checked(
            [variant.python, "-c", "import hakiri; print(hakiri.__file__)"],
            f"importing hakiri with {variant.python}",
            env={**os.environ, "PYTHONPATH": str(variant.src)},
        )
        found = Path(done.stdout.strip()).resolve()
        if not found.is_relative_to(variant.src.resolve()):
            raise BenchError(
                f"PYTHONPATH={variant.src} imports hakiri from {found}, not from there"
            )
    return variants


def build_paths(
    names: list[str], bench: Bench, variants: list[HakiriVariant], versions: dict[str, str]
) -> list[LoadPath]:
    dlt = versions.get("dlt", "?")
    sling = versions.get("sling-linux-amd64", "?")
    labels = {
        "psql": "`psql \\copy` into a typed table",
        "dlt": f"dlt {dlt}, parquet → ADBC, replace",
        "sling": f"Sling {sling}, full-refresh",
        "hakiri-truncate": "`hakiri apply`, truncate",
        "hand-upsert": "hand-written: `\\copy` to staging + `INSERT … ON CONFLICT` (every row updates)",
        "dlt-merge": f"dlt {dlt} merge (delete-insert)",
        "hakiri-upsert": "`hakiri apply`, upsert into the full table",
        "hakiri-blue-green": "`hakiri apply`, blue_green replacing the full table",
        "hakiri-context": "`hakiri apply`, truncate into the context store",
        "deltars-direct": "pyarrow CSV stream → delta-rs `write_deltalake`, overwrite",
    }
    simple: dict[str, type[LoadPath]] = {
        "psql": PsqlCopy,
        "dlt": DltLoad,
        "sling": SlingLoad,
        "hand-upsert": HandUpsert,
        "dlt-merge": DltMerge,
        "deltars-direct": DeltaRsDirect,
    }
    paths: list[LoadPath] = []
    for name in names:
        group = "context" if name in CONTEXT_PATHS else "postgres"
        if name in HAKIRI_PATHS:
            for variant in variants:
                path = HakiriLoad(name + variant.suffix, labels[name] + variant.note, group, bench)
                path.mode = {"hakiri-upsert": "upsert", "hakiri-blue-green": "blue_green"}.get(
                    name, "truncate"
                )
                path.variant = variant
                if group == "postgres":
                    keyed = path.mode in ("upsert", "blue_green")
                    create_typed_table(bench.url, path.table, keyed=keyed)
                paths.append(path)
        else:
            path = simple[name](name, labels[name], group, bench)
            if isinstance(path, PsqlCopy | HandUpsert):
                create_typed_table(bench.url, path.table, keyed=isinstance(path, HandUpsert))
            paths.append(path)
    return paths


# ------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=0.2, help="TPC-H scale factor")
    parser.add_argument("--repeat", type=int, default=3, help="timed runs of each path")
    parser.add_argument(
        "--paths",
        default=",".join(ALL_PATHS),
        help=f"comma-separated subset of: {', '.join(ALL_PATHS)}",
    )
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument("--baseline", metavar="REV", help="also time hakiri at this git revision")
    parser.add_argument(
        "--hakiri-python",
        default=str(REPO / ".venv" / "bin" / "python"),
        help="the interpreter that runs hakiri (default: .venv/bin/python)",
    )
    parser.add_argument("--master", default="local[2]", help="spark.master of the hakiri projects")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    parser.add_argument(
        "--engines",
        default="driver",
        help="where this tree's hakiri runs Spark, comma-separated: driver (a JVM in the "
        "command), warm (the local Spark Connect server, already running), cold (that server, "
        "started by the run), sail (Sail inside the command); the baseline runs on Sail when both it and --engines have "
        "it, else in its own driver",
    )
    parser.add_argument(
        "--keep-output",
        type=Path,
        metavar="DIR",
        help="write each run's stdout and stderr to DIR/<path>-<run>.out",
    )
    args = parser.parse_args()
    global KEEP_OUTPUT
    KEEP_OUTPUT = args.keep_output
    if KEEP_OUTPUT is not None:
        KEEP_OUTPUT.mkdir(parents=True, exist_ok=True)
    engines = [e.strip() for e in args.engines.split(",") if e.strip()]
    if not engines or set(engines) - {"driver", "warm", "cold", "sail"}:
        parser.error("--engines takes driver, warm, cold and/or sail")

    names = [n.strip() for n in args.paths.split(",") if n.strip()]
    unknown = sorted(set(names) - set(ALL_PATHS))
    if unknown or not names:
        parser.error(f"unknown path(s) {', '.join(unknown)}; choose from {', '.join(ALL_PATHS)}")
    names = [n for n in ALL_PATHS if n in names]  # the table's order
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    peers_cache: list[Peers] = []

    def peers() -> Peers:
        if not peers_cache:
            peers_cache.append(ensure_peers())
        return peers_cache[0]

    csv_file = tpch_csv(args.scale, peers)
    expected = expected_stats(csv_file)
    if any(n in PEER_PATHS for n in names):
        peers()
    variants = (
        hakiri_variants(args.hakiri_python, args.baseline, engines)
        if set(names) & set(HAKIRI_PATHS)
        else []
    )

    needs_pg = any(n in PG_PATHS for n in names)
    sys.path.insert(0, str(REPO))  # for tests.support
    from tests.support.postgres import TestPostgres

    server = TestPostgres().start() if needs_pg and not args.pg_url else None
    url = args.pg_url or (server.url if server else "")
    work = Path(tempfile.mkdtemp(prefix="hakiri-load-peers-"))
    try:
        if url:
            reset_schemas(url, create=True)
        bench = Bench(
            url, csv_file, expected, work, args.master, peers_cache[0] if peers_cache else None
        )
        versions = bench.peers.versions() if bench.peers else {}
        paths = build_paths(names, bench, variants, versions)
        machine = describe_machine(url, variants, versions)
        print(machine["line"])
        print(
            f"data: TPC-H lineitem, scale {args.scale:g}: {expected['rows']:,} rows, "
            f"{csv_file.stat().st_size / 1e6:,.1f} MB CSV ({csv_file.relative_to(REPO)})"
        )
        print(f"{len(paths)} paths, {args.repeat} repetition(s), alternating:", flush=True)
        run_all(paths, args.repeat)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        if url and args.pg_url:
            reset_schemas(url, create=False)
        if server is not None:
            server.stop()

    print()
    report(paths, machine, args.scale, expected["rows"])
    if args.json:
        write_json(args.json, paths, machine, args, expected)
        print(f"\nresults written to {args.json}")


KEEP_OUTPUT: Path | None = None  # --keep-output: where each run's output is written


def run_all(paths: list[LoadPath], repeat: int) -> None:
    width = max(len(p.name) for p in paths)
    for rep in range(1, repeat + 1):
        for path in paths:
            where = f"{path.name}, run {rep}/{repeat}"
            command = path.prepare()
            began = time.perf_counter()
            done, peak = run_measured(command)
            elapsed = time.perf_counter() - began
            if KEEP_OUTPUT is not None:  # e.g. spans, with OTEL_TRACES_EXPORTER=console
                (KEEP_OUTPUT / f"{path.name}-{rep}.out").write_text(done.stdout + done.stderr)
            if done.returncode != 0:
                raise BenchError(
                    f"{where} failed (exit {done.returncode}) after {elapsed:.1f} s: "
                    f"{' '.join(command.argv)}\n{tail(done)}"
                )
            path.check_output(done, where)
            path.verify(where)
            path.cleanup()
            path.times.append(elapsed)
            path.peaks.append(peak)
            print(
                f"  run {rep}/{repeat}  {path.name:<{width}}  {elapsed:8.2f} s  "
                f"{peak:7.0f} MiB  verified",
                flush=True,
            )


def run_measured(command: Any) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the command to its end (output captured); its result and its peak RSS in MiB.

    GNU time starts the command and reports the peak its own wait4 saw for it (and the
    children it waited for). Not the bench's own wait4: a child forked from this process
    starts with this process's resident pages counted, hundreds of MiB after a few runs."""
    with tempfile.NamedTemporaryFile("r", suffix=".rss") as report:
        done = subprocess.run(
            ["/usr/bin/time", "-f", "%M", "-o", report.name, *command.argv],
            env=command.env,
            cwd=command.cwd,
            capture_output=True,
            text=True,
            stdin=subprocess.DEVNULL,
        )
        text = report.read().strip().splitlines()
    peak_kib = int(text[-1]) if text and text[-1].isdigit() else 0
    return subprocess.CompletedProcess(command.argv, done.returncode, done.stdout, done.stderr), (
        peak_kib / 1024
    )


def describe_machine(
    url: str, variants: list[HakiriVariant], versions: dict[str, str]
) -> dict[str, Any]:
    info: dict[str, Any] = {"cores": os.cpu_count(), "load_average": os.getloadavg()[0]}
    if url:
        with connect(url) as conn:
            info["postgresql"] = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
    if variants:
        done = run_checked(
            [
                variants[0].python,
                "-c",
                "import pyspark, sys; print(pyspark.__version__, sys.version.split()[0])",
            ],
            "reading the Spark version",
        )
        info["spark"], info["python"] = done.stdout.split()
        java = subprocess.run(["java", "-version"], capture_output=True, text=True)
        first = (java.stderr or java.stdout).splitlines()
        info["java"] = first[0] if first else "?"
    info["peers"] = versions
    parts = [f"machine: {info['cores']} cores, load average {info['load_average']:.2f} at start"]
    if "postgresql" in info:
        parts.append(f"PostgreSQL {info['postgresql']}")
    if "spark" in info:
        parts.append(f"Spark {info['spark']} (Python {info['python']}, {info['java']})")
    if versions:
        parts.append("peers: " + ", ".join(f"{k} {v}" for k, v in versions.items()))
    info["line"] = "; ".join(parts)
    return info


def summary(path: LoadPath) -> dict[str, float]:
    return {
        "median": statistics.median(path.times),
        "min": min(path.times),
        "max": max(path.times),
        "peak_rss_mib": max(path.peaks) if path.peaks else 0.0,
    }


def ratio(path: LoadPath, paths: list[LoadPath]) -> dict[str, Any]:
    """The path's median over the median of its group's reference path (psql, deltars-direct)."""
    base = next((p for p in paths if p.name == BASE[path.group]), None)
    if base is None:
        return {}
    return {"ratio_to": base.name, "ratio": summary(path)["median"] / summary(base)["median"]}


def report(paths: list[LoadPath], machine: dict[str, Any], scale: float, rows: int) -> None:
    for group, title in (("postgres", "into PostgreSQL"), ("context", "into the context store")):
        members = [p for p in paths if p.group == group]
        if not members:
            continue
        ratio_title = f"ratio to {BASE[group]}"
        print(f"{title}, scale {scale:g} ({rows:,} rows), {len(members[0].times)} run(s) each:\n")
        print(f"| path | median | min | max | {ratio_title} | peak RSS |")
        print("|---|---|---|---|---|---|")
        for path in members:
            s = summary(path)
            r = ratio(path, paths)
            shown = f"{r['ratio']:.1f}" if r else "-"
            peak = f"{max(path.peaks):.0f} MiB" if path.peaks else "-"
            print(
                f"| {path.label} | {s['median']:.2f} s | {s['min']:.2f} s | {s['max']:.2f} s "
                f"| {shown} | {peak} |"
            )
        print()
    print(machine["line"])


def write_json(
    target: Path,
    paths: list[LoadPath],
    machine: dict[str, Any],
    args: argparse.Namespace,
    expected: dict[str, Any],
) -> None:
    document = {
        "benchmark": "bench/load_peers.py",
        "scale": args.scale,
        "repeat": args.repeat,
        "baseline": args.baseline,
        "machine": {k: v for k, v in machine.items() if k != "line"},
        "expected": encode_stats(expected),
        "paths": [
            {
                "name": p.name,
                "label": p.label,
                "group": p.group,
                "times": p.times,
                **summary(p),
                **ratio(p, paths),
            }
            for p in paths
        ],
    }
    target.write_text(json.dumps(document, indent=2) + "\n")


if __name__ == "__main__":
    main()
