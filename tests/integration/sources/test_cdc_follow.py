"""`hakiri apply --follow`: one process keeps a cdc_mirror pipeline's targets following a
running workload (tests/support/cdc_workload.py: inserts, updates of the key and beside an
out-of-line value, deletes, two-table transactions), on real processes.

- mirrored exactly: once the workload stops, each target equals its source (EXCEPT ALL both
  ways, every column), and every range was planned for the three tables together;
- SIGTERM (and SIGINT) mid-stream: exit 0 with a message, the lease handed back (an apply
  runs at once), and a restarted follower continues to an exact mirror;
- killed mid-stream (SIGKILL at a crash point before and after the destination's commit, or
  from outside): a restarted follower loses and doubles nothing.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import ClassVar

import psycopg
import pytest
from psycopg import sql

from hakiri.catalog.store import Catalog
from hakiri.sources.cdc.ranges import IN_PROCESS_ENV
from tests.integration.sources.test_cdc_campaign import Mirror
from tests.support.cdc_workload import TABLES, Workload, drop_mirror

pytestmark = pytest.mark.integration

SEED = 20261129
RATE = 200  # row changes a second while the follower runs


@pytest.fixture
def mirror(tmp_path: Path, pg_url: str, pg_schema: str) -> Iterator[Mirror]:
    target = f"{pg_schema}_m"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(target)))
    found = Mirror(
        tmp_path / "project", pg_url, pg_schema, target, f"s_{pg_schema}", f"p_{pg_schema}"
    )
    found.write()
    try:
        yield found
    finally:
        for follower in Follower.started:  # a test that failed leaves none running
            if follower.process.poll() is None:
                follower.process.kill()
                follower.process.wait()
        Follower.started.clear()
        drop_mirror(pg_url, found.slot, found.publication, target)


class Follower:
    """`hakiri apply --follow mirror --json` in a process of its own; its stdout's JSON lines
    (one per round applied) collected as they come."""

    started: ClassVar[list[Follower]] = []

    def __init__(
        self,
        mirror: Mirror,
        crash_at: str | None = None,
        *,
        as_json: bool = True,
        env: dict[str, str] | None = None,
    ) -> None:
        env = {k: v for k, v in {**os.environ, **(env or {})}.items() if k != "HAKIRI_CRASH_AT"}
        if crash_at:
            env["HAKIRI_CRASH_AT"] = crash_at
        command = [
            sys.executable,
            "-m",
            "hakiri.cli.main",
            "apply",
            "--follow",
            "mirror",
            *(["--json"] if as_json else []),
            "--interval",
            "0.2",
            "--project",
            str(mirror.root),
        ]
        self.stderr_path = mirror.root / f"follow-{time.monotonic_ns()}.err"
        self.process = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=self.stderr_path.open("w"),
            text=True,
            env=env,
        )
        Follower.started.append(self)
        self.as_json = as_json
        self.rounds: list[dict] = []
        self.lines: list[str] = []  # without --json: the text lines
        self._reader = threading.Thread(target=self._collect, daemon=True)
        self._reader.start()

    def _collect(self) -> None:
        for line in self.process.stdout:  # type: ignore[union-attr]
            if line.strip() and self.as_json:
                self.rounds.append(json.loads(line))
            elif line.strip():
                self.lines.append(line.strip())
                self.rounds.append({"status": "success", "line": line})

    def read(self) -> list[dict]:
        return list(self.rounds)

    def wait_for_rounds(self, count: int, limit: float = 300.0) -> None:
        deadline = time.monotonic() + limit
        while len([r for r in self.read() if r["status"] == "success"]) < count:
            assert self.process.poll() is None, f"follower ended: {self.stderr()}"
            assert time.monotonic() < deadline, f"{count} rounds not reached: {self.stderr()}"
            time.sleep(0.2)

    def stop(self, signum: int = signal.SIGTERM) -> int:
        self.process.send_signal(signum)
        return self.wait()

    def wait(self, timeout: float = 120.0) -> int:
        code = self.process.wait(timeout=timeout)
        self._reader.join(timeout=10)
        return code

    def stderr(self) -> str:
        return self.stderr_path.read_text()


def _wait_exact(mirror: Mirror, limit: float = 300.0) -> None:
    deadline = time.monotonic() + limit
    while (found := mirror.differences()) != dict.fromkeys(TABLES, 0):
        assert time.monotonic() < deadline, f"targets still differ: {found}"
        time.sleep(0.5)


def _ranges_by_end(mirror: Mirror) -> Counter[str]:
    """How many tables each committed WAL range's end was applied to."""
    with Catalog.open(mirror.catalog_url, migrate=False) as catalog:
        batches = catalog.batches("mirror")
    return Counter(
        json.loads(b.predicate)["end"] for b in batches if b.kind == "cdc" and b.predicate
    )


def test_the_follower_mirrors_a_running_workload_and_stops_cleanly_on_sigterm(
    mirror: Mirror,
) -> None:
    workload = Workload(mirror.pg_url, mirror.schema, seed=SEED)
    workload.create()
    workload.start(rate=RATE)
    try:
        follower = Follower(mirror)
        follower.wait_for_rounds(6)  # the snapshots, then ranges while the workload runs
        assert follower.stop(signal.SIGTERM) == 0, follower.stderr()
        assert "stopped on SIGTERM" in follower.stderr()
        # The lease is handed back: an apply of the pipeline runs now, not after its TTL.
        outcome = mirror.apply()
        assert outcome["exit"] == 0 and outcome["status"] in ("success", "no-op"), outcome
        again = Follower(mirror, as_json=False)
        again.wait_for_rounds(2)
    finally:
        committed = workload.stop()
    _wait_exact(mirror)
    assert again.stop(signal.SIGINT) == 0, again.stderr()
    assert "stopped on SIGINT" in again.stderr()
    assert "following mirror on " in again.stderr()
    # Without --json: a line per range applied, on stdout.
    assert all(
        re.fullmatch(
            r"\d\d:\d\d:\d\dZ mirror: \d table\(s\), changes \S+\.\.\S+: .* rows, .*", line
        )
        for line in again.lines
    ), again.lines
    assert mirror.differences() == dict.fromkeys(TABLES, 0)
    assert committed.changes > 500, committed
    # Every range was planned for the three tables together (one peek and decode for them),
    # but for the round a stop may cut: a draining round claims no more tables, and those it
    # left take the next round's range (each of the two stops may cut one).
    ends = _ranges_by_end(mirror)
    cut = [end for end, tables in ends.items() if tables != len(TABLES)]
    assert len(ends) - len(cut) >= 3 and len(cut) <= 2, ends
    rounds = [r for r in follower.rounds if r["status"] == "success"]
    assert sum(r["rows"] for r in rounds) > 0 and all(r["mode"] == "cdc_mirror" for r in rounds)


@pytest.mark.parametrize(
    "crash_at",
    [
        "before_dest_commit:5",
        "after_dest_commit:6",
        "before_catalog_commit:7",
        "sigkill",
        "sigterm twice",
    ],
)
def test_a_follower_killed_mid_stream_then_restarted_loses_and_doubles_nothing(
    mirror: Mirror, crash_at: str
) -> None:
    workload = Workload(mirror.pg_url, mirror.schema, seed=SEED)
    workload.create()
    workload.start(rate=RATE)
    try:
        if crash_at == "sigkill":
            # Every range read by the tables' engine tasks (the path of a range too large
            # to hold in the hakiri process), killed from outside.
            follower = Follower(mirror, env={IN_PROCESS_ENV: "0"})
            follower.wait_for_rounds(5)
            time.sleep(0.3)  # somewhere inside a later round
            follower.process.send_signal(signal.SIGKILL)
            assert follower.wait() == -signal.SIGKILL
        elif crash_at == "sigterm twice":  # the second one: stop now, whatever is in flight
            follower = Follower(mirror)
            follower.wait_for_rounds(5)
            follower.process.send_signal(signal.SIGTERM)
            follower.process.send_signal(signal.SIGTERM)
            assert follower.wait() in (0, 130), follower.stderr()
        else:
            follower = Follower(mirror, crash_at=crash_at)
            assert follower.wait(timeout=300) == 137, follower.stderr()
        again = Follower(mirror, env={IN_PROCESS_ENV: "0"} if crash_at == "sigkill" else None)
        again.wait_for_rounds(2)
    finally:
        committed = workload.stop()
    _wait_exact(mirror)
    assert again.stop() == 0, again.stderr()
    assert mirror.differences() == dict.fromkeys(TABLES, 0)
    assert committed.changes > 200, committed


def test_ranges_reduced_in_the_hakiri_process_and_in_engine_tasks_mirror_the_same_rows(
    mirror: Mirror, pg_url: str
) -> None:
    """One workload followed twice at once, by two pipelines with slots of their own: one
    with every range held and reduced in the hakiri process, one with every range read and
    reduced by the tables' engine tasks (HAKIRI_CDC_IN_PROCESS_EVENTS=0)."""
    tasks = replace(
        mirror,
        root=mirror.root.parent / "tasks",
        target=f"{mirror.target}_t",
        slot=f"{mirror.slot}_t",
        publication=f"{mirror.publication}_t",
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(tasks.target)))
    tasks.write()
    try:
        workload = Workload(mirror.pg_url, mirror.schema, seed=SEED)
        workload.create()
        workload.start(rate=RATE)
        try:
            held = Follower(mirror, env={IN_PROCESS_ENV: "1000000"})
            engine = Follower(tasks, env={IN_PROCESS_ENV: "0"})
            held.wait_for_rounds(5)
            engine.wait_for_rounds(5)
        finally:
            committed = workload.stop()
        _wait_exact(mirror)
        _wait_exact(tasks)
        assert held.stop() == 0, held.stderr()
        assert engine.stop() == 0, engine.stderr()
        assert committed.changes > 200, committed
        # Both equal the source, every column (EXCEPT ALL both ways), so each other.
        assert mirror.differences() == dict.fromkeys(TABLES, 0)
        assert tasks.differences() == dict.fromkeys(TABLES, 0)
    finally:
        drop_mirror(pg_url, tasks.slot, tasks.publication, tasks.target)
