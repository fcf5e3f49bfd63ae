"""Benchmark: can cdc_mirror keep up with a busy PostgreSQL, and how stale is the mirror?

    .venv/bin/python bench/cdc.py [--rates 1000,2500,5000,10000] [--seconds 30]
        [--engines sail,spark] [--runner apply|serve|follow] [--kill] [--lanes N]
        [--pg-url URL]

One throwaway PostgreSQL (the suite's: fsync off, wal_level logical). For each engine and
each rate, from scratch: the workload of tests/support/cdc_workload.py (three tables,
customers with out-of-line profiles, orders and their lines; inserts, updates, key
updates, deletes, two-table transactions) is created with 2,000 customers and 10,000
orders per lane, mirrored once (the snapshot) and once more (warm-up), then driven at the
rate (row changes a second, synchronous commits) by its lanes for --seconds: a lane is a
thread with one connection, its own rows and rate/lanes (a connection waits on each
transaction's round trip: a few thousand changes a second on two cores), one lane up to
5,000 changes a second asked, else ceil(rate / 5,000), unless --lanes says how many; while
`hakiri apply` runs in a loop, one process after another, as cron or a shell loop would
run it (--runner apply), or while `hakiri serve` runs the pipeline on
`schedule = "every 1s"` in one long-lived process (--runner serve; the drain is then measured by comparing
the targets with the sources every half second, and only the runs' durations are known),
or while one `hakiri apply --follow` process follows it (--runner follow; the drain
measured as for serve, each round's figures from its JSON line). With --kill (follow
only), the follower is SIGKILLed halfway through the window and started again at once: the
step's exactness check then covers a crash and a restart.

Reported per step:

- lanes: how many connections committed the changes;
- source: the changes a second the workload really committed (it may fall short of the
  rate: it shares the two cores with the server and hakiri);
- mirrored: those changes over the time the mirror took to hold all of them, i.e. the
  window plus the drain (after the workload stops, the applies until one finds nothing);
  a mirror that keeps up drains in about one apply, so it reads a little under source;
- lag: once a second, now - the newest `changed_at` (stamped by the source on every insert
  and update) in the targets, at most the window's age (no change is older): how old the
  mirror's view is. p50, p95 and max over the
  window, and its trend (seconds of lag gained per second, a least-squares slope): about 0
  when the mirror keeps up, growing when it falls behind;
- per apply (means): the whole process, hakiri's own run (`seconds` of apply --json), the
  first batch's read + stage (it starts the engine session), the other batches' read +
  stage, commits; `start` = process minus run (interpreter, imports, catalog, lease, exit).

Then once per step, what decoding costs outside hakiri: the slot's pending changes at the
end of the window peeked on the server (`count(*)` of pg_logical_slot_peek_binary_changes:
the server's decoding) and fetched and decoded in Python (`pgoutput.Decoder`), per change.
Every step checks that each target equals its source (EXCEPT ALL both ways, every column).
"""

from __future__ import annotations

import argparse
import compileall
import json
import math
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import textwrap
import threading
import time
import urllib.request
from datetime import datetime
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(REPO / "src"), str(REPO)]  # this tree's hakiri, and tests.support

import psycopg  # noqa: E402
from psycopg import sql  # noqa: E402
from tests.support.cdc_workload import TABLES, Workload  # noqa: E402
from tests.support.postgres import TestPostgres  # noqa: E402

from hakiri.sources.cdc.pgoutput import Decoder  # noqa: E402

SOURCE, TARGET, SLOT = "bench_cdc", "bench_cdc_m", "bench_cdc"
LANE_RATE = 5_000  # changes a second a lane is asked for at most, unless --lanes says


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rates", default="1000,2500,5000,10000", help="changes/s, in order")
    parser.add_argument("--seconds", type=float, default=30.0, help="per rate")
    parser.add_argument("--engines", default="sail,spark")
    parser.add_argument("--runner", choices=("apply", "serve", "follow"), default="apply")
    parser.add_argument(
        "--kill", action="store_true", help="follow: SIGKILL the follower mid-window, restart it"
    )
    parser.add_argument(
        "--lanes",
        type=int,
        help="workload connections (default: 1 up to 5,000 changes/s, else ceil(rate/5000))",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    args = parser.parse_args()
    if args.lanes is not None and args.lanes < 1:
        parser.error("--lanes must be at least 1")
    # An installed hakiri has its bytecode; this machine sets PYTHONDONTWRITEBYTECODE, under
    # which every process would compile ~300 modules again (load_peers.compile_tree).
    compileall.compile_dir(str(REPO / "src"), quiet=1)

    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url  # type: ignore[union-attr]
    results = []
    try:
        with psycopg.connect(url) as conn:
            version = conn.execute("SHOW server_version").fetchone()[0]  # type: ignore[index]
        print(f"PostgreSQL {version}, {os.cpu_count()} cores", flush=True)
        for engine in args.engines.split(","):
            for rate in (int(r) for r in args.rates.split(",")):
                lanes = args.lanes or max(1, math.ceil(rate / LANE_RATE))
                result = step(
                    url, engine, rate, args.seconds, args.seed, args.runner, args.kill, lanes
                )
                results.append(result)
                print(_line(result), flush=True)
    finally:
        if server is not None:
            server.stop()
    print()
    print(_HEADER)
    for result in results:
        print(_line(result))


def step(
    url: str,
    engine: str,
    rate: int,
    seconds: float,
    seed: int,
    runner: str,
    kill: bool = False,
    lanes: int = 1,
) -> dict:
    _reset(url)
    workload = Workload(url, SOURCE, seed=seed)
    workload.create(customers=2_000, orders=10_000, lines_per_order=2, lanes=lanes)
    with tempfile.TemporaryDirectory(prefix="bench-cdc-") as directory:
        root = Path(directory)
        _project(root, url, engine, 'schedule = "every 1s"' if runner == "serve" else "")
        for _ in range(2):  # the snapshot, then a warm-up range
            _apply(root, engine)
        serve = _serve(root, engine) if runner == "serve" else None
        follower = Follower(root, engine).start() if runner == "follow" else None
        try:
            sampler = LagSampler(url).start()
            workload.start(rate=rate, lanes=lanes)
            began = time.monotonic()
            applies = []
            while time.monotonic() - began < seconds:
                if follower is not None:
                    time.sleep(0.5)
                    if kill and not follower.killed and time.monotonic() - began > seconds / 2:
                        follower.kill_and_restart()
                elif serve is None:
                    applies.append(_apply(root, engine))
                else:
                    time.sleep(0.5)
            counts = workload.stop()
            stopped = time.monotonic()
            window = stopped - began
            lags = sampler.stop()  # (seconds into the window, lag)
            # Serve may be reading the slot: one reader at a time.
            decode = _decode_cost(url) if serve is None and follower is None else None
            drained = stopped
            if follower is not None:
                while any(_differences(url).values()):
                    if time.monotonic() - stopped > 300:
                        raise SystemExit(f"{engine} at {rate}/s: the mirror did not catch up")
                    time.sleep(0.5)
                drained = time.monotonic()
                applies = follower.stop(began, stopped)
                print(
                    "  rounds (ended at s into the window: s a round, rows): "
                    + ", ".join(
                        f"{at - began:.1f}: {r['seconds']:.2f}s {r['rows']:,}"
                        for at, r in follower.rounds
                        if r["status"] == "success"
                    )
                )
            elif serve is None:
                for _ in range(30):
                    outcome = _apply(root, engine)
                    if outcome["rows"] == 0 and outcome["deleted"] == 0:
                        break
                    drained = time.monotonic()
                else:
                    raise SystemExit(f"{engine} at {rate}/s: the mirror did not catch up")
            else:
                while any(_differences(url).values()):
                    if time.monotonic() - stopped > 300:
                        raise SystemExit(f"{engine} at {rate}/s: the mirror did not catch up")
                    time.sleep(0.5)
                drained = time.monotonic()
                serve.terminate()
                serve.wait(timeout=120)
                applies = _runs(root, began, stopped)
        finally:
            if serve is not None and serve.poll() is None:
                serve.kill()
            if follower is not None:
                follower.kill()
    differences = _differences(url)
    if any(differences.values()):
        raise SystemExit(f"{engine} at {rate}/s: targets differ from sources: {differences}")
    _reset(url)
    return {
        "engine": engine,
        "rate": rate,
        "lanes": lanes,
        "source": counts.changes / window,
        "mirrored": counts.changes / (drained - began),
        "drain": drained - stopped,
        "lag": lags,
        "applies": applies,
        "decode": decode,
    }


class LagSampler:
    """Once a second: now - the newest changed_at in the targets (seconds)."""

    def __init__(self, url: str) -> None:
        self.url, self.samples = url, []
        self.began = time.monotonic()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> LagSampler:
        self._thread.start()
        return self

    def stop(self) -> list[tuple[float, float]]:
        self._stop.set()
        self._thread.join()
        return self.samples

    def _run(self) -> None:
        newest = sql.SQL("SELECT extract(epoch FROM clock_timestamp() - greatest({}))").format(
            sql.SQL(", ").join(
                sql.SQL("(SELECT max(changed_at) FROM {})").format(sql.Identifier(TARGET, t))
                for t in TABLES
            )
        )
        with psycopg.connect(self.url, autocommit=True) as conn:
            while not self._stop.wait(1.0):
                try:
                    row = conn.execute(newest).fetchone()
                except psycopg.errors.UndefinedTable:  # no target yet: not a sample
                    continue
                if row and row[0] is not None:
                    # The changes began with the window: none is older than the window, and
                    # the seed rows' age before the first run commits is not the mirror's lag.
                    age = time.monotonic() - self.began
                    self.samples.append((age, min(float(row[0]), age)))


def _apply(root: Path, engine: str) -> dict:
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HAKIRI_SPARK_ENGINE": engine}
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--json", "--project", str(root)],
        capture_output=True,
        text=True,
        env=env,
    )
    wall = time.monotonic() - started
    if done.returncode != 0:
        raise SystemExit(f"hakiri apply failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}")
    [outcome] = json.loads(done.stdout)
    outcome["wall"] = wall
    return outcome


class Follower:
    """`hakiri apply --follow mirror --json` in a process of its own, its rounds' JSON lines
    collected (with when each arrived)."""

    def __init__(self, root: Path, engine: str) -> None:
        self.root, self.engine = root, engine
        self.process: subprocess.Popen[str] | None = None
        self.rounds: list[tuple[float, dict]] = []
        self.killed = False

    def start(self) -> Follower:
        env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HAKIRI_SPARK_ENGINE": self.engine}
        command = ["apply", "--follow", "mirror", "--json", "--interval", "0.2"]
        log = self.root / "follow.log"
        seen = log.stat().st_size if log.exists() else 0  # a restart appends to it
        self.process = subprocess.Popen(
            [sys.executable, "-m", "hakiri.cli.main", *command, "--project", str(self.root)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=(self.root / "follow.log").open("a"),
            text=True,
        )
        threading.Thread(target=self._collect, args=(self.process,), daemon=True).start()
        deadline = time.monotonic() + 180
        while "following" not in log.read_text()[seen:]:
            if self.process.poll() is not None or time.monotonic() > deadline:
                raise SystemExit(f"the follower ended: {(self.root / 'follow.log').read_text()}")
            time.sleep(0.2)
        return self

    def _collect(self, process: subprocess.Popen[str]) -> None:
        for line in process.stdout:  # type: ignore[union-attr]
            if line.strip():
                self.rounds.append((time.monotonic(), json.loads(line)))

    def kill_and_restart(self) -> None:
        assert self.process is not None
        self.process.kill()
        self.process.wait()
        self.killed = True
        started = time.monotonic()
        self.start()
        print(f"  follower SIGKILLed and started again ({time.monotonic() - started:.1f}s)")

    def stop(self, began: float, stopped: float) -> list[dict]:
        """SIGTERM (exit 0 expected); the rounds that applied something in the window."""
        assert self.process is not None
        self.process.terminate()
        code = self.process.wait(timeout=120)
        if code != 0:
            raise SystemExit(
                f"the follower exited {code}: {(self.root / 'follow.log').read_text()}"
            )
        return [
            {**r, "wall": r["seconds"]}
            for at, r in self.rounds
            if r["status"] == "success" and began <= at <= stopped
        ]

    def kill(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.kill()


def _serve(root: Path, engine: str) -> subprocess.Popen[bytes]:
    """`hakiri serve` on the project, once it answers /readyz."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    env = {**os.environ, "PYTHONPATH": str(REPO / "src"), "HAKIRI_SPARK_ENGINE": engine}
    command = ["serve", "--project", str(root), "--port", str(port)]
    process = subprocess.Popen(
        [sys.executable, "-m", "hakiri.cli.main", *command],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=(root / "serve.log").open("w"),
    )
    deadline, began = time.monotonic() + 180, time.monotonic()
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"hakiri serve ended: {(root / 'serve.log').read_text()[-3000:]}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/readyz", timeout=2) as answer:
                # Ready, and a first scheduled run is over (its engine session is started).
                if answer.status == 200 and _runs(root, began, time.monotonic()):
                    return process
        except OSError:
            pass
        time.sleep(0.5)
    raise SystemExit("hakiri serve did not become ready")


def _runs(root: Path, began: float, stopped: float) -> list[dict]:
    """The runs serve started in the window, as `_apply` reports applies (durations only)."""
    env = {**os.environ, "PYTHONPATH": str(REPO / "src")}
    command = ["runs", "mirror", "--json", "--limit", "1000", "--project", str(root)]
    done = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", *command],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    now, wall = time.time(), time.monotonic()
    window = (now - (wall - began), now - (wall - stopped))
    found = []
    for run in json.loads(done.stdout):
        started = datetime.fromisoformat(run["started_at"]).timestamp()
        ended = run["ended_at"] is not None
        if run["trigger"] == "schedule" and ended and window[0] <= started <= window[1]:
            seconds = run["duration_seconds"] or 0.0
            found.append({"wall": seconds, "seconds": seconds, "timings": []})
    return found


def _decode_cost(url: str) -> dict:
    """The slot's pending changes up to the flushed WAL: decoded on the server alone, then
    fetched and decoded in Python as hakiri's engine task does."""
    peek = (
        "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, pg_current_wal_flush_lsn(), "
        "NULL, 'proto_version', '1', 'publication_names', %s)"
    )
    with psycopg.connect(url, autocommit=True) as conn:
        started = time.monotonic()
        row = conn.execute(f"SELECT count(*) FROM ({peek}) p", (SLOT, SLOT)).fetchone()
        server = time.monotonic() - started
        started = time.monotonic()
        decoder, changes = Decoder(), 0
        with conn.transaction(), conn.cursor(name="bench_peek") as cursor:
            cursor.itersize = 5_000
            cursor.execute(peek, (SLOT, SLOT))
            for (data,) in cursor:
                changes += len(decoder.feed(bytes(data)))
        python = time.monotonic() - started
    return {
        "messages": row[0] if row else 0,
        "changes": changes,
        "server": server,
        "python": python,
    }


def _project(root: Path, url: str, engine: str, schedule: str) -> None:
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "bench-cdc"

        [spark]
        engine = "{engine}"

        [connections.db]
        type = "postgres"
        url = "{url}"

        [[pipeline]]
        id = "mirror"
        tables = {json.dumps(list(TABLES))}
        load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
        destination = {{ connector = "postgres", config = {{ connection = "db", schema = "{TARGET}" }} }}
        {schedule}

        [pipeline.source]
        connector = "postgres"
        config = {{ connection = "db", schema = "{SOURCE}", cdc = {{ slot = "{SLOT}", publication = "{SLOT}" }} }}
        """)
    )


def _reset(url: str) -> None:
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(
            "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots "
            "WHERE slot_name = %s",
            (SLOT,),
        )
        conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(sql.Identifier(SLOT)))
        # The ledger outlives the target: a step's snapshot ids (`cdc-snapshot:<table>:<n>`,
        # n counted in a catalog of the step's own) would be taken for the last step's.
        if conn.execute("SELECT to_regclass('_hakiri.load_ledger')").fetchone() != (None,):
            conn.execute("DELETE FROM _hakiri.load_ledger WHERE project = 'bench-cdc'")
        for schema in (SOURCE, TARGET):
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))


def _differences(url: str) -> dict[str, int]:
    found = {}
    with psycopg.connect(url, autocommit=True) as conn:
        for table, columns in TABLES.items():
            names = sql.SQL(", ").join(sql.Identifier(c.split()[0]) for c in columns.split(", "))
            source = sql.SQL("SELECT {} FROM {}").format(names, sql.Identifier(SOURCE, table))
            target = sql.SQL("SELECT {} FROM {}").format(names, sql.Identifier(TARGET, table))
            row = conn.execute(
                sql.SQL(
                    "SELECT (SELECT count(*) FROM ({} EXCEPT ALL {}) a) "
                    "+ (SELECT count(*) FROM ({} EXCEPT ALL {}) b)"
                ).format(source, target, target, source)
            ).fetchone()
            found[table] = row[0] if row else -1
    return found


_HEADER = (
    "engine  rate/s  lanes  source/s  mirrored/s  drain s  lag p50/p95/max s  lag trend  applies  "
    "apply s: process / run / start / 1st batch / other batches / commits   "
    "decode us/change: server / python"
)


def _line(result: dict) -> str:
    applies, decode = result["applies"], result["decode"]
    lag = sorted(v for _, v in result["lag"])
    trend = (
        statistics.linear_regression(*zip(*result["lag"], strict=True)).slope
        if len(result["lag"]) > 2
        else float("nan")
    )

    def mean(values: list[float]) -> float:
        return statistics.fmean(values) if values else 0.0

    def quantile(q: float) -> float:
        return lag[min(len(lag) - 1, int(q * len(lag)))] if lag else float("nan")

    wall = mean([a["wall"] for a in applies])
    run = mean([a["seconds"] for a in applies])
    first = mean([a["timings"][0]["read_stage"] for a in applies if a["timings"]])
    others = mean([sum(t["read_stage"] for t in a["timings"][1:]) for a in applies])
    commits = mean([sum(t["commit"] + t["catalog"] for t in a["timings"]) for a in applies])
    if decode is None:
        decoding = "-"
    else:
        per_change = max(decode["changes"], 1) / 1e6
        decoding = (
            f"{decode['server'] / per_change:5.1f} / {decode['python'] / per_change:5.1f}"
            f"  ({decode['changes']:,} changes)"
        )
    return (
        f"{result['engine']:6}  {result['rate']:6,}  {result['lanes']:5}  {result['source']:8,.0f}  "
        f"{result['mirrored']:10,.0f}  {result['drain']:7.1f}  "
        f"{quantile(0.5):5.1f} /{quantile(0.95):5.1f} /{lag[-1] if lag else float('nan'):5.1f}  "
        f"{trend:+9.2f}  "
        f"{len(applies):7}  {wall:5.2f} / {run:4.2f} / {wall - run:4.2f} / {first:4.2f} / "
        f"{others:4.2f} / {commits:4.2f}   {decoding}"
    )


if __name__ == "__main__":
    main()
