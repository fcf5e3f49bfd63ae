"""Exactly once: crash at every named point, for every load mode, into both destinations.

For each crash point and destination (PostgreSQL, the Delta context store), one
project holds a pipeline per mode. Each pipeline's apply is stopped at that point, then
one plain `hakiri apply` resumes everything. The targets must equal those of a clean
PostgreSQL run (`CLEAN`, which the first test checks a clean run leaves), row for row:
nothing lost, nothing twice, and the same semantics on both destinations.

The crash that hurts lands on the second batch, which updates, closes scd2 versions,
hard-deletes, replaces a window or is filtered by the watermark: for those modes every
point stops an apply on its second batch (the first committed by then, the catalog
shows). The other modes are stopped on their first batch, into an empty target; so is
each second-batch mode at one point of the four (in turn), where the apply that resumes
that crash is the one stopped on the second batch.

The whole matrix runs in the test's process (`crashing_at`: the point raises
SimulatedCrash, the run stops there with its commits made and nothing after them, and its
claims count as a dead process's), in the Sail pass: the engine in the test's process, no
JVM, a few seconds a case. What the engine does at a crash point is the same on every
engine; what differs is the destination's commit (delta-spark's on Apache Spark, delta-rs's
on Sail). So `test_a_killed_process_…` ends real processes by HAKIRI_CRASH_AT (os._exit: no
cleanup, no finally blocks), on both engines: at each point and into each destination, one
apply killed on its second batch, the first committed.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from hakiri.catalog.store import Catalog
from hakiri.cli.main import app
from hakiri.engine.crash import CRASH_EXIT_CODE, POINTS, SimulatedCrash, crashing_at

MODES = {
    "append": 'load = { mode = "append" }',
    "upsert": 'load = { mode = "upsert", upsert_key = ["id"] }',
    "truncate": 'load = { mode = "truncate" }',
    "blue_green": 'load = { mode = "blue_green" }',
    "incremental_watermark": 'load = { mode = "incremental_watermark", watermark_column = "seq" }',
    # Each file is a full snapshot: part-2 closes (scd2) or deletes (upsert) ids 1 and 3.
    "scd2": 'load = { mode = "scd2", key = ["id"], max_delete_fraction = 1.0 }',
    "upsert_deletes": (
        'load = { mode = "upsert", upsert_key = ["id"], deletes = "hard", max_delete_fraction = 1.0 }'
    ),
    "replace_window": 'load = { mode = "replace_window", window_column = "id" }',
}
# The modes whose second batch changes what the first loaded: crashed on it too.
SECOND_BATCH = ("upsert", "incremental_watermark", "scd2", "upsert_deletes", "replace_window")
# The points a resumed apply passes again for the first batch (it was not committed): the
# second batch is their second hit; after a commit, the ledger recovers the first batch.
BEFORE_COMMIT = ("after_stage", "before_dest_commit")
# Which point kills each second-batch mode on its first batch as well: one point each, in turn.
FIRST_BATCH_TOO = {mode: POINTS[i % len(POINTS)] for i, mode in enumerate(SECOND_BATCH)}
# What each target is compared on (scd2's validity columns come from the files' mtimes).
COLUMNS = {"scd2": ("id", "seq", "name", "valid_from", "valid_to", "is_current")}
DEFAULT_COLUMNS = ("id", "seq", "name")
# The files' modification times: scd2's batch times, the same in every project.
TAKEN = {
    "part-1.csv": datetime(2026, 1, 1, tzinfo=UTC),
    "part-2.csv": datetime(2026, 1, 2, tzinfo=UTC),
}
# Two files: two batches (one snapshot batch for truncate/blue_green). The second
# file updates id 2 (upsert) and repeats an old seq (the watermark filters it).
FILES = {
    "part-1.csv": "id,seq,name\n1,10,ada\n2,20,grace\n3,30,edsger\n",
    "part-2.csv": "id,seq,name\n2,40,grace hopper\n4,25,barbara\n5,50,frances\n",
}

# What a clean run leaves in each target, and every crashed project must end with.
_EVERY_ROW = [
    (1, 10, "ada"),
    (2, 20, "grace"),
    (2, 40, "grace hopper"),
    (3, 30, "edsger"),
    (4, 25, "barbara"),
    (5, 50, "frances"),
]
_BY_KEY = [
    (1, 10, "ada"),
    (2, 40, "grace hopper"),
    (3, 30, "edsger"),
    (4, 25, "barbara"),
    (5, 50, "frances"),
]
_DAY1, _DAY2 = TAKEN["part-1.csv"], TAKEN["part-2.csv"]
CLEAN: dict[str, list[tuple]] = {
    "append": _EVERY_ROW,
    "upsert": _BY_KEY,
    "truncate": _EVERY_ROW,
    "blue_green": _EVERY_ROW,
    # part-1 loads first (mark 30); part-2 keeps only seq > 30
    "incremental_watermark": [r for r in _EVERY_ROW if r != (4, 25, "barbara")],
    "scd2": [
        (1, 10, "ada", _DAY1, _DAY2, False),
        (2, 20, "grace", _DAY1, _DAY2, False),
        (2, 40, "grace hopper", _DAY2, None, True),
        (3, 30, "edsger", _DAY1, _DAY2, False),
        (4, 25, "barbara", _DAY2, None, True),
        (5, 50, "frances", _DAY2, None, True),
    ],
    "upsert_deletes": [(2, 40, "grace hopper"), (4, 25, "barbara"), (5, 50, "frances")],
    # part-2 replaces the window of ids it has (2, 4, 5); ids 1 and 3 stay
    "replace_window": _BY_KEY,
}


def _project(
    root: Path,
    schema: str,
    pg_url: str,
    destination: str = "postgres",
    modes: tuple[str, ...] = tuple(MODES),
) -> Path:
    root.mkdir(parents=True)
    for mode in modes:
        for name, text in FILES.items():
            path = root / "data" / mode / name
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
            stamp = TAKEN[name].timestamp()
            os.utime(path, (stamp, stamp))
    target = (
        f'destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        if destination == "postgres"
        else 'destination = { connector = "context" }'
    )
    blocks = [
        f'[[pipeline]]\nid = "{mode.replace("_", "-")}"\n'
        f'source = {{ connector = "files", config = {{ path = "data/{mode}/*.csv", columns = {{ id = "bigint", seq = "bigint", name = "string" }} }} }}\n'
        f'{target}\ntables = [{{ name = "{mode}", target = "t_{mode}" }}]\n{load}\n'
        for mode, load in MODES.items()
        if mode in modes
    ]
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "crash-test"

        [spark]
        master = "local[1]"
        # Each crashed apply is a short-lived JVM: C1-only JIT starts it ~30% sooner.
        conf = {{ "spark.driver.extraJavaOptions" = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC" }}

        [context]
        default_destination = "wh"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"
        """)
        + "\n".join(blocks)
    )
    return root


def _hakiri(
    root: Path, *args: str, crash_at: str | None = None
) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "HAKIRI_CRASH_AT"}
    if crash_at:
        env["HAKIRI_CRASH_AT"] = crash_at
    command = [sys.executable, "-m", "hakiri.cli.main", *args, "--project", str(root)]
    return subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)


def _rows(
    pg_url: str, schema: str, modes: tuple[str, ...] = tuple(MODES)
) -> dict[str, list[tuple]]:
    with psycopg.connect(pg_url) as conn:
        return {
            mode: conn.execute(
                sql.SQL("SELECT {} FROM {} ORDER BY id, seq").format(
                    sql.SQL(", ").join(map(sql.Identifier, COLUMNS.get(mode, DEFAULT_COLUMNS))),
                    sql.Identifier(schema, f"t_{mode}"),
                )
            ).fetchall()
            for mode in modes
        }


def _context_rows(root: Path, modes: tuple[str, ...] = tuple(MODES)) -> dict[str, list[tuple]]:
    from deltalake import DeltaTable

    rows = {}
    for mode in modes:
        table = DeltaTable(root / ".hakiri" / "context" / f"t_{mode}").to_pyarrow_table()
        columns = [table.column(c).to_pylist() for c in COLUMNS.get(mode, DEFAULT_COLUMNS)]
        rows[mode] = sorted(zip(*columns, strict=True))
    return rows


def _batch_states(root: Path, pipeline: str) -> list[str]:
    """The pipeline's batches' statuses in claim order, as the catalog has them."""
    with Catalog.open(f"sqlite:///{root / '.hakiri' / 'state.sqlite'}", migrate=False) as catalog:
        return [b.status.value for b in catalog.batches(pipeline)]


@pytest.fixture
def fresh_schema(pg_url: str):
    created = []

    def make() -> str:
        name = f"crash_{uuid.uuid4().hex[:10]}"
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
        created.append(name)
        return name

    yield make
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for name in created:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def _apply_here(root: Path, *args: str, crash_at: str | None = None) -> str:
    """`hakiri apply ARGS` in this process; with `crash_at` (`point[:hit]`) it must stop
    there. Returns what it printed on stdout (nothing when it crashed)."""
    argv = ["apply", *args, "--project", str(root)]
    if crash_at is None:
        result = CliRunner().invoke(app, argv, catch_exceptions=False)
        assert result.exit_code == 0, result.stderr[-3000:]
        return result.stdout
    point, _, hit = crash_at.partition(":")
    with (
        crashing_at(point, int(hit or 1), process_dies=True),
        pytest.raises(SimulatedCrash) as crashed,
    ):
        CliRunner().invoke(app, argv, catch_exceptions=False)
    assert (crashed.value.point, crashed.value.hit) == (point, int(hit or 1))
    return ""


def _crash_every_mode(root: Path, point: str, crash: Callable[..., None]) -> None:
    """Stop each mode's apply at `point` where it hurts, with `crash(pipeline, crash_at)`."""
    for mode in MODES:
        pipeline = mode.replace("_", "-")
        # a fresh apply passes the point once for the first batch: the second is hit 2
        hit = 2
        if mode not in SECOND_BATCH or FIRST_BATCH_TOO[mode] == point:
            crash(pipeline, point)
            if mode not in SECOND_BATCH:
                continue
            hit = 2 if point in BEFORE_COMMIT else 1
        crash(pipeline, f"{point}:{hit}")
        # the second crash landed on the second batch: the first is committed
        assert _batch_states(root, pipeline) == ["committed", "processing"], mode


def _check_recovered(
    root: Path,
    pg_url: str,
    schema: str,
    destination: str,
    stdout: str,
    modes: tuple[str, ...] = tuple(MODES),
) -> None:
    in_postgres = destination == "postgres"
    rows = _rows(pg_url, schema, modes) if in_postgres else _context_rows(root, modes)
    assert rows == {mode: CLEAN[mode] for mode in modes}
    assert "no changes" in stdout


def _check_collected(root: Path, pg_url: str, schema: str, destination: str) -> None:
    """A crash before the staging area is cleared leaves it behind; gc removes it."""
    if destination == "context":
        staging = root / ".hakiri" / "context" / "_staging"
        assert not staging.exists() or list(staging.iterdir()) == []
        return
    with psycopg.connect(pg_url) as conn:
        staging = conn.execute(
            "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename LIKE %s",
            [schema, "\\_hakiri\\_stg\\_%"],
        ).fetchone()
    assert staging == (0,)


def test_a_clean_run_loads_what_every_crash_is_compared_with(
    pg_url: str, tmp_path: Path, fresh_schema, spark
) -> None:
    schema = fresh_schema()
    root = _project(tmp_path / "p", schema, pg_url)

    _apply_here(root)

    assert _rows(pg_url, schema) == CLEAN


@pytest.mark.sail_only
@pytest.mark.parametrize("destination", ["postgres", "context"])
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_point_loses_nothing_and_loads_nothing_twice(
    point: str, destination: str, pg_url: str, tmp_path: Path, fresh_schema, spark
) -> None:
    schema = fresh_schema()
    root = _project(tmp_path / "p", schema, pg_url, destination)

    _crash_every_mode(root, point, lambda pipeline, at: _apply_here(root, pipeline, crash_at=at))
    _apply_here(root)
    _check_recovered(root, pg_url, schema, destination, _apply_here(root))
    collected = CliRunner().invoke(
        app, ["gc", "--older-than", "0", "--project", str(root)], catch_exceptions=False
    )
    assert collected.exit_code == 0, collected.stderr
    _check_collected(root, pg_url, schema, destination)


# The real process deaths: at each point, into each destination, one pipeline's apply killed
# on its second batch (the first committed by then), each point on another second-batch
# mode. Into the context store, the points after the commit kill scd2 and replace_window,
# whose Delta commit (merge.DeltaMerge's, as upsert's hard deletes) no destination test
# retries; the plain writes' and upsert's retries are in
# tests/integration/destinations/context/test_commit_protocol.py.
KILLED = {
    "postgres": {
        "after_stage": "upsert",
        "before_dest_commit": "incremental_watermark",
        "after_dest_commit": "upsert_deletes",
        "before_catalog_commit": "scd2",
    },
    "context": {
        "after_stage": "upsert_deletes",
        "before_dest_commit": "incremental_watermark",
        "after_dest_commit": "scd2",
        "before_catalog_commit": "replace_window",
    },
}


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_killed_process_loses_nothing_and_loads_nothing_twice(
    destination: str, pg_url: str, tmp_path: Path, fresh_schema
) -> None:
    """Each point's apply is a process of its own ended by os._exit there: what only a dead
    process leaves (no finally block, a lease never released, a transaction cut off, a
    staging area left behind) is recovered by one plain apply, in a process of its own."""
    schema = fresh_schema()
    killed = KILLED[destination]
    modes = tuple(killed.values())
    root = _project(tmp_path / "p", schema, pg_url, destination, modes)

    def crash(point: str) -> None:
        pipeline = killed[point].replace("_", "-")
        # a fresh apply passes the point once for the first batch: the second is hit 2
        crashed = _hakiri(root, "apply", pipeline, crash_at=f"{point}:2")
        assert crashed.returncode == CRASH_EXIT_CODE, f"{pipeline}: {crashed.stderr[-2000:]}"
        assert f"crashing at {point} (hit 2" in crashed.stderr
        assert _batch_states(root, pipeline) == ["committed", "processing"], point

    # Two at once (one pipeline each): the catalog is shared, as by any two commands.
    with ThreadPoolExecutor(max_workers=2) as pool:
        list(pool.map(crash, POINTS))
    resumed = _hakiri(root, "apply")
    assert resumed.returncode == 0, resumed.stderr[-3000:]
    # What the resumed apply left is checked in this process: a plain apply finds nothing to
    # do, and gc collects the staging areas the killed ones left behind.
    _check_recovered(root, pg_url, schema, destination, _apply_here(root), modes)
    collected = CliRunner().invoke(
        app, ["gc", "--older-than", "0", "--project", str(root)], catch_exceptions=False
    )
    assert collected.exit_code == 0, collected.stderr
    _check_collected(root, pg_url, schema, destination)
