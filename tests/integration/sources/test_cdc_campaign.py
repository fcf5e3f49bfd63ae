"""cdc_mirror under fire, on real processes: while a workload commits inserts, updates (of
the key, of small columns beside an out-of-line value, of that value), deletes and
transactions over two tables, `hakiri apply` processes are SIGKILLed at random instants
(early ones while the tables' snapshots load, later ones anywhere in a run), and some run
to the end. Once the workload stops, applies catch up, and each target equals its source,
every column of every row. Then the source goes away behind a TCP proxy for a while: an
apply says so in one line, the workload goes on, and once the source is back the mirror
catches up.

`tests/support/cdc_workload.py` makes the changes (seeded); the kill instants come from a
seeded RNG too, as fractions of how long an apply has taken so far, so a kill lands at a
comparable point of a run on a fast engine and a slow one."""

from __future__ import annotations

import contextlib
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict

from hakiri.catalog.records import BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError
from tests.support.cdc_workload import TABLES, Workload, drop_mirror
from tests.support.tcp_proxy import TcpProxy

# Sail only: the campaign is about process deaths and a lost network, not the engine (the
# WAL reads and writes are the conformance tests', on both engines); with the engine in
# the apply's own process, an apply takes about a second and the 20 kills a minute.
pytestmark = [pytest.mark.integration, pytest.mark.sail_only]

SEED = 20261128
KILLS = 20  # at least this many applies die by SIGKILL
RATE = 300  # row changes a second the workload commits during the campaign
CAMPAIGN_SECONDS = 170  # the kills stop here even if fewer than KILLS landed (then it fails)


@dataclass
class Mirror:
    """A cdc_mirror project: the workload's tables in `schema`, mirrored into `target`."""

    root: Path
    pg_url: str
    schema: str
    target: str
    slot: str
    publication: str
    log: list[str] = field(default_factory=list)

    @property
    def catalog_url(self) -> str:
        return f"sqlite:///{self.root / '.hakiri' / 'state.sqlite'}"

    def write(self, source_url: str | None = None) -> None:
        """hakiri.toml: the source read through `source_url` (default: the suite's server)."""
        self.root.mkdir(parents=True, exist_ok=True)
        (self.root / "hakiri.toml").write_text(
            textwrap.dedent(f"""
            [project]
            name = "cdc-campaign"

            [connections.source]
            type = "postgres"
            url = "{source_url or self.pg_url}"

            [connections.wh]
            type = "postgres"
            url = "{self.pg_url}"

            [[pipeline]]
            id = "mirror"
            tables = {json.dumps(list(TABLES))}
            load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
            destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{self.target}" }} }}

            [pipeline.source]
            connector = "postgres"
            config = {{ connection = "source", schema = "{self.schema}", cdc = {{ slot = "{self.slot}", publication = "{self.publication}" }} }}
            """)
        )

    def start(self, *, as_json: bool = True) -> subprocess.Popen[str]:
        env = {k: v for k, v in os.environ.items() if k != "HAKIRI_CRASH_AT"}
        command = [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(self.root)]
        return subprocess.Popen(
            [*command, "--json"] if as_json else command,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
        )

    def apply(self) -> dict:
        """One apply to its end: its outcome (`apply --json`), with its exit code."""
        process = self.start()
        out, errors = process.communicate(timeout=300)
        assert out.strip().startswith("["), f"exit {process.returncode}: {errors[-2000:]}"
        [outcome] = json.loads(out)
        outcome["exit"] = process.returncode
        return outcome

    def catch_up(self, tries: int = 8) -> list[dict]:
        """Apply until an apply finds nothing to change (0 rows, 0 deletes)."""
        outcomes = []
        for _ in range(tries):
            outcome = self.apply()
            outcomes.append(outcome)
            self.log.append(_summary(outcome))
            if outcome["exit"] == 0 and outcome["rows"] == 0 and outcome["deleted"] == 0:
                return outcomes
        pytest.fail("no apply came up empty:\n" + "\n".join(self.log))

    def snapshots_pending(self) -> bool | None:
        """Is a table's snapshot still to commit? None before the catalog is there."""
        if not (self.root / ".hakiri" / "state.sqlite").exists():
            return None
        try:
            with Catalog.open(self.catalog_url, migrate=False) as catalog:
                batches = catalog.batches("mirror")
        except CatalogError:  # created, not migrated yet
            return None
        snapshots = [b for b in batches if b.kind == "cdc-snapshot"]
        if not snapshots:
            return None
        return any(b.status is not BatchStatus.COMMITTED for b in snapshots)

    def differences(self) -> dict[str, int]:
        """Rows in one of source and target and not the other, per table (EXCEPT ALL both
        ways, every column)."""
        found = {}
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            for table, columns in TABLES.items():
                names = sql.SQL(", ").join(
                    sql.Identifier(c.split()[0]) for c in columns.split(", ")
                )
                source = sql.SQL("SELECT {} FROM {}").format(
                    names, sql.Identifier(self.schema, table)
                )
                target = sql.SQL("SELECT {} FROM {}").format(
                    names, sql.Identifier(self.target, table)
                )
                row = conn.execute(
                    sql.SQL(
                        "SELECT (SELECT count(*) FROM ({} EXCEPT ALL {}) a) "
                        "+ (SELECT count(*) FROM ({} EXCEPT ALL {}) b)"
                    ).format(source, target, target, source)
                ).fetchone()
                assert row is not None
                found[table] = row[0]
        return found


@pytest.fixture
def mirror(tmp_path: Path, pg_url: str, pg_schema: str) -> Iterator[Mirror]:
    """The project, its target schema, and afterwards no slot, publication or target left
    (a slot keeps the server's WAL for as long as it exists)."""
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
        drop_mirror(pg_url, found.slot, found.publication, target)


def test_applies_killed_at_random_instants_leave_every_target_equal_to_its_source(
    mirror: Mirror,
) -> None:
    workload = Workload(mirror.pg_url, mirror.schema, seed=SEED)
    workload.create()
    rng = random.Random(SEED)
    durations: list[float] = []  # of the applies that ran to their end
    killed: list[tuple[float, bool | None]] = []  # (seconds into the apply, snapshot pending)
    finished = 0
    workload.start(rate=RATE)
    deadline = time.monotonic() + CAMPAIGN_SECONDS
    try:
        attempt = 0
        while len(killed) < KILLS and time.monotonic() < deadline:
            process, began = mirror.start(), time.monotonic()
            pending = None
            if attempt % 5 != 4:  # every fifth apply runs to its end
                if attempt < 8 and mirror.snapshots_pending() in (None, True):
                    # Early: once the snapshots are queued (loading, or about to), a moment later.
                    _wait_for_snapshot_work(mirror, process, limit=120)
                    _wait(process, rng.uniform(0.0, 1.5))
                else:  # anywhere in a run, up to a little past its usual length
                    typical = statistics.median(durations) if durations else 5.0
                    _wait(process, rng.uniform(0.05, 1.1) * typical)
                if process.poll() is None:
                    pending = mirror.snapshots_pending()
                    process.send_signal(signal.SIGKILL)
            out, errors = process.communicate(timeout=300)
            took = time.monotonic() - began
            if process.returncode == -signal.SIGKILL:
                killed.append((took, pending))
                mirror.log.append(f"killed after {took:.1f}s (snapshot pending: {pending})")
            else:
                assert out.strip().startswith("["), f"exit {process.returncode}: {errors[-2000:]}"
                [outcome] = json.loads(out)
                mirror.log.append(_summary(outcome))
                assert outcome["status"] == "success", "\n".join(mirror.log)
                durations.append(took)
                finished += 1
            attempt += 1
    finally:
        committed = workload.stop()
    assert len(killed) >= KILLS, "\n".join(mirror.log)
    assert any(pending for _, pending in killed), "no kill landed during a snapshot"
    assert any(pending is False for _, pending in killed), "no kill landed after the snapshots"
    assert finished >= 2, "\n".join(mirror.log)

    mirror.catch_up()
    print(
        f"{committed.transactions} transactions, {committed.changes} changes", *mirror.log, sep="\n"
    )
    assert mirror.differences() == dict.fromkeys(TABLES, 0), "\n".join(mirror.log)
    assert committed.changes > 5_000 and len(committed.kinds) == 14, committed


def test_a_source_down_for_a_while_fails_applies_in_one_line_and_then_catches_up(
    mirror: Mirror, pg_url: str
) -> None:
    server = conninfo_to_dict(pg_url)
    with TcpProxy(str(server["host"]), int(server["port"])) as proxy:
        mirror.write(pg_url.replace(f":{server['port']}/", f":{proxy.port}/"))
        workload = Workload(pg_url, mirror.schema, seed=SEED + 1)
        workload.create()
        workload.start(rate=RATE)
        try:
            first = mirror.apply()  # the snapshots (and what came since)
            assert first["exit"] == 0, first

            proxy.refuse()  # down: no new connection, and the open ones reset
            proxy.cut()
            before = workload.snapshot().changes
            for _ in range(2):
                _fails_in_one_line(mirror.start(as_json=False), mirror.log)
            assert workload.snapshot().changes > before  # the source went on meanwhile

            # Cut in the middle of runs: whatever the apply was doing with the source
            # (planning, the engine reading a range, moving the slot) ends in one line too.
            rng = random.Random(SEED)
            for _ in range(3):
                proxy.accept()
                process = mirror.start(as_json=False)
                _wait(process, rng.uniform(0.2, 1.0) * first["seconds"])
                proxy.refuse()
                proxy.cut()
                _ends_in_one_line(process, mirror.log)

            proxy.accept()
            back = mirror.apply()
            assert back["exit"] == 0 and back["rows"] > 0, back
        finally:
            committed = workload.stop()
        mirror.catch_up()
    print(*mirror.log, sep="\n")
    assert mirror.differences() == dict.fromkeys(TABLES, 0), "\n".join(mirror.log)
    assert committed.changes > 0


# ---------------------------------------------------------------------- helpers


def _fails_in_one_line(process: subprocess.Popen[str], log: list[str]) -> None:
    out, errors = process.communicate(timeout=300)
    assert process.returncode == 1, errors
    assert "Traceback" not in out + errors, errors
    lines = [line for line in errors.splitlines() if line.startswith("error:")]
    assert len(lines) == 1, errors
    log.append(lines[0])


def _ends_in_one_line(process: subprocess.Popen[str], log: list[str]) -> None:
    """An apply the source went away under: it fails in one line, or, when it had read its
    ranges before the cut (the slot moves at the next apply's read; the lag it reports last
    is a metric, skipped when the source does not answer), its commits stand and it exits 0."""
    out, errors = process.communicate(timeout=300)
    assert "Traceback" not in out + errors, errors
    lines = [line for line in errors.splitlines() if line.startswith("error:")]
    if process.returncode == 0:
        assert not lines, errors
        log.append("an apply finished what it had read before the cut")
        return
    assert process.returncode == 1, errors
    assert len(lines) == 1, errors
    log.append(lines[0])


def _wait(process: subprocess.Popen[str], seconds: float) -> None:
    with contextlib.suppress(subprocess.TimeoutExpired):
        process.wait(timeout=seconds)


def _wait_for_snapshot_work(mirror: Mirror, process: subprocess.Popen[str], limit: float) -> None:
    """Until a snapshot batch is queued (its load is about to start, or running), or the
    process ends. The first apply may start the engine first, which takes a while."""
    deadline = time.monotonic() + limit
    while process.poll() is None and time.monotonic() < deadline:
        if mirror.snapshots_pending():
            return
        time.sleep(0.05)


def _summary(outcome: dict) -> str:
    return (
        f"{outcome['status']}: {outcome['rows']} rows, {outcome['deleted']} deleted, "
        f"{outcome['batches']} batches, {outcome['seconds']:.1f}s"
        + (f" ({outcome['error']})" if outcome.get("error") else "")
    )
