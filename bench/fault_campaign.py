"""A randomized fault-injection campaign for hakiri's exactly-once promise (run by hand).

For each run, one small project with one pipeline (a destination x load mode x source,
rotated over the 2 x 7 x 2 combinations) goes through a seeded sequence of steps: the
source changes (new files, edits of pending, failed or loaded files, deletes, malformed
records; for a PostgreSQL table, inserts, updates and deletes of rows) and applies, some
of them under a fault: the destination refuses connections, the apply is SIGKILLed at a
random instant, every PostgreSQL connection is cut mid-load, or the disk under the
context store is full. After every step the model (tests/support/load_model.py) says what
the target may hold; the first difference stops the campaign with a reproduction (seed,
steps, a replay file) and a shrunk step list.

    PYTHONPATH=src:. .venv/bin/python bench/fault_campaign.py --runs 200 --seed 1
    ... --only postgres/append/files        (fnmatch patterns: 'context/*/table')
    ... --replay /tmp/hakiri-campaign-…/repro-run17.json      (replays, then shrinks)
    ... --keep-going                        (each run stops at its first difference)

Most applies run in this process through the real CLI (Typer's CliRunner) on one warm
SparkSession; a SIGKILL step runs `python -m hakiri.cli.main apply` in a process group of
its own and kills the group (and any Python worker that left it). Needs root (tmpfs mounts
for the disk-full fault) and the PostgreSQL server binaries (tests/support/postgres.py).

The faults: `refuse` closes the proxy's listening socket for one apply (PostgreSQL
destination) or remounts the context store read-only; `kill` SIGKILLs a subprocess apply
either at a uniform instant of its calibrated duration or after its first batch claim, at a
uniform instant of the rest; `cut` resets every proxied connection at a uniform instant, or
within 50 ms of the k-th connection the apply opens; `disk_full` fills the store's 8 MiB
tmpfs with a ballast file for one apply. After a fault the model allows any state a run
could have been cut off in (see load_model.py); after a plain apply, exactly one.

Steps are generated from the seed alone (never from hakiri's answers), so a step list
replays on its own. Files hold ids `k`*1000 + 0..5 for file `k`, unique in a file; every
version carries a unique `# rev` comment line, so no two versions share bytes (a content
seen before would be a batch id seen before, which is not what these steps test).
"""

from __future__ import annotations

import argparse
import contextlib
import errno
import faulthandler
import fnmatch
import json
import math
import os
import random
import re
import shutil
import signal
import sqlite3
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import uuid
from collections import Counter
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
for entry in (str(REPO), str(REPO / "src")):
    if entry not in sys.path:
        sys.path.insert(0, entry)

from tests.support.load_model import (  # noqa: E402
    COLUMNS,
    MODES,
    FileVersion,
    LoadModel,
    Row,
    State,
    canonical_history,
    canonical_rows,
    describe_difference,
)

DESTINATIONS = ("postgres", "context")
SOURCES = ("files", "table")
# Interleaved so that consecutive runs change destination, source and mode.
COMBOS = [(d, m, s) for m in MODES for s in SOURCES for d in DESTINATIONS]

FILE_STEPS = ("new_file", "edit_pending", "edit_loaded", "delete_file", "malformed")
TABLE_STEPS = ("insert_rows", "update_rows", "delete_rows")
APPLY_STEPS = ("apply", "refuse", "kill", "cut", "disk_full")
FAULTS = ("refuse", "kill", "cut", "disk_full")
WEIGHTS = {
    "apply": 20,
    "new_file": 13,
    "edit_pending": 8,
    "edit_loaded": 9,
    "delete_file": 6,
    "malformed": 6,
    "insert_rows": 15,
    "update_rows": 10,
    "delete_rows": 10,
    "refuse": 5,
    "kill": 5,
    "cut": 6,
    "disk_full": 6,
}
# The acceptance bar, per 200 runs (scaled to --runs): at least this many steps of each.
QUOTA_PER_200 = {"kill": 20, "cut": 20, "disk_full": 5}

NAMES = ("ada", "bob", "cy", "dee")
DAYS = ("2026-01-01", "2026-01-02", "2026-01-03", "2026-01-04")
CLOCK0 = datetime(2026, 1, 1, tzinfo=UTC).timestamp()
STORE_SIZE = "8m"
HANG_SECONDS = 240  # an apply that takes longer is reported as a hang (threads dumped)
APPLY_WATCHDOG = 900  # an in-process apply still running then ends the campaign
SUBPROCESS_TIMEOUT = 600

TRACE_PATTERNS = (
    re.compile(r"Traceback \(most recent call last\)"),
    re.compile(r"^\s+at [\w$.<>]+\(.*\)\s*$", re.M),  # a Java stack frame
    re.compile(r"^Caused by: ", re.M),
    re.compile(r"Exception in thread ", re.M),
)


def eligible(kind: str, combo: tuple[str, str, str]) -> bool:
    dest, _, source = combo
    if kind in FILE_STEPS:
        return source == "files"
    if kind in TABLE_STEPS:
        return source == "table"
    if kind == "cut":  # needs a PostgreSQL connection to cut
        return dest == "postgres" or source == "table"
    if kind == "disk_full":
        return dest == "context"
    return True


# ============================================================================ steps


@dataclass
class Step:
    kind: str
    path: str | None = None
    version: FileVersion | None = None
    rows: tuple[Row, ...] = ()
    ids: tuple[int, ...] = ()
    strategy: str | None = None  # kill: uniform | in_load; cut: uniform | on_connection
    u: float = 0.0  # where in its window the fault lands, 0..1

    def to_json(self) -> dict[str, Any]:
        data = asdict(self)
        if self.version is not None:
            data["version"] = {
                "rev": self.version.rev,
                "rows": [list(r) for r in self.version.rows],
                "mtime": self.version.mtime,
            }
        data["rows"] = [list(r) for r in self.rows]
        data["ids"] = list(self.ids)
        return data

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Step:
        version = data.get("version")
        return cls(
            kind=data["kind"],
            path=data.get("path"),
            version=None
            if version is None
            else FileVersion(
                version["rev"], tuple(tuple(r) for r in version["rows"]), version["mtime"]
            ),
            rows=tuple(tuple(r) for r in data.get("rows", ())),
            ids=tuple(data.get("ids", ())),
            strategy=data.get("strategy"),
            u=data.get("u", 0.0),
        )

    def describe(self) -> str:
        if self.version is not None:
            rows = "; ".join(",".join(map(str, r)) for r in self.version.rows)
            return f"{self.kind} {self.path} r{self.version.rev}: {rows}"
        if self.kind == "delete_file":
            return f"delete_file {self.path}"
        if self.rows:
            return f"{self.kind}: " + "; ".join(",".join(map(str, r)) for r in self.rows)
        if self.ids:
            return f"{self.kind}: ids {', '.join(map(str, self.ids))}"
        if self.strategy:
            return f"{self.kind} ({self.strategy}, u={self.u:.2f}) + apply"
        return self.kind + (" + apply" if self.kind in FAULTS else "")


class Generator:
    """The seeded step list of one run. It tracks the source itself (never hakiri's answers),
    so a run's steps depend on its seed only, and a step list replays on its own."""

    def __init__(self, rng: random.Random, combo: tuple[str, str, str], count: int) -> None:
        self.rng, self.combo, self.count = rng, combo, count
        self.files: dict[str, FileVersion] = {}
        self.pending: set[str] = set()  # written since the last apply
        self.failed: set[str] = set()  # holding a malformed record
        self.rev = 0
        self.seq = 0
        self.clock = 0
        self.next_file = 0
        self.table: dict[int, Row] = {}
        self.next_id = 1
        self.last_insert: list[int] = []

    def steps(self, forced: Counter[str]) -> list[Step]:
        kinds: list[str | None] = [None] * self.count
        first = "new_file" if self.combo[2] == "files" else "insert_rows"
        kinds[0], kinds[-1] = first, "apply"
        middle = list(range(1, self.count - 3))
        self.rng.shuffle(middle)
        for kind, n in sorted(forced.items()):
            for _ in range(n):
                if middle:
                    kinds[middle.pop()] = kind
        choices = [k for k in WEIGHTS if eligible(k, self.combo)]
        weights = [WEIGHTS[k] for k in choices]
        changes = [k for k in choices if k not in APPLY_STEPS]
        steps = []
        deferred: list[str] = []  # faults waiting for work to hit
        for position, kind in enumerate(kinds):
            last = position == self.count - 1
            if kind is None and deferred and self._has_work():
                kind = deferred.pop(0)
            chosen = kind or self.rng.choices(choices, weights)[0]
            if chosen in FAULTS and not last and not self._has_work() and self.rng.random() < 0.8:
                # A fault on an apply with nothing to load tests little: change the source
                # first, and inject the fault at the next free position.
                deferred.append(chosen)
                chosen = self.rng.choice(changes)
            steps.append(self._make(chosen))
        return steps

    def _has_work(self) -> bool:
        return bool(self.pending or self.failed)

    # -- one step ------------------------------------------------------------------

    def _make(self, kind: str) -> Step:
        self.clock += 1
        if kind in APPLY_STEPS:
            self.pending.clear()
            step = Step(kind)
            if kind == "kill":
                step.strategy = self.rng.choice(("uniform", "in_load"))
                step.u = round(self.rng.random(), 3)
            elif kind == "cut":
                step.strategy = self.rng.choice(("uniform", "on_connection"))
                step.u = round(self.rng.random(), 3)
            return step
        if kind in TABLE_STEPS:
            self.pending.add("table")
            return self._table_step(kind)
        return self._file_step(kind)

    def _file_step(self, kind: str) -> Step:
        waiting = sorted(self.pending | self.failed)
        loaded = sorted(set(self.files) - self.pending - self.failed)
        path: str | None = None
        if kind == "edit_pending":
            path = self.rng.choice(waiting) if waiting else None
        elif kind == "edit_loaded":
            path = self.rng.choice(loaded) if loaded else None
        elif kind == "delete_file":
            p = self.rng.random()
            if not self.files:
                path = None
            elif waiting and p < 0.4:
                path = self.rng.choice(waiting)
            elif p < 0.7:
                # The newest file: the file set goes back to one loaded before.
                path = max(self.files, key=lambda f: self.files[f].rev)
            else:
                path = self.rng.choice(sorted(self.files))
            if path is not None:
                del self.files[path]
                self.pending.discard(path)
                self.failed.discard(path)
                return Step("delete_file", path=path)
        elif kind == "malformed":
            path = self.rng.choice(sorted(self.files)) if self.files else None
        if path is None:
            if kind != "malformed":
                kind = "new_file"
            path = f"data/f{self.next_file:02d}.csv"
            self.next_file += 1
        previous = self.files.get(path)
        rows = self._file_rows(path, previous.rows if previous else None)
        if kind == "malformed":
            at = self.rng.randrange(len(rows))
            bad = rows[at]
            rows = [*rows[:at], (bad[0], bad[1], bad[2], "x" + bad[3], bad[4]), *rows[at + 1 :]]
            self.failed.add(path)
        else:
            self.failed.discard(path)
        self.rev += 1
        version = FileVersion(self.rev, tuple(rows), CLOCK0 + 60 * self.clock)
        self.files[path] = version
        self.pending.add(path)
        return Step(kind, path=path, version=version)

    def _file_rows(self, path: str, previous: tuple[Row, ...] | None) -> list[Row]:
        number = int(path.removeprefix("data/f").removesuffix(".csv"))
        base = [number * 1000 + j for j in range(6)]
        if previous is None:
            ids = self.rng.sample(base, self.rng.randint(1, 4))
            return [self._row(i) for i in sorted(ids)]
        rows: list[Row] = []
        for r in previous:
            if r[3].startswith("x"):  # a malformed value is fixed by the edit
                r = (r[0], r[1], r[2], r[3][1:], r[4])
            p = self.rng.random()
            if p < 0.5:
                rows.append(r)
            elif p < 0.85:
                rows.append(self._row(r[0], like=r))
        free = [i for i in base if i not in {r[0] for r in rows}]
        for i in self.rng.sample(free, min(len(free), self.rng.randint(0 if rows else 1, 2))):
            rows.append(self._row(i))
        return sorted(rows)

    def _row(self, key: int, like: Row | None = None) -> Row:
        if self.seq > 3 and self.rng.random() < 0.2:
            seq = self.rng.randint(1, self.seq)  # an old value: the watermark filters it
        else:
            self.seq += 1
            seq = self.seq
        name = self.rng.choice(NAMES)
        amount = f"{self.rng.randint(0, 99999) / 100:.2f}"
        day = self.rng.choice(DAYS)
        if like is not None and self.rng.random() < 0.5:
            name, day = like[2], like[4]  # a partial change
        return (key, seq, name, amount, day)

    def _table_step(self, kind: str) -> Step:
        live = sorted(self.table)
        if kind == "update_rows" and live:
            rows = []
            for key in self.rng.sample(live, min(len(live), self.rng.randint(1, 2))):
                self.seq += 1
                old = self.table[key]
                name = self.rng.choice(NAMES) if self.rng.random() < 0.6 else old[2]
                row = (
                    key,
                    self.seq,
                    name,
                    f"{self.rng.randint(0, 99999) / 100:.2f}",
                    self.rng.choice(DAYS),
                )
                rows.append(row)
                self.table[key] = row
            return Step(kind, rows=tuple(rows))
        if kind == "delete_rows" and len(live) > 1:
            last = [k for k in self.last_insert if k in self.table]
            if last and len(last) < len(live) and self.rng.random() < 0.7:
                keys = last  # undo the last insert: the table goes back to a state seen before
            else:
                keys = [self.rng.choice(live)]
            for key in keys:
                del self.table[key]
            return Step(kind, ids=tuple(keys))
        rows = []
        for _ in range(self.rng.randint(1, 3)):
            self.seq += 1
            row = (
                self.next_id,
                self.seq,
                self.rng.choice(NAMES),
                f"{self.rng.randint(0, 99999) / 100:.2f}",
                self.rng.choice(DAYS),
            )
            self.table[self.next_id] = row
            self.next_id += 1
            rows.append(row)
        self.last_insert = [r[0] for r in rows]
        return Step("insert_rows", rows=tuple(rows))


# ============================================================================ results


@dataclass
class ApplyOutcome:
    rc: int | None  # None: killed
    stderr: str = ""
    seconds: float = 0.0
    landed: str | None = None  # kill: during_batch | outside_batch | after_exit
    cut: int | None = None  # cut: connections reset (None: the cut came after the apply)
    exception: str | None = None
    skipped_fault: bool = False
    note: str | None = None


class Difference(Exception):
    def __init__(self, kind: str, step: int, message: str, details: dict[str, Any]) -> None:
        super().__init__(message)
        self.kind, self.step, self.message, self.details = kind, step, message, details


@dataclass
class Stats:
    runs: int = 0
    steps: int = 0
    applies: int = 0
    subprocess_applies: int = 0
    kinds: Counter[str] = field(default_factory=Counter)
    landings: Counter[str] = field(default_factory=Counter)
    cuts_hit: int = 0
    connections_cut: int = 0
    failed_applies: int = 0
    exit_codes: Counter[str] = field(default_factory=Counter)
    skipped_faults: Counter[str] = field(default_factory=Counter)
    combos: Counter[str] = field(default_factory=Counter)
    differences: list[dict[str, Any]] = field(default_factory=list)
    lost: int = 0
    doubled: int = 0
    run_seconds: list[float] = field(default_factory=list)
    max_states: int = 0  # the most states the model had to keep at once (crash ambiguity)
    apply_seconds: dict[str, list[float]] = field(default_factory=dict)


# ============================================================================ the environment


def _mount(*args: str) -> None:
    subprocess.run(["mount", *args], check=True, capture_output=True, text=True)


def _umount(path: Path) -> None:
    done = subprocess.run(["umount", str(path)], capture_output=True, text=True)
    if done.returncode != 0:
        subprocess.run(["umount", "-l", str(path)], capture_output=True, text=True)


def _mounted(path: Path) -> bool:
    target = str(path.resolve())
    with open("/proc/mounts") as mounts:
        return any(line.split()[1] == target for line in mounts)


class Environment:
    """What every run shares: PostgreSQL, the proxy in front of it, the warm SparkSession."""

    def __init__(self, work: Path, *, spark: bool = True) -> None:
        import psycopg
        from tests.support.postgres import TestPostgres
        from tests.support.tcp_proxy import TcpProxy

        self.work = work
        os.environ.setdefault("HAKIRI_COPY_MIN_RUN_BYTES", "0")
        os.environ["HAKIRI_JVM_LOG"] = str(work / "jvm.log")
        os.environ.pop("HAKIRI_CATALOG_URL", None)
        self.pg = TestPostgres().start()
        assert self.pg.port is not None
        self.proxy = TcpProxy("127.0.0.1", self.pg.port).start()
        self.admin = psycopg.connect(self.pg.url, autocommit=True)
        self.spark = _start_spark() if spark else None
        self.token = uuid.uuid4().hex
        # seconds: a whole subprocess apply, and one in-process apply, per destination
        self.sub_seconds = {"postgres": 10.0, "context": 13.0}
        self.inproc_seconds = {"postgres": 2.0, "context": 3.0}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.admin.close()
        with contextlib.suppress(Exception):
            self.proxy.stop()
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
        self.pg.stop()

    def calibrate(self, dests: set[str], stats: Stats) -> None:
        """One clean subprocess apply per destination: how long a whole apply takes."""
        for dest in sorted(dests):
            combo = (dest, "append", "files")
            harness = Harness(self, combo, f"calibrate-{dest}")
            try:
                harness.setup()
                harness.mutate(
                    Step(
                        "new_file",
                        "data/f00.csv",
                        FileVersion(1, ((1, 1, "ada", "1.00", DAYS[0]),), CLOCK0),
                    )
                )
                outcome = harness.apply_subprocess(Step("kill", strategy="uniform", u=10.0))
                if outcome.rc == 0:
                    self.sub_seconds[dest] = outcome.seconds
                print(
                    f"calibrate: a subprocess apply into {dest} takes {outcome.seconds:.1f}s (exit {outcome.rc})",
                    file=sys.stderr,
                )
            finally:
                harness.teardown(keep=False)

    def learn(self, table: dict[str, float], dest: str, seconds: float) -> None:
        table[dest] = 0.7 * table[dest] + 0.3 * seconds


def _start_spark() -> Any:
    """The one warm SparkSession, made as tests/conftest.py's `spark` fixture makes it."""
    from hakiri.spark.delta import delta_jars, with_delta_conf
    from hakiri.spark.session import build_spark_session, resolve_jdbc_jars

    driver = resolve_jdbc_jars(None)
    jars = [*driver.jars, *delta_jars(())]
    conf = with_delta_conf(
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        }
    )
    return build_spark_session(master="local[2]", conf=conf, jars=jars, app_name="hakiri-campaign")


# ============================================================================ one run's project


class Harness:
    """One project, one pipeline `p`, one target table `t`: source changes, applies under
    faults, and the target read back."""

    def __init__(self, env: Environment, combo: tuple[str, str, str], label: str) -> None:
        self.env, self.combo, self.label = env, combo, label
        self.dest, self.mode, self.source = combo
        self.root = env.work / f"run-{label}"
        self.store = self.root / "store"
        suffix = uuid.uuid4().hex[:10]
        self.schema = f"cmp_{suffix}"
        self.source_schema = f"src_{suffix}"
        self.files: dict[str, FileVersion] = {}
        self.table: dict[int, Row] = {}
        self.mounted = False
        self.connections = 4.0  # PostgreSQL connections an apply with work opens (learnt)

    # -- lifecycle ------------------------------------------------------------

    def setup(self) -> None:
        if self.root.exists():
            shutil.rmtree(self.root)
        (self.root / "data").mkdir(parents=True)
        self.store.mkdir()
        if self.dest == "context":
            _mount("-t", "tmpfs", "-o", f"size={STORE_SIZE}", "tmpfs", str(self.store))
            self.mounted = True
        from psycopg import sql

        admin = self.env.admin
        if self.dest == "postgres":
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.schema)))
        if self.source == "table":
            admin.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(self.source_schema)))
            admin.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigint PRIMARY KEY, seq bigint NOT NULL, name text, "
                    "amount numeric(10,2), day date)"
                ).format(sql.Identifier(self.source_schema, "src"))
            )
        (self.root / "hakiri.toml").write_text(self._manifest())

    def teardown(self, keep: bool) -> None:
        from psycopg import sql

        for schema in (self.schema, self.source_schema):
            with contextlib.suppress(Exception):
                self.env.admin.execute(
                    sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema))
                )
        if self.mounted:
            if keep:  # keep the Delta table for inspection: copy it off the tmpfs
                with contextlib.suppress(Exception):
                    shutil.copytree(self.store, self.root / "store-copy", dirs_exist_ok=True)
            for _ in range(5):  # the tmpfs, and a read-only bind over it a crash left behind
                if not _mounted(self.store):
                    break
                _umount(self.store)
            self.mounted = False
        if not keep:
            shutil.rmtree(self.root, ignore_errors=True)

    def _manifest(self) -> str:
        columns = '{ id = "bigint", seq = "bigint", name = "string", amount = "decimal(10,2)", day = "date" }'
        if self.source == "files":
            source = f'{{ connector = "files", config = {{ path = "data/*.csv", comment = "#", columns = {columns} }} }}'
            tables = '[{ name = "t" }]'
        else:
            source = f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{self.source_schema}" }} }}'
            cursor = ', incremental = "seq"' if self.mode in ("append", "upsert") else ""
            tables = f'[{{ name = "src", target = "t"{cursor} }}]'
        destination = (
            f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{self.schema}" }} }}'
            if self.dest == "postgres"
            else '{ connector = "context" }'
        )
        load = {
            "append": '{ mode = "append" }',
            "upsert": '{ mode = "upsert", upsert_key = ["id"] }',
            "truncate": '{ mode = "truncate" }',
            "blue_green": '{ mode = "blue_green" }',
            "incremental_watermark": '{ mode = "incremental_watermark", watermark_column = "seq" }',
            "scd2": '{ mode = "scd2", key = ["id"], deletes = "ignore" }'
            if self.source == "files"
            else '{ mode = "scd2", key = ["id"], max_delete_fraction = 1.0 }',
            "replace_window": '{ mode = "replace_window", window_column = "day", window = "values" }',
        }[self.mode]
        return textwrap.dedent(f"""\
            [project]
            name = "campaign"

            [spark]
            master = "local[1]"
            # The SIGKILL steps' short-lived JVMs (in-process applies reuse the warm session).
            conf = {{ "spark.driver.extraJavaOptions" = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", "spark.ui.enabled" = "false" }}

            [context]
            path = "{self.store}"

            [connections.wh]
            type = "postgres"
            url = "postgresql://postgres@127.0.0.1:{self.env.proxy.port}/hakiri_test"

            [[pipeline]]
            id = "p"
            source = {source}
            tables = {tables}
            destination = {destination}
            load = {load}
            """)

    # -- the source -------------------------------------------------------------

    def view(self) -> dict[Any, Any]:
        return dict(self.files) if self.source == "files" else dict(self.table)

    def mutate(self, step: Step) -> None:
        if step.kind == "delete_file":
            assert step.path is not None
            (self.root / step.path).unlink(missing_ok=True)
            self.files.pop(step.path, None)
            return
        if step.version is not None:
            assert step.path is not None
            path = self.root / step.path
            path.write_text(step.version.text())
            os.utime(path, (step.version.mtime, step.version.mtime))
            self.files[step.path] = step.version
            return
        from psycopg import sql

        src = sql.Identifier(self.source_schema, "src")
        admin = self.env.admin
        if step.kind == "insert_rows":
            for row in step.rows:
                inserted = admin.execute(
                    sql.SQL(
                        "INSERT INTO {} VALUES (%s, %s, %s, %s, %s) ON CONFLICT (id) DO NOTHING RETURNING id"
                    ).format(src),
                    row,
                ).fetchone()
                if inserted:
                    self.table[row[0]] = row
        elif step.kind == "update_rows":
            for row in step.rows:
                updated = admin.execute(
                    sql.SQL(
                        "UPDATE {} SET seq = %s, name = %s, amount = %s, day = %s WHERE id = %s RETURNING id"
                    ).format(src),
                    (*row[1:], row[0]),
                ).fetchone()
                if updated:
                    self.table[row[0]] = row
        elif step.kind == "delete_rows":
            for key in step.ids:
                admin.execute(sql.SQL("DELETE FROM {} WHERE id = %s").format(src), (key,))
                self.table.pop(key, None)
        else:
            raise ValueError(step.kind)

    # -- the target -------------------------------------------------------------

    def target(self) -> tuple[Any, list[str]]:
        """The target in the model's form, and (scd2) problems of its validity columns."""
        scd2 = self.mode == "scd2"
        columns = [*COLUMNS, *(("valid_from", "valid_to", "is_current") if scd2 else ())]
        records = (
            self._pg_records(columns) if self.dest == "postgres" else self._delta_records(columns)
        )
        if scd2:
            return canonical_history(records)
        return canonical_rows(records), []

    def _pg_records(self, columns: list[str]) -> list[dict[str, Any]]:
        from psycopg import sql

        admin = self.env.admin
        exists = admin.execute("SELECT to_regclass(%s)", [f'"{self.schema}"."t"']).fetchone()
        if not exists or exists[0] is None:
            return []
        cursor = admin.execute(
            sql.SQL("SELECT {} FROM {}").format(
                sql.SQL(", ").join(map(sql.Identifier, columns)), sql.Identifier(self.schema, "t")
            )
        )
        return [dict(zip(columns, row, strict=True)) for row in cursor.fetchall()]

    def _delta_records(self, columns: list[str]) -> list[dict[str, Any]]:
        from deltalake import DeltaTable
        from deltalake.exceptions import TableNotFoundError

        path = self.store / "t"
        if not (path / "_delta_log").is_dir():
            return []
        try:
            return DeltaTable(str(path)).to_pyarrow_table(columns=columns).to_pylist()
        except TableNotFoundError:
            return []

    # -- applies ------------------------------------------------------------------

    def apply(self, step: Step) -> ApplyOutcome:
        if step.kind == "kill":
            return self.apply_subprocess(step)
        if step.kind == "cut":
            return self._apply_with_cut(step)
        if step.kind == "refuse":
            return self._apply_refused()
        if step.kind == "disk_full":
            return self._apply_disk_full()
        return self.apply_inprocess()

    def apply_inprocess(self) -> ApplyOutcome:
        from typer.testing import CliRunner

        from hakiri.cli.main import app

        started = time.monotonic()
        accepted = self.env.proxy.accepted
        hang_log = open(self.root / "hang.log", "w")  # noqa: SIM115 (faulthandler writes to it)
        faulthandler.dump_traceback_later(HANG_SECONDS, exit=False, file=hang_log)
        watchdog = threading.Timer(APPLY_WATCHDOG, self._give_up)
        watchdog.daemon = True
        watchdog.start()
        try:
            result = CliRunner().invoke(app, ["apply", "--project", str(self.root)])
        finally:
            faulthandler.cancel_dump_traceback_later()
            watchdog.cancel()
            hang_log.close()
        seconds = time.monotonic() - started
        opened = self.env.proxy.accepted - accepted
        if opened > 1 and result.exit_code == 0:
            self.connections = 0.5 * self.connections + 0.5 * opened
        exception = None
        if result.exception is not None and not isinstance(result.exception, SystemExit):
            import traceback

            exception = "".join(
                traceback.format_exception(
                    type(result.exception), result.exception, result.exception.__traceback__
                )
            )
        return ApplyOutcome(result.exit_code, result.stderr, seconds, exception=exception)

    def _give_up(self) -> None:
        """An in-process apply that never returns: dump every thread, clean up, exit."""
        print(f"\ncampaign: an apply of {self.root} hangs; giving up", file=sys.stderr, flush=True)
        faulthandler.dump_traceback(file=sys.stderr)
        with contextlib.suppress(Exception):
            self.teardown(keep=True)
        with contextlib.suppress(Exception):
            self.env.close()
        os._exit(3)

    def _apply_refused(self) -> ApplyOutcome:
        if self.dest == "postgres":
            self.env.proxy.refuse()
            try:
                return self.apply_inprocess()
            finally:
                self.env.proxy.accept()
        # The context store "refuses" as a read-only file system: a read-only bind mount
        # over it for one apply (a bind can be made read-only even while a file under the
        # store is still open for writing, which a remount of the tmpfs itself refuses).
        store = str(self.store)
        bound = subprocess.run(["mount", "--bind", store, store], capture_output=True, text=True)
        readonly = bound.returncode == 0 and (
            subprocess.run(
                ["mount", "-o", "remount,bind,ro", store], capture_output=True, text=True
            ).returncode
            == 0
        )
        try:
            if not readonly:
                outcome = self.apply_inprocess()
                outcome.skipped_fault = True
                outcome.note = f"no read-only bind mount: {bound.stderr.strip()}"
                return outcome
            return self.apply_inprocess()
        finally:
            if bound.returncode == 0:
                subprocess.run(["umount", store], check=True, capture_output=True)

    def _open_in_store(self) -> list[str]:
        """Files under the store some process holds open (why a remount may be refused)."""
        found = []
        for fd in Path("/proc").glob("[0-9]*/fd/*"):
            with contextlib.suppress(OSError):
                target = os.readlink(fd)
                if target.startswith(str(self.store)):
                    found.append(f"{fd.parts[2]}:{target}")
        return found[:5]

    def _apply_disk_full(self) -> ApplyOutcome:
        ballast = self.store / ".ballast"
        with open(ballast, "wb") as sink:
            block = b"\0" * (1 << 16)
            try:
                while True:
                    sink.write(block)
                    sink.flush()
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        # byte-sized leftovers too, so not even a small file fits
        with contextlib.suppress(OSError), open(ballast, "ab", buffering=0) as sink:
            while sink.write(b"\0" * 512):
                pass
        try:
            outcome = self.apply_inprocess()
        finally:
            ballast.unlink()
        held = self._open_in_store()
        if held:  # a file the failed write left open: its space is not given back
            outcome.note = f"still open under the store: {held}"
        return outcome

    def _apply_with_cut(self, step: Step) -> ApplyOutcome:
        proxy = self.env.proxy
        window = self.env.inproc_seconds[self.dest]
        stop = threading.Event()
        cut: list[int] = []

        base = proxy.accepted

        def cutter() -> None:
            if step.strategy == "on_connection":
                # The k-th connection this apply opens, k uniform over the connections an
                # apply of this run opens, cut within 50 ms of it.
                n = max(1, round(self.connections))
                k = 1 + min(n - 1, int(step.u * n))
                while not stop.is_set() and not proxy.wait_for_accepted(base + k, 0.05):
                    pass
                delay = (step.u * n % 1) * 0.05
            else:
                delay = step.u * window
            if stop.wait(delay):
                return
            cut.append(proxy.cut())

        thread = threading.Thread(target=cutter, name="campaign-cutter", daemon=True)
        thread.start()
        try:
            outcome = self.apply_inprocess()
        finally:
            stop.set()
            thread.join()
        outcome.cut = cut[0] if cut else None
        return outcome

    def apply_subprocess(self, step: Step) -> ApplyOutcome:
        """`hakiri apply` in a process group of its own, SIGKILLed at a random instant."""
        env = {
            **os.environ,
            "PYTHONPATH": os.pathsep.join([str(REPO / "src"), str(REPO)]),
            "HAKIRI_COPY_MIN_RUN_BYTES": "0",
            "HAKIRI_CAMPAIGN_TOKEN": self.env.token,
        }
        stderr_path = self.root / "subprocess.stderr"
        started = time.monotonic()
        with open(stderr_path, "w") as stderr:
            proc = subprocess.Popen(
                [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(self.root)],
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=stderr,
                start_new_session=True,
                cwd=self.root,
            )
            try:
                delay = self._kill_delay(step, proc)
                with contextlib.suppress(subprocess.TimeoutExpired):
                    proc.wait(timeout=max(0.0, delay))
                landed = None
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                    rc = None
                else:
                    rc = proc.returncode
                    landed = "after_exit"
            finally:
                if proc.poll() is None:
                    with contextlib.suppress(ProcessLookupError):
                        os.killpg(proc.pid, signal.SIGKILL)
                    proc.wait()
                self._reap_stragglers()
        seconds = time.monotonic() - started
        if rc is None:
            landed = "during_batch" if self._processing_batches() else "outside_batch"
        else:
            self.env.learn(self.env.sub_seconds, self.dest, seconds)
        return ApplyOutcome(rc, stderr_path.read_text(errors="replace"), seconds, landed=landed)

    def _kill_delay(self, step: Step, proc: subprocess.Popen[Any]) -> float:
        """Seconds to wait before the SIGKILL (counted from now)."""
        if step.strategy != "in_load":
            return step.u * self.env.sub_seconds[self.dest]
        # Wait for a batch to be claimed, then land somewhere in the rest of the apply (Spark
        # starts inside the first batch: the claim comes before the JVM does).
        started = time.monotonic()
        whole = self.env.sub_seconds[self.dest]
        while time.monotonic() < started + 3 * whole and proc.poll() is None:
            if self._processing_batches():
                break
            time.sleep(0.05)
        left = whole - (time.monotonic() - started)
        return step.u * max(left, self.env.inproc_seconds[self.dest])

    def _processing_batches(self) -> int:
        path = self.root / ".hakiri" / "state.sqlite"
        if not path.exists():
            return 0
        try:
            with contextlib.closing(
                sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=1)
            ) as db:
                return int(
                    db.execute(
                        "SELECT count(*) FROM batches WHERE status = 'processing'"
                    ).fetchone()[0]
                )
        except sqlite3.Error:
            return 0

    def _reap_stragglers(self) -> None:
        """Kill what the apply started and that left its process group (PySpark's daemon calls
        setpgid): every process whose environment carries this campaign's token."""
        marker = f"HAKIRI_CAMPAIGN_TOKEN={self.env.token}".encode()
        for _ in range(20):
            found = []
            for entry in Path("/proc").iterdir():
                if not entry.name.isdigit() or int(entry.name) == os.getpid():
                    continue
                try:
                    environ = (entry / "environ").read_bytes()
                except OSError:
                    continue
                if marker in environ.split(b"\0"):
                    found.append(int(entry.name))
            if not found:
                return
            for pid in found:
                with contextlib.suppress(ProcessLookupError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.1)


# ============================================================================ checking


def stderr_problems(outcome: ApplyOutcome) -> list[str]:
    """A finished apply's stderr: no traceback, and a failure says `error: …` then `hint: …`."""
    problems = []
    if outcome.exception:
        problems.append(
            f"an exception escaped the CLI: {outcome.exception.strip().splitlines()[-1]}"
        )
    text = outcome.stderr
    for pattern in TRACE_PATTERNS:
        if pattern.search(text):
            problems.append(f"stderr holds a traceback ({pattern.pattern!r})")
    if "internal error:" in text:
        problems.append("stderr reports an internal error (not a HakiriError)")
    if outcome.rc == 1:
        lines = text.splitlines()
        at = next((i for i, line in enumerate(lines) if line.startswith("error:")), None)
        if at is None:
            problems.append("exit 1 without an `error:` line")
        elif at + 1 >= len(lines) or not lines[at + 1].strip().startswith("hint:"):
            problems.append("the `error:` line is not followed by a `hint:` line (one line each)")
    return problems


def error_line(stderr: str) -> str:
    lines = stderr.splitlines()
    found = [line for line in lines if line.startswith("error:")]
    return found[-1] if found else (lines[-1] if lines else "")


def closest(mode: str, states: set[State], actual: Any) -> tuple[Any, dict[str, Any]]:
    """The model target nearest to `actual`, and how `actual` differs from it."""
    best: tuple[int, Any, dict[str, Any]] | None = None
    for target in {s.target(mode) for s in states}:
        diff = describe_difference(mode, target, actual)
        size = _size(diff)
        if best is None or size < best[0]:
            best = (size, target, diff)
    assert best is not None
    return best[1], best[2]


def _size(diff: dict[str, Any]) -> int:
    if "keys" in diff:
        return len(diff["keys"])
    return len(diff["lost"]) + len(diff["extra"])


# ============================================================================ one run


@dataclass
class RunResult:
    difference: Difference | None
    seconds: float
    log: list[str]


def execute(
    env: Environment,
    combo: tuple[str, str, str],
    steps: list[Step],
    label: str,
    stats: Stats | None,
    *,
    verbose: bool = False,
    keep: bool = False,
) -> RunResult:
    """Run `steps` on a fresh project; stop at the first difference from the model."""
    dest, mode, source = combo
    model = LoadModel(mode, source)
    harness = Harness(env, combo, label)
    log: list[str] = []
    started = time.monotonic()
    difference: Difference | None = None

    def note(text: str) -> None:
        log.append(text)
        if verbose:
            print(f"  [{label}] {text}", file=sys.stderr, flush=True)

    harness.setup()
    try:
        for index, step in enumerate(steps):
            if stats is not None:
                stats.steps += 1
                stats.kinds[step.kind] += 1
            if step.kind not in APPLY_STEPS:
                harness.mutate(step)
                note(f"{index + 1:2d}. {step.describe()}")
                actual, problems = harness.target()
                narrowed = model.narrow(model.states, actual)
                if not narrowed or problems:
                    raise _target_difference(
                        model, index, step, actual, problems, model.states, "after a source change"
                    )
                model.settle(narrowed)
                continue
            view = harness.view()
            allowed = model.expect(view, None if step.kind == "apply" else "crash")
            outcome = harness.apply(step)
            _count(stats, step, outcome, dest)
            if outcome.rc is not None and step.kind != "kill":
                env.learn(env.inproc_seconds, dest, outcome.seconds)
            note(
                f"{index + 1:2d}. {step.describe()} -> "
                + ("killed" if outcome.rc is None else f"exit {outcome.rc}")
                + (f" [{outcome.landed}]" if outcome.landed else "")
                + (f" [cut {outcome.cut}]" if step.kind == "cut" else "")
                + f" in {outcome.seconds:.1f}s"
                + (f": {error_line(outcome.stderr)}" if outcome.rc == 1 else "")
                + (f" ({outcome.note})" if outcome.note else "")
            )
            problems = stderr_problems(outcome) if outcome.rc is not None else []
            if outcome.seconds > HANG_SECONDS:
                hang = (harness.root / "hang.log").read_text(errors="replace")
                raise Difference(
                    "hang",
                    index,
                    f"step {index + 1} ({step.kind}): the apply took {outcome.seconds:.0f}s "
                    f"(exit {outcome.rc}): {error_line(outcome.stderr)}",
                    {"threads": hang[-4000:]},
                )
            candidates = (
                allowed[0] | allowed[1] if outcome.rc is None else allowed.get(outcome.rc, set())
            )
            actual, validity = harness.target()
            if not candidates:
                expected = sorted(code for code, states in allowed.items() if states)
                raise Difference(
                    "exit",
                    index,
                    f"step {index + 1} ({step.kind}): apply exited {outcome.rc}, the model expects exit "
                    f"{' or '.join(map(str, expected))}",
                    {
                        "stderr": error_line(outcome.stderr),
                        "model_reasons": sorted(
                            {r.failure for r in model.runs(view) if r.failure}
                            or {"(none: every batch loads)"}
                        ),
                        **_diff_details(model, allowed[0] | allowed[1], actual),
                    },
                )
            narrowed = model.narrow(candidates, actual)
            if not narrowed or validity:
                raise _target_difference(
                    model, index, step, actual, validity, candidates, f"after {step.kind}"
                )
            model.settle(narrowed)
            if stats is not None:
                stats.max_states = max(stats.max_states, len(narrowed))
            if problems:
                raise Difference(
                    "stderr",
                    index,
                    f"step {index + 1} ({step.kind}): " + "; ".join(problems),
                    {"stderr": outcome.stderr[-3000:], "exception": outcome.exception},
                )
    except Difference as found:
        difference = found
    finally:
        harness.teardown(keep=keep or difference is not None)
    if difference is not None:
        difference.details["project"] = str(harness.root)
    return RunResult(difference, time.monotonic() - started, log)


def _diff_details(model: LoadModel, states: set[State], actual: Any) -> dict[str, Any]:
    if not states:
        return {}
    expected, diff = closest(model.mode, states, actual)
    return {"model_target": expected, "target": actual, "diff": diff}


def _target_difference(
    model: LoadModel,
    index: int,
    step: Step,
    actual: Any,
    validity: list[str],
    states: set[State],
    when: str,
) -> Difference:
    details = _diff_details(model, states, actual)
    if validity:
        details["validity"] = validity
    diff = details.get("diff", {})
    if "keys" in diff:
        summary = f"{len(diff['keys'])} key(s) differ"
    else:
        summary = f"lost {len(diff.get('lost', []))}, doubled {len(diff.get('doubled', []))}, unexpected {len(diff.get('extra', [])) - len(diff.get('doubled', []))}"
    if validity and not diff.get("lost") and not diff.get("extra") and not diff.get("keys"):
        summary = "; ".join(validity[:3])
    return Difference(
        "target",
        index,
        f"step {index + 1} ({step.kind}) {when}: the target is none of the {len({s.target(model.mode) for s in states})} "
        f"the model allows ({summary})",
        details,
    )


def _count(stats: Stats | None, step: Step, outcome: ApplyOutcome, dest: str) -> None:
    if stats is None:
        return
    stats.applies += 1
    stats.apply_seconds.setdefault(step.kind, []).append(outcome.seconds)
    if step.kind == "kill":
        stats.subprocess_applies += 1
        stats.landings[outcome.landed or "?"] += 1
    if step.kind == "cut" and outcome.cut:
        stats.cuts_hit += 1
        stats.connections_cut += outcome.cut
    if outcome.skipped_fault:
        stats.skipped_faults[step.kind] += 1
    stats.exit_codes[f"{step.kind}:{'killed' if outcome.rc is None else outcome.rc}"] += 1
    if outcome.rc == 1:
        stats.failed_applies += 1


# ============================================================================ shrinking


def shrink(
    env: Environment,
    combo: tuple[str, str, str],
    steps: list[Step],
    found: Difference,
    budget: float,
    verbose: bool,
) -> tuple[list[Step], Difference]:
    """Drop steps while a difference of the same signature persists (greedy, last first)."""
    best, best_found = steps[: found.step + 1], found
    deadline = time.monotonic() + budget
    attempt = 0
    changed = True
    while changed and time.monotonic() < deadline:
        changed = False
        for i in reversed(range(len(best) - 1)):
            if time.monotonic() >= deadline:
                break
            trial = best[:i] + best[i + 1 :]
            attempt += 1
            result = execute(env, combo, trial, f"shrink-{attempt}", None, verbose=False)
            if result.difference is not None and _signature(result.difference) == _signature(found):
                if best_found is not found:  # keep only the smallest reproduction's project
                    shutil.rmtree(best_found.details.get("project", ""), ignore_errors=True)
                best, best_found = trial[: result.difference.step + 1], result.difference
                if verbose:
                    print(
                        f"  shrink: {len(best)} step(s) still differ", file=sys.stderr, flush=True
                    )
                changed = True
                break
            shutil.rmtree(env.work / f"run-shrink-{attempt}", ignore_errors=True)
    return best, best_found


def _signature(found: Difference) -> tuple[str, ...]:
    """What a shrunk reproduction must keep: the kind of difference, and for a target which
    of lost / doubled / unexpected rows (or differing scd2 keys) it shows."""
    diff = found.details.get("diff") or {}
    if found.kind != "target":
        return (found.kind,)
    if "keys" in diff:
        return ("target", "keys")
    doubled = Counter(diff.get("doubled", []))
    unexpected = Counter(diff.get("extra", [])) - doubled
    shown = [
        name
        for name, rows in (
            ("lost", diff.get("lost")),
            ("doubled", doubled),
            ("unexpected", unexpected),
        )
        if rows
    ]
    return ("target", *shown)


# ============================================================================ reporting


def report_difference(
    found: Difference,
    combo: tuple[str, str, str],
    steps: list[Step],
    seed: Any,
    repro: Path,
    title: str,
) -> None:
    out = sys.stdout
    print(f"\n=== {title}: {'/'.join(combo)} (seed {seed})", file=out)
    print(f"difference ({found.kind}): {found.message}", file=out)
    for key in ("stderr", "model_reasons", "validity", "exception", "threads"):
        if found.details.get(key):
            print(f"  {key}: {_short(found.details[key], 2500)}", file=out)
    diff = found.details.get("diff")
    if diff:
        if "keys" in diff:
            for key, both in list(diff["keys"].items())[:10]:
                print(f"  id {key}: model {both['model']}  target {both['target']}", file=out)
        else:
            unexpected = list(
                (Counter(diff.get("extra", [])) - Counter(diff.get("doubled", []))).elements()
            )
            for label, rows in (
                ("lost", diff.get("lost")),
                ("doubled", diff.get("doubled")),
                ("unexpected", unexpected),
            ):
                if rows:
                    print(f"  {label}: {rows[:12]}", file=out)
        print(f"  model target : {_short(found.details.get('model_target'))}", file=out)
        print(f"  actual target: {_short(found.details.get('target'))}", file=out)
    print("steps:", file=out)
    for i, step in enumerate(steps):
        marker = "  <-- differs here" if i == found.step else ""
        print(f"  {i + 1:2d}. {step.describe()}{marker}", file=out)
    print(f"replay: {sys.executable} {Path(__file__).relative_to(REPO)} --replay {repro}", file=out)
    if found.details.get("project"):
        print(f"project kept at {found.details['project']}", file=out)
    out.flush()


def _short(value: Any, limit: int = 900) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[:limit] + "…"


def write_repro(
    path: Path, combo: tuple[str, str, str], steps: list[Step], seed: Any, found: Difference | None
) -> None:
    path.write_text(
        json.dumps(
            {
                "combo": list(combo),
                "seed": seed,
                "difference": None
                if found is None
                else {"kind": found.kind, "step": found.step, "message": found.message},
                "steps": [s.to_json() for s in steps],
            },
            indent=1,
        )
    )


def summary(stats: Stats, wall: float, runs: int) -> None:
    out = sys.stdout
    print("\n=== summary", file=out)
    print(
        f"runs {stats.runs}, steps {stats.steps}, applies {stats.applies} "
        f"({stats.subprocess_applies} in a subprocess), wall time {wall:.0f}s",
        file=out,
    )
    if stats.run_seconds:
        mean = sum(stats.run_seconds) / len(stats.run_seconds)
        print(
            f"per run: mean {mean:.1f}s, max {max(stats.run_seconds):.1f}s; projected for 200 runs: "
            f"{200 * mean / 60:.0f} min",
            file=out,
        )
    kinds = ", ".join(
        f"{k} {stats.kinds[k]}" for k in [*FILE_STEPS, *TABLE_STEPS, *APPLY_STEPS] if stats.kinds[k]
    )
    print(f"steps by kind: {kinds}", file=out)
    print(
        f"SIGKILLs at random instants: {stats.kinds['kill']} "
        f"(landed during a batch {stats.landings['during_batch']}, outside a batch "
        f"{stats.landings['outside_batch']}, after the apply ended {stats.landings['after_exit']})",
        file=out,
    )
    print(
        f"dropped connections: {stats.kinds['cut']} cut steps, {stats.cuts_hit} hit an open connection "
        f"({stats.connections_cut} connections reset)",
        file=out,
    )
    print(
        f"full disks: {stats.kinds['disk_full']}; refused connections: {stats.kinds['refuse']}; "
        f"malformed records: {stats.kinds['malformed']}; edits: {stats.kinds['edit_pending'] + stats.kinds['edit_loaded']} "
        f"(pending/failed {stats.kinds['edit_pending']}, loaded {stats.kinds['edit_loaded']}); "
        f"deletes: {stats.kinds['delete_file']} files, {stats.kinds['delete_rows']} row steps",
        file=out,
    )
    if stats.skipped_faults:
        print(
            f"faults that could not be injected (the apply ran plainly): {dict(stats.skipped_faults)}",
            file=out,
        )
    print(
        f"failed applies (exit 1): {stats.failed_applies}; exits by step kind: {dict(sorted(stats.exit_codes.items()))}",
        file=out,
    )
    timing = {k: f"{sum(v) / len(v):.1f}s" for k, v in sorted(stats.apply_seconds.items()) if v}
    print(f"mean apply time by step kind: {timing}", file=out)
    print(
        f"combinations run: {len(stats.combos)} of {len(COMBOS)}; "
        f"most model states kept at once: {stats.max_states}",
        file=out,
    )
    print(
        f"differences found: {len(stats.differences)}; rows lost {stats.lost}, rows doubled {stats.doubled}",
        file=out,
    )
    for d in stats.differences:
        print(
            f"  run {d['run']} {d['combo']} step {d['step'] + 1}: {d['kind']}: {d['message']}",
            file=out,
        )
    quota = {k: math.ceil(v * runs / 200) for k, v in QUOTA_PER_200.items()}
    short = {k: f"{stats.kinds[k]} < {n}" for k, n in quota.items() if stats.kinds[k] < n}
    if short and stats.runs == runs:
        print(f"below the acceptance bar's counts: {short}", file=out)
    out.flush()


# ============================================================================ the campaign


def plan_runs(
    seed: int, runs: int, steps: int, only: list[str]
) -> list[tuple[tuple[str, str, str], list[Step], str]]:
    """Every run's combination and steps, up front: the quota of faults is met by
    forcing them into runs that can host them, as late as the deficit requires."""
    combos = [c for c in COMBOS if not only or any(fnmatch.fnmatch("/".join(c), p) for p in only)]
    if not combos:
        raise SystemExit(f"--only {only} matches none of {['/'.join(c) for c in COMBOS]}")
    offset = seed % len(combos)
    chosen = [combos[(offset + r) % len(combos)] for r in range(runs)]
    quota = {k: math.ceil(v * runs / 200) for k, v in QUOTA_PER_200.items()}
    made: Counter[str] = Counter()
    plans = []
    for r, combo in enumerate(chosen):
        forced: Counter[str] = Counter()
        for kind, target in quota.items():
            if not eligible(kind, combo):
                continue
            hosts_left = sum(1 for c in chosen[r:] if eligible(kind, c))
            needed = target - made[kind]
            if needed > 0:
                forced[kind] = math.ceil(needed / hosts_left)
        run_seed = f"{seed}:{r}"
        generated = Generator(random.Random(run_seed), combo, steps).steps(forced)
        made.update(s.kind for s in generated)
        plans.append((combo, generated, run_seed))
    return plans


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--steps", type=int, default=15, help="steps per run (at least 15)")
    parser.add_argument("--seed", type=int, default=None, help="default: random (printed)")
    parser.add_argument(
        "--only",
        action="append",
        default=[],
        metavar="DEST/MODE/SOURCE",
        help="run only these combinations (fnmatch patterns; repeatable)",
    )
    parser.add_argument("--replay", type=Path, help="replay a repro file's steps (and shrink them)")
    parser.add_argument(
        "--keep-going",
        action="store_true",
        help="after a difference, go on with the next run (no shrinking)",
    )
    parser.add_argument("--no-shrink", action="store_true")
    parser.add_argument("--shrink-budget", type=float, default=900.0, help="seconds")
    parser.add_argument("--workdir", type=Path, default=None)
    parser.add_argument(
        "--no-calibrate", action="store_true", help="skip the clean subprocess applies"
    )
    parser.add_argument("-v", "--verbose", action="store_true", help="print every step")
    args = parser.parse_args(argv)
    if args.steps < 15 and args.replay is None:
        parser.error("--steps must be at least 15")
    if os.geteuid() != 0:
        parser.error("run as root: the disk-full fault mounts a tmpfs")
    seed = args.seed if args.seed is not None else random.SystemRandom().randrange(10**6)
    # SIGTERM (timeout, kill PID) unwinds like Ctrl-C: tmpfs unmounted, PostgreSQL stopped.
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    work = args.workdir or Path(tempfile.mkdtemp(prefix="hakiri-campaign-"))
    work.mkdir(parents=True, exist_ok=True)
    print(f"campaign: seed {seed}, work dir {work}", file=sys.stderr, flush=True)
    began = time.monotonic()
    env = Environment(work)
    stats = Stats()
    try:
        if args.replay is not None:
            return replay(env, args)
        plans = plan_runs(seed, args.runs, args.steps, args.only)
        if not args.no_calibrate:
            env.calibrate(
                {c[0] for c, run_steps, _seed in plans if any(s.kind == "kill" for s in run_steps)},
                stats,
            )
        for r, (combo, steps, run_seed) in enumerate(plans):
            label = f"{r:03d}"
            stats.runs += 1
            stats.combos["/".join(combo)] += 1
            result = execute(env, combo, steps, label, stats, verbose=args.verbose)
            stats.run_seconds.append(result.seconds)
            status = (
                "ok"
                if result.difference is None
                else f"DIFFERENCE at step {result.difference.step + 1}"
            )
            print(
                f"run {label} {'/'.join(combo):42s} {result.seconds:6.1f}s {status}",
                file=sys.stderr,
                flush=True,
            )
            if result.difference is None:
                continue
            found = result.difference
            repro = work / f"repro-run{label}.json"
            write_repro(repro, combo, steps, run_seed, found)
            if not args.verbose:
                print("\n".join("  " + line for line in result.log), file=sys.stderr)
            _tally(stats, found, label, combo)
            report_difference(
                found, combo, steps, f"{seed} (run {r}: {run_seed})", repro, f"run {label}"
            )
            if args.keep_going:
                continue
            if not args.no_shrink:
                print(f"shrinking (budget {args.shrink_budget:.0f}s)…", file=sys.stderr, flush=True)
                small, small_found = shrink(
                    env, combo, steps, found, args.shrink_budget, args.verbose
                )
                shrunk = work / f"repro-run{label}-shrunk.json"
                write_repro(shrunk, combo, small, run_seed, small_found)
                report_difference(
                    small_found,
                    combo,
                    small,
                    f"{seed} (run {r}: {run_seed})",
                    shrunk,
                    f"run {label}, shrunk to {len(small)} step(s)",
                )
            break
        summary(stats, time.monotonic() - began, args.runs)
        return 1 if stats.differences else 0
    finally:
        env.close()


def _tally(stats: Stats, found: Difference, label: str, combo: tuple[str, str, str]) -> None:
    stats.differences.append(
        {
            "run": label,
            "combo": "/".join(combo),
            "step": found.step,
            "kind": found.kind,
            "message": found.message,
        }
    )
    diff = found.details.get("diff") or {}
    if "keys" in diff:
        stats.lost += diff.get("lost", 0)
        stats.doubled += diff.get("doubled", 0)
    else:
        stats.lost += len(diff.get("lost", []))
        stats.doubled += len(diff.get("doubled", []))


def replay(env: Environment, args: argparse.Namespace) -> int:
    data = json.loads(args.replay.read_text())
    combo = tuple(data["combo"])
    steps = [Step.from_json(s) for s in data["steps"]]
    result = execute(env, combo, steps, "replay", None, verbose=True)  # type: ignore[arg-type]
    if result.difference is None:
        print("replay: no difference", file=sys.stdout)
        return 0
    found = result.difference
    report_difference(found, combo, steps, data.get("seed"), args.replay, "replay")  # type: ignore[arg-type]
    if not args.no_shrink:
        small, small_found = shrink(env, combo, steps, found, args.shrink_budget, True)  # type: ignore[arg-type]
        shrunk = args.replay.with_name(args.replay.stem + "-shrunk.json")
        write_repro(shrunk, combo, small, data.get("seed"), small_found)  # type: ignore[arg-type]
        report_difference(
            small_found, combo, small, data.get("seed"), shrunk, f"shrunk to {len(small)} step(s)"
        )  # type: ignore[arg-type]
    return 1


if __name__ == "__main__":
    sys.exit(main())
