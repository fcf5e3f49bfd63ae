"""Benchmark: scd2 history of a 1,000,000-key table, 5% of keys changed per snapshot, `hakiri apply` against a hand-written SQL merge.

Run by hand (about 3 minutes on 2 cores at the defaults; most of it is hakiri's):

    .venv/bin/python bench/scd2.py [--keys 1000000] [--batches 3] [--changed 0.05]
        [--pg-url URL] [--master local[2]] [--keep] [--json FILE] [--hand-only]

The data: snapshot 0 holds `--keys` customers (id bigint, name, tier, amount bigint; values
from a seeded random generator, so deterministic); each of the `--batches` follow-up
snapshots changes `--changed` of the keys: 80% of them get a new tier and amount, 10% leave
the snapshot (deleted), 10% enter it (half of them keys deleted by the previous snapshot,
coming back; the rest new keys). Each snapshot is one CSV file (header, written with
pyarrow) whose modification time is set to 2024-01-01 00:00 UTC + its number in hours, so
every batch time is known in advance.

Two histories of the same snapshots, in the same PostgreSQL, batch by batch:

- hakiri: a project whose one pipeline reads `data/*.csv` (the files source, declared
  columns) into `bench_scd2_hakiri.customers_history` with load mode scd2, key id,
  deletes = "close". Per batch the snapshot is hard-linked into data/ (its mtime is the
  batch time) and `python -m hakiri.cli.main apply --project DIR --json` runs, timed from
  start to exit (interpreter, JVM and SparkSession start included). Its parts come from
  hakiri itself: the spans it prints with OTEL_TRACES_EXPORTER=console (on stderr) split
  the wall time into hakiri.read (the SparkSession start, i.e. the JVM, and the read's
  plan), hakiri.stage (the Spark job reading the CSV and writing the staging table) and
  the commit (the JSON's per-batch `commit`: the destination transaction, the scd2 merge);
  "other" is the rest of the process. The JSON's `rows` and `deleted` are shown as hakiri
  reports them.
- hand SQL: psycopg, `COPY ... FROM STDIN (FORMAT csv, HEADER)` of the same file into an
  UNLOGGED staging table, then one transaction: ANALYZE the staging table; UPDATE the
  current versions whose key is absent from the snapshot or whose name/tier/amount differ
  (valid_to = batch time, is_current = false); INSERT a current version (valid_from =
  batch time) for every staged key that has no current version left (changed, new,
  returning). Its table is `bench_scd2_hand.customers_history` with the primary key
  (id, valid_from) that hakiri gives its history, and no other index.

After every batch (untimed) both histories are compared on id, name, tier, amount,
valid_from, valid_to, is_current with EXCEPT ALL both ways, and their row and current
counts against the generator's; a difference prints the differing rows (up to 20 each
way) and exits 1 at the end. When hakiri fails, its error is printed, the hand-SQL half goes on, and the report says
where hakiri stopped.

Without --pg-url a throwaway PostgreSQL is started (tests.support.postgres, the test
suite's server: fsync and synchronous_commit off) and stopped at the end. With --pg-url the
two schemas are dropped and created again, and hakiri's ledger rows for them are deleted.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import psycopg
import pyarrow as pa
from psycopg import sql
from pyarrow import csv as pa_csv

REPO = Path(__file__).resolve().parents[1]
SEED = 20240601
TIERS = ("bronze", "silver", "gold", "platinum")
EPOCH = datetime(2024, 1, 1, tzinfo=UTC)
HAKIRI_SCHEMA = "bench_scd2_hakiri"
HAND_SCHEMA = "bench_scd2_hand"
TABLE = "customers_history"
COLUMNS = ("id", "name", "tier", "amount", "valid_from", "valid_to", "is_current")
COPY_CHUNK = 1 << 20


@dataclass
class Snapshot:
    number: int
    path: Path
    at: datetime  # its mtime: the batch time
    keys: int  # rows in the file
    updated: int = 0
    deleted: int = 0
    returning: int = 0
    new: int = 0

    @property
    def closes(self) -> int:
        return self.updated + self.deleted

    @property
    def opens(self) -> int:
        return self.updated + self.returning + self.new


@dataclass
class Batch:
    snapshot: Snapshot
    hakiri: dict[str, Any] = field(
        default_factory=dict
    )  # wall_s, read_s, stage_s, commit, rows, ...
    hand: dict[str, Any] = field(default_factory=dict)  # copy_s, merge_s, closed, opened
    diff: tuple[int, int] | None = None  # rows only in hakiri's, only in the hand history
    problems: list[str] = field(default_factory=list)  # counts unlike the generator's


# ------------------------------------------------------------------------------ data


def generate(directory: Path, keys: int, batches: int, changed: float) -> list[Snapshot]:
    """Snapshot 0 and the follow-ups as CSV files with increasing mtimes (module docstring)."""
    directory.mkdir(parents=True)
    rng = random.Random(SEED)
    tier = [rng.choice(TIERS) for _ in range(keys)]
    amount = [rng.randrange(0, 1_000_000) for _ in range(keys)]
    present = set(range(keys))
    snapshots = [write_snapshot(directory, 0, present, tier, amount)]
    left: list[int] = []  # keys deleted by the previous snapshot
    for number in range(1, batches + 1):
        rng = random.Random(SEED + number)
        count = round(keys * changed)
        deletes = count // 10
        adds = count // 10
        updates = count - deletes - adds
        picked = rng.sample(sorted(present), updates + deletes)
        for key in picked[:updates]:
            tier[key] = TIERS[(TIERS.index(tier[key]) + rng.randrange(1, len(TIERS))) % len(TIERS)]
            amount[key] += rng.randrange(1, 1000)
        present.difference_update(picked[updates:])
        back = left[: adds // 2]
        for key in back:  # a returning key comes back with other values
            amount[key] += 1
        new = list(range(len(tier), len(tier) + adds - len(back)))
        tier += [rng.choice(TIERS) for _ in new]
        amount += [rng.randrange(0, 1_000_000) for _ in new]
        present.update(back, new)
        left = picked[updates:]
        snapshot = write_snapshot(directory, number, present, tier, amount)
        snapshot.updated, snapshot.deleted = updates, deletes
        snapshot.returning, snapshot.new = len(back), len(new)
        snapshots.append(snapshot)
    return snapshots


def write_snapshot(
    directory: Path, number: int, present: set[int], tier: list[str], amount: list[int]
) -> Snapshot:
    ids = sorted(present)
    table = pa.table(
        {
            "id": pa.array(ids, pa.int64()),
            "name": pa.array([f"customer {i}" for i in ids], pa.string()),
            "tier": pa.array([tier[i] for i in ids], pa.string()),
            "amount": pa.array([amount[i] for i in ids], pa.int64()),
        }
    )
    path = directory / f"customers-{number:04d}.csv"
    pa_csv.write_csv(table, path)
    at = EPOCH + timedelta(hours=number)
    stamp = int(at.timestamp()) * 1_000_000_000
    os.utime(path, ns=(stamp, stamp))
    return Snapshot(number, path, at, len(ids))


# ---------------------------------------------------------------------------- hakiri


def write_project(root: Path, url: str, master: str) -> None:
    (root / "data").mkdir(parents=True)
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "bench-scd2"

        [spark]
        master = "{master}"
        conf = {{ "spark.ui.enabled" = "false" }}

        [connections.wh]
        type = "postgres"
        url = {json.dumps(url)}

        [[pipeline]]
        id = "customers"
        source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", name = "string", tier = "string", amount = "bigint" }} }} }}
        tables = [{{ name = "customers", target = "{TABLE}" }}]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{HAKIRI_SCHEMA}" }} }}
        load = {{ mode = "scd2", key = ["id"], deletes = "close", max_delete_fraction = 1.0 }}
        """).lstrip()
    )


def hakiri_apply(root: Path, snapshot: Snapshot) -> dict[str, Any]:
    """Add the snapshot to data/ and time `hakiri apply`; its per-batch figures from --json."""
    target = root / "data" / snapshot.path.name
    try:
        os.link(snapshot.path, target)  # the same inode: the same mtime
    except OSError:
        shutil.copy2(snapshot.path, target)
    env = {k: v for k, v in os.environ.items() if k != "HAKIRI_CATALOG_URL"}
    env["PYTHONPATH"] = str(REPO / "src")
    # hakiri's spans on stderr: where the JVM start (inside the first read) ends.
    env |= {"OTEL_TRACES_EXPORTER": "console", "OTEL_METRICS_EXPORTER": "none"}
    argv = [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root), "--json"]
    began = time.perf_counter()
    done = subprocess.run(
        argv, env=env, cwd=root, capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    wall = time.perf_counter() - began
    outcomes = parse_outcomes(done.stdout)
    spans, stderr = parse_spans(done.stderr or "")
    failed = [o for o in outcomes if o.get("status") != "success"]
    if done.returncode != 0 or failed or not outcomes:
        detail = "; ".join(f"{o.get('error')} (hint: {o.get('hint')})" for o in failed)
        tail = "\n".join(stderr.strip().splitlines()[-25:])
        raise HakiriFailed(
            f"`hakiri apply` of {snapshot.path.name} exited {done.returncode} after {wall:.1f} s"
            + (f": {detail}" if detail else "")
            + (f"\n--- stderr (last lines) ---\n{tail}" if tail else "")
        )
    [outcome] = outcomes
    if outcome["batches"] != 1 or len(outcome["timings"]) != 1:
        raise HakiriFailed(
            f"`hakiri apply` of {snapshot.path.name} loaded {outcome['batches']} batches, "
            f"expected 1: {json.dumps(outcome)[:2000]}"
        )
    [timing] = outcome["timings"]
    figures = {"wall_s": wall, "pipeline_s": outcome["seconds"], "rows": outcome["rows"]}
    figures |= {"closed": outcome.get("deleted"), **timing}
    # hakiri.read: SparkSession start (the JVM) and the read's plan; hakiri.stage: the Spark
    # job that reads the CSV and stages it in PostgreSQL. From the spans when present.
    for name in ("read", "stage"):
        figures[f"{name}_s"] = spans.get(f"hakiri.{name}")
    return figures


def parse_spans(stderr: str) -> tuple[dict[str, float], str]:
    """The seconds of each span the console exporter printed, and stderr without them."""
    decoder, spans, rest, at = json.JSONDecoder(), {}, [], 0
    while (found := stderr.find('{\n    "name": "hakiri.', at)) >= 0:
        rest.append(stderr[at:found])
        try:
            span, at = decoder.raw_decode(stderr, found)
        except ValueError:
            rest.append(stderr[found:])
            at = len(stderr)
            break
        began, ended = (datetime.fromisoformat(span[k]) for k in ("start_time", "end_time"))
        spans[span["name"]] = spans.get(span["name"], 0.0) + (ended - began).total_seconds()
    rest.append(stderr[at:])
    return spans, "".join(rest)


class HakiriFailed(Exception):
    pass


def parse_outcomes(stdout: str) -> list[dict[str, Any]]:
    """The JSON array `apply --json` prints (whatever else stdout holds before it)."""
    start = stdout.find("\n[")
    text = stdout if stdout.startswith("[") else stdout[start + 1 :] if start >= 0 else ""
    try:
        document = json.loads(text)
    except ValueError:
        return []
    return document if isinstance(document, list) else []


# -------------------------------------------------------------------------- hand SQL


def create_hand_tables(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            sql.SQL(
                "CREATE TABLE {} (id bigint NOT NULL, name text, tier text, amount bigint, "
                "valid_from timestamptz NOT NULL, valid_to timestamptz, "
                "is_current boolean NOT NULL, PRIMARY KEY (id, valid_from))"
            ).format(sql.Identifier(HAND_SCHEMA, TABLE))
        )
        conn.execute(
            sql.SQL(
                "CREATE UNLOGGED TABLE {} (id bigint, name text, tier text, amount bigint)"
            ).format(sql.Identifier(HAND_SCHEMA, "stage"))
        )


HAND_CLOSE = """
UPDATE {hist} h SET valid_to = %(at)s, is_current = false
WHERE h.is_current AND NOT EXISTS (
  SELECT 1 FROM {stage} s
  WHERE s.id = h.id AND s.name IS NOT DISTINCT FROM h.name
    AND s.tier IS NOT DISTINCT FROM h.tier AND s.amount IS NOT DISTINCT FROM h.amount)
"""
HAND_OPEN = """
INSERT INTO {hist} (id, name, tier, amount, valid_from, valid_to, is_current)
SELECT s.id, s.name, s.tier, s.amount, %(at)s, NULL, true FROM {stage} s
WHERE NOT EXISTS (SELECT 1 FROM {hist} h WHERE h.id = s.id AND h.is_current)
"""


def hand_merge(url: str, snapshot: Snapshot) -> dict[str, Any]:
    """COPY the snapshot into the staging table, then merge it in one transaction."""
    names = {
        "hist": sql.Identifier(HAND_SCHEMA, TABLE),
        "stage": sql.Identifier(HAND_SCHEMA, "stage"),
    }
    with psycopg.connect(url) as conn:
        began = time.perf_counter()
        conn.execute(sql.SQL("TRUNCATE {}").format(names["stage"]))
        with conn.cursor() as cur, snapshot.path.open("rb") as source:
            copy = sql.SQL("COPY {} (id, name, tier, amount) FROM STDIN (FORMAT csv, HEADER)")
            with cur.copy(copy.format(names["stage"])) as sink:
                while chunk := source.read(COPY_CHUNK):
                    sink.write(chunk)
        conn.commit()
        copied = time.perf_counter()
        conn.execute(sql.SQL("ANALYZE {}").format(names["stage"]))
        closed = conn.execute(sql.SQL(HAND_CLOSE).format(**names), {"at": snapshot.at}).rowcount
        opened = conn.execute(sql.SQL(HAND_OPEN).format(**names), {"at": snapshot.at}).rowcount
        conn.commit()
        merged = time.perf_counter()
    return {
        "copy_s": copied - began,
        "merge_s": merged - copied,
        "closed": closed,
        "opened": opened,
    }


# ---------------------------------------------------------------------------- checks


def compare(url: str) -> tuple[int, int, list[str]]:
    """Rows only in hakiri's history, only in the hand one, and up to 20 of them shown."""
    cols = sql.SQL(", ").join(map(sql.Identifier, COLUMNS))
    hakiri = sql.SQL("SELECT {} FROM {}").format(cols, sql.Identifier(HAKIRI_SCHEMA, TABLE))
    hand = sql.SQL("SELECT {} FROM {}").format(cols, sql.Identifier(HAND_SCHEMA, TABLE))
    shown: list[str] = []
    counts = []
    with psycopg.connect(url, autocommit=True) as conn:
        for side, (a, b) in (("hakiri only", (hakiri, hand)), ("hand only", (hand, hakiri))):
            query = sql.SQL("({}) EXCEPT ALL ({})").format(a, b)
            counts.append(
                conn.execute(sql.SQL("SELECT count(*) FROM ({}) d").format(query)).fetchone()[0]  # type: ignore[index]
            )
            if counts[-1]:
                rows = conn.execute(
                    sql.SQL("SELECT * FROM ({}) d ORDER BY id, valid_from LIMIT 20").format(query)
                ).fetchall()
                shown += [f"  {side}: {show(row)}" for row in rows]
    return counts[0], counts[1], shown


def show(row: tuple[Any, ...]) -> str:
    """A history row as `id=.. name=.. ... is_current=..`, times in UTC ISO form."""
    cells = (v.astimezone(UTC).isoformat() if isinstance(v, datetime) else v for v in row)
    return " ".join(f"{c}={v}" for c, v in zip(COLUMNS, cells, strict=True))


def counts(url: str, schema: str) -> tuple[int, int]:
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute(
            sql.SQL("SELECT count(*), count(*) FILTER (WHERE is_current) FROM {}").format(
                sql.Identifier(schema, TABLE)
            )
        ).fetchone()
    return int(row[0]), int(row[1])  # type: ignore[index]


def table_shape(url: str, schema: str) -> str:
    """The history's column types and indexes, to show both tables are alike."""
    with psycopg.connect(url, autocommit=True) as conn:
        columns = conn.execute(
            "SELECT column_name, data_type FROM information_schema.columns "
            "WHERE table_schema = %s AND table_name = %s ORDER BY ordinal_position",
            (schema, TABLE),
        ).fetchall()
        indexes = conn.execute(
            "SELECT indexdef FROM pg_indexes WHERE schemaname = %s AND tablename = %s "
            "ORDER BY indexname",
            (schema, TABLE),
        ).fetchall()
    shape = ", ".join(f"{c} {t}" for c, t in columns)
    index = "; ".join(i.split(" USING ", 1)[-1] for (i,) in indexes) or "none"
    return f"{shape}; indexes: {index}"


# ------------------------------------------------------------------------------ main


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--keys", type=int, default=1_000_000, help="keys in snapshot 0")
    parser.add_argument("--batches", type=int, default=3, help="follow-up snapshots")
    parser.add_argument("--changed", type=float, default=0.05, help="fraction of keys changed")
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument("--master", default="local[2]", help="spark.master of the hakiri project")
    parser.add_argument("--keep", action="store_true", help="keep the work directory")
    parser.add_argument("--hand-only", action="store_true", help="skip hakiri (the SQL half alone)")
    parser.add_argument("--json", type=Path, metavar="FILE", help="also write the results here")
    args = parser.parse_args()
    if args.keys < 100 or args.batches < 1 or not 0 < args.changed <= 0.5:
        parser.error("needs --keys >= 100, --batches >= 1 and 0 < --changed <= 0.5")

    sys.path.insert(0, str(REPO))  # for tests.support
    from tests.support.postgres import TestPostgres

    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url  # type: ignore[union-attr]
    work = Path(tempfile.mkdtemp(prefix="hakiri-bench-scd2-"))
    try:
        failed = run(url, work, args)
    finally:
        if args.keep:
            print(f"work directory kept: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
        if server is not None:
            server.stop()
    if failed:
        raise SystemExit(1)


def reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        for schema in (HAKIRI_SCHEMA, HAND_SCHEMA):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        if conn.execute("SELECT to_regclass('_hakiri.load_ledger') IS NOT NULL").fetchone()[0]:  # type: ignore[index]
            conn.execute(
                "DELETE FROM _hakiri.load_ledger WHERE target_schema = %s", (HAKIRI_SCHEMA,)
            )


def run(url: str, work: Path, args: argparse.Namespace) -> bool:
    """Every batch through both paths; True when something failed or differed."""
    machine = describe_machine(url)
    print(machine["line"], flush=True)
    began = time.perf_counter()
    snapshots = generate(work / "snapshots", args.keys, args.batches, args.changed)
    size = sum(s.path.stat().st_size for s in snapshots) / 1e6
    print(
        f"{len(snapshots)} snapshots generated in {time.perf_counter() - began:.1f} s "
        f"({size:,.0f} MB CSV)",
        flush=True,
    )
    reset(url)
    create_hand_tables(url)
    project = work / "project"
    write_project(project, url, args.master)
    batches: list[Batch] = []
    hakiri_error: str | None = None
    expected = (0, 0)
    for snapshot in snapshots:
        batch = Batch(snapshot)
        batches.append(batch)
        expected = (
            expected[0] + snapshot.opens + (snapshot.keys if not snapshot.number else 0),
            snapshot.keys,
        )
        if hakiri_error is None and not args.hand_only:
            try:
                batch.hakiri = hakiri_apply(project, snapshot)
            except HakiriFailed as exc:
                hakiri_error = f"batch {snapshot.number}: {exc}"
                print(f"hakiri FAILED at {hakiri_error}", flush=True)
        batch.hand = hand_merge(url, snapshot)
        progress(batch)
        batch.problems = check_counts(url, batch, expected, hakiri=bool(batch.hakiri))
        for problem in batch.problems:
            print(f"  MISMATCH: {problem}", flush=True)
        if batch.hakiri:
            only_hakiri, only_hand, shown = compare(url)
            batch.diff = (only_hakiri, only_hand)
            print(
                f"  histories compared: {only_hakiri:,} rows only in hakiri's, "
                f"{only_hand:,} only in the hand one",
                flush=True,
            )
            for line in shown:
                print(line, flush=True)
    print()
    report(batches, args, machine, url, hakiri_error)
    if args.json:
        write_json(args.json, batches, args, machine, hakiri_error)
    differed = any((b.diff and any(b.diff)) or b.problems for b in batches)
    return bool(hakiri_error) or differed


def check_counts(url: str, batch: Batch, expected: tuple[int, int], *, hakiri: bool) -> list[str]:
    """Each history's (rows, current rows) and the hand merge's row counts, as generated."""
    snapshot, problems = batch.snapshot, []
    opens = snapshot.opens if snapshot.number else snapshot.keys
    if (batch.hand["closed"], batch.hand["opened"]) != (snapshot.closes, opens):
        problems.append(
            f"hand SQL closed {batch.hand['closed']:,} and opened {batch.hand['opened']:,} "
            f"versions, generated {snapshot.closes:,} and {opens:,}"
        )
    for schema in (HAND_SCHEMA, HAKIRI_SCHEMA) if hakiri else (HAND_SCHEMA,):
        found = counts(url, schema)
        if found != expected:
            problems.append(
                f"{schema}.{TABLE} holds {found[0]:,} rows, {found[1]:,} current; "
                f"expected {expected[0]:,} and {expected[1]:,}"
            )
    return problems


def progress(batch: Batch) -> None:
    s, h, d = batch.snapshot, batch.hakiri, batch.hand
    line = f"batch {s.number}: {s.keys:,} keys"
    if h:
        line += (
            f"; hakiri {h['wall_s']:.1f} s (start+read {seconds(h['read_s'])}, "
            f"stage {seconds(h['stage_s'])}, commit {h['commit']:.1f} s)"
        )
    line += (
        f"; hand SQL {d['copy_s'] + d['merge_s']:.1f} s "
        f"(COPY {d['copy_s']:.1f} s, merge {d['merge_s']:.1f} s)"
    )
    print(line, flush=True)


def seconds(value: float | None) -> str:
    return "?" if value is None else f"{value:.2f} s"


def describe_machine(url: str) -> dict[str, Any]:
    import pyspark

    with psycopg.connect(url, autocommit=True) as conn:
        pg = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        settings = dict(
            conn.execute(
                "SELECT name, setting FROM pg_settings WHERE name IN "
                "('fsync', 'synchronous_commit', 'shared_buffers', 'work_mem')"
            ).fetchall()
        )
    java = subprocess.run(["java", "-version"], capture_output=True, text=True)
    first = (java.stderr or java.stdout).splitlines()
    memory = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    info = {
        "cpus": os.cpu_count(),
        "ram_gib": round(memory, 1),
        "load_average": os.getloadavg()[0],
        "postgresql": pg,
        "pg_settings": settings,
        "python": platform.python_version(),
        "pyspark": pyspark.__version__,
        "java": first[0] if first else "?",
    }
    pg_conf = ", ".join(f"{k}={v}" for k, v in sorted(settings.items()))
    info["line"] = (
        f"machine: {info['cpus']} CPUs, {info['ram_gib']} GiB RAM, load average "
        f"{info['load_average']:.2f} at start; PostgreSQL {pg} ({pg_conf}); "
        f"Python {info['python']}, Spark {info['pyspark']}, {info['java']}"
    )
    return info


def report(
    batches: list[Batch],
    args: argparse.Namespace,
    machine: dict[str, Any],
    url: str,
    hakiri_error: str | None,
) -> None:
    print(
        f"scd2, {args.keys:,} keys, {args.changed:.0%} of keys changed per snapshot "
        f"(80% new values, 10% deleted, 10% added), hakiri on {args.master}:\n"
    )
    print(
        "| batch | snapshot rows | versions closed / opened | hakiri apply (wall) "
        "| hakiri: JVM start + read | hakiri: stage | hakiri: commit | hakiri: other "
        "| hakiri rows written / closed | hand SQL (COPY + merge) | hand: COPY | hand: merge "
        "| histories equal |"
    )
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for batch in batches:
        s, h, d = batch.snapshot, batch.hakiri, batch.hand
        label = "0 (initial load)" if s.number == 0 else str(s.number)
        versions = f"{d['closed']:,} / {d['opened']:,}"
        if h:
            closed = "?" if h["closed"] is None else f"{h['closed']:,}"
            spans = h["read_s"] is not None and h["stage_s"] is not None
            other = h["wall_s"] - h["commit"] - (h["read_s"] + h["stage_s"] if spans else 0)
            hakiri = [
                seconds(h["wall_s"]),
                seconds(h["read_s"]),
                seconds(h["stage_s"]) if spans else f"{seconds(h['read_stage'])} (with read)",
                seconds(h["commit"]),
                seconds(other),
                f"{h['rows']:,} / {closed}",
            ]
        else:
            failed = hakiri_error is not None and batch is first_failed(batches)
            hakiri = ["failed" if failed else "-", "-", "-", "-", "-", "-"]
        hand = [seconds(d["copy_s"] + d["merge_s"]), seconds(d["copy_s"]), seconds(d["merge_s"])]
        if batch.diff is None:
            equal = "-"
        elif not any(batch.diff):
            equal = "yes"
        else:
            equal = f"NO: {batch.diff[0]:,} rows only in hakiri's, {batch.diff[1]:,} only in hand"
        cells = [label, f"{s.keys:,}", versions, *hakiri, *hand, equal]
        print(f"| {' | '.join(cells)} |")
    print()
    print(
        "hakiri: JVM start + read = the span hakiri.read (SparkSession start, the read's plan); "
        "stage = hakiri.stage (Spark reads the CSV, writes the staging table); commit = the "
        "destination transaction (the scd2 merge); other = the rest of the process (interpreter, "
        "plan, catalog, table DDL, exit). Hand SQL: COPY FROM STDIN into an UNLOGGED table, "
        "then ANALYZE + UPDATE + INSERT in one transaction."
    )
    follow = [b for b in batches[1:] if b.hakiri]
    if follow:
        mean = {k: sum(b.hakiri[k] for b in follow) / len(follow) for k in ("wall_s", "commit")}
        hand = {k: sum(b.hand[k] for b in follow) / len(follow) for k in ("copy_s", "merge_s")}
        print(
            f"follow-up batches, mean: hakiri apply {mean['wall_s']:.1f} s, of which commit "
            f"{mean['commit']:.2f} s; hand SQL {hand['copy_s'] + hand['merge_s']:.2f} s, of "
            f"which merge {hand['merge_s']:.2f} s; hakiri commit / hand merge = "
            f"{mean['commit'] / hand['merge_s']:.1f}, hakiri apply / hand SQL = "
            f"{mean['wall_s'] / (hand['copy_s'] + hand['merge_s']):.1f}"
        )
    if batches[0].hakiri:
        print(f"hakiri's history: {table_shape(url, HAKIRI_SCHEMA)}")
    print(f"hand history:     {table_shape(url, HAND_SCHEMA)}")
    for batch in batches:
        for problem in batch.problems:
            print(f"MISMATCH at batch {batch.snapshot.number}: {problem}")
    if hakiri_error:
        print(f"\nhakiri failed at {hakiri_error}")
    machine["load_average_end"] = os.getloadavg()[0]
    print(f"{machine['line']}; load average {machine['load_average_end']:.2f} at the end")


def first_failed(batches: list[Batch]) -> Batch | None:
    return next((b for b in batches if not b.hakiri), None)


def write_json(
    target: Path,
    batches: list[Batch],
    args: argparse.Namespace,
    machine: dict[str, Any],
    hakiri_error: str | None,
) -> None:
    document = {
        "benchmark": "bench/scd2.py",
        "args": {k: str(v) for k, v in vars(args).items()},
        "machine": {k: v for k, v in machine.items() if k != "line"},
        "hakiri_error": hakiri_error,
        "batches": [
            {
                "batch": b.snapshot.number,
                "at": b.snapshot.at.isoformat(),
                "rows": b.snapshot.keys,
                "updated": b.snapshot.updated,
                "deleted": b.snapshot.deleted,
                "returning": b.snapshot.returning,
                "new": b.snapshot.new,
                "hakiri": b.hakiri,
                "hand": b.hand,
                "diff": b.diff,
                "problems": b.problems,
            }
            for b in batches
        ],
    }
    target.write_text(json.dumps(document, indent=2) + "\n")
    print(f"results written to {target}")


if __name__ == "__main__":
    main()
