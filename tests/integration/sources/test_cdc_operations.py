"""Operating a cdc_mirror pipeline on real processes: plan and `hakiri cdc lag` show the
lag, `status` too; past max_lag_bytes plan warns and apply alerts; `hakiri cdc drop-slot`
releases the slot and the next apply takes a new snapshot; a column added to the source
reaches the target."""

from __future__ import annotations

import json
import textwrap
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from tests.support.cdc_workload import drop_mirror
from tests.support.project import Project

pytestmark = pytest.mark.integration


@pytest.fixture
def mirrored(
    request: pytest.FixtureRequest, tmp_path: Path, pg_url: str, pg_schema: str
) -> Iterator[Project]:
    """A source table `items` in pg_schema, mirrored by pipeline `m` into <pg_schema>_m
    (or the context store, with indirect parametrization "context"); max_lag_bytes = 1:
    any retained WAL is over it. Slot and publication dropped after."""
    s = pg_schema
    target = (
        '{ connector = "context" }'
        if getattr(request, "param", "postgres") == "context"
        else f'{{ connector = "postgres", config = {{ connection = "db", schema = "{s}_m" }} }}'
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, name text)").format(
                sql.Identifier(s, "items")
            )
        )
        conn.execute(
            sql.SQL("INSERT INTO {} SELECT g, 'n' || g FROM generate_series(1, 20) g").format(
                sql.Identifier(s, "items")
            )
        )
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(f"{s}_m")))
    project = Project(tmp_path, pg_url, s)
    project.write(
        "hakiri.toml",
        textwrap.dedent(f"""
        [project]
        name = "cdc"

        [connections.db]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "m"
        tables = ["items"]
        load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
        destination = {target}

        [pipeline.source]
        connector = "postgres"
        config = {{ connection = "db", schema = "{s}", cdc = {{ slot = "s_{s}", publication = "p_{s}", max_lag_bytes = 1 }} }}
        """),
    )
    try:
        yield project
    finally:
        drop_mirror(pg_url, f"s_{s}", f"p_{s}", f"{s}_m")


def _run(pg_url: str, *statements: str) -> None:
    with psycopg.connect(pg_url, autocommit=True, options="-c synchronous_commit=on") as conn:
        for statement in statements:
            conn.execute(statement)


def _same(project: Project) -> bool:
    s = project.schema
    source = project.query(f'SELECT id, name FROM "{s}".items ORDER BY id')
    store = project.root / ".hakiri" / "context" / "items"
    if store.exists():
        from deltalake import DeltaTable

        arrow = DeltaTable(str(store)).to_pyarrow_table().sort_by("id")
        target = list(zip(arrow["id"].to_pylist(), arrow["name"].to_pylist(), strict=True))
    else:
        target = project.query(f'SELECT id, name FROM "{s}_m".items ORDER BY id')
    return source == target


def test_lag_is_shown_and_a_slot_over_its_limit_warns_and_alerts(
    mirrored: Project, pg_url: str, spark
) -> None:
    project, s = mirrored, mirrored.schema
    before = project.cli("plan", "--json")
    [pipeline] = json.loads(before.stdout)["pipelines"]
    assert pipeline["cdc"]["slot_exists"] is False
    assert "does not exist yet" in project.cli("plan").output

    assert project.cli("apply").exit_code == 0
    _run(pg_url, f"UPDATE \"{s}\".items SET name = name || '!' WHERE id <= 5")
    assert project.cli("apply").exit_code == 0
    assert _same(project)

    lag = project.cli("cdc", "lag", "m", "--json")
    assert lag.exit_code == 0, lag.output
    found = json.loads(lag.stdout)
    assert found["slot"] == f"s_{s}" and found["applied_to"] is not None
    assert 0 <= found["behind_seconds"] < 60 and found["retained_bytes"] > 1
    status = json.loads(project.cli("status", "m", "--json").stdout)
    assert status["cdc"]["applied_to"] == found["applied_to"]

    _run(pg_url, f'DELETE FROM "{s}".items WHERE id IN (7, 8)')
    plan = project.cli("plan")
    assert "retains more WAL than max_lag_bytes" in plan.output
    assert "2 change(s) pending" in plan.output
    alerts = json.loads(project.cli("alerts", "--json").stdout)
    assert [a["kind"] for a in alerts].count("cdc_lag") == 1


@pytest.mark.parametrize("mirrored", ["postgres", "context"], indirect=True)
def test_a_dropped_slot_is_released_and_the_next_apply_takes_a_new_snapshot(
    mirrored: Project, pg_url: str, spark
) -> None:
    project, s = mirrored, mirrored.schema
    assert project.cli("apply").exit_code == 0
    dropped = project.cli("cdc", "drop-slot", "m", "--json")
    assert dropped.exit_code == 0, dropped.output
    assert json.loads(dropped.stdout) == {"pipeline_id": "m", "slot": f"s_{s}", "dropped": True}
    gone = project.query("SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", f"s_{s}")
    assert gone == [(0,)]
    # Changes while no slot exists are lost to decoding; the new snapshot has them.
    _run(pg_url, f'DELETE FROM "{s}".items WHERE id > 15', f"UPDATE \"{s}\".items SET name = 'x'")
    plan = json.loads(project.cli("plan", "--json").stdout)["pipelines"][0]
    [enqueue] = [step for step in plan["steps"] if step["step"] == "enqueue"]
    assert [b["kind"] for b in enqueue["batches"]] == ["cdc-snapshot"]
    assert project.cli("apply").exit_code == 0
    assert _same(project)
    again = project.cli("cdc", "drop-slot", "m", "--json")
    assert again.exit_code == 0 and json.loads(again.stdout)["dropped"] is True
    assert json.loads(project.cli("cdc", "drop-slot", "m", "--json").stdout)["dropped"] is False


def test_a_column_added_to_the_source_reaches_the_target(
    mirrored: Project, pg_url: str, spark
) -> None:
    project, s = mirrored, mirrored.schema
    assert project.cli("apply").exit_code == 0
    _run(
        pg_url,
        f'ALTER TABLE "{s}".items ADD COLUMN colour text',
        f"INSERT INTO \"{s}\".items VALUES (100, 'new', 'red')",
        f"UPDATE \"{s}\".items SET colour = 'blue' WHERE id = 1",
    )
    done = project.cli("apply")
    assert done.exit_code == 0, done.output
    assert _same(project)
    coloured = project.query(
        f'SELECT id, colour FROM "{s}_m".items WHERE colour IS NOT NULL ORDER BY id'
    )
    assert coloured == [(1, "blue"), (100, "red")]


def test_a_pipeline_that_reads_no_change_stream_is_refused_by_cdc_commands(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    project = Project(tmp_path, pg_url, pg_schema)
    project.write(
        "hakiri.toml",
        """
        [project]
        name = "x"

        [[pipeline]]
        id = "files"
        source = { connector = "files", config = { path = "data/*.csv" } }
        tables = ["t"]
        """,
    )
    done = project.cli("cdc", "lag", "files")
    assert done.exit_code == 1 and "reads no change stream" in done.output
    assert "Traceback" not in done.output


def test_a_column_the_mirror_cannot_decode_is_refused_before_the_snapshot(
    mirrored: Project, pg_url: str, spark
) -> None:
    s = mirrored.schema
    _run(pg_url, f'ALTER TABLE "{s}".items ADD COLUMN tags int[]')
    done = mirrored.cli("apply")
    assert done.exit_code == 1
    assert "cannot decode" in done.output and "tags (integer[])" in done.output
    assert "Traceback" not in done.output
    assert mirrored.query(
        "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", f"s_{s}"
    ) == [(0,)]


def test_a_slot_dropped_while_a_range_is_pending_leads_to_a_new_snapshot(
    mirrored: Project, pg_url: str, spark
) -> None:
    """A range planned, the apply killed before its commit, the slot dropped: the range is
    never applied as if complete; the next apply takes a new snapshot and loses nothing."""
    import os
    import subprocess
    import sys

    from hakiri.engine.crash import CRASH_EXIT_CODE

    project, s = mirrored, mirrored.schema
    assert project.cli("apply").exit_code == 0
    _run(pg_url, f"INSERT INTO \"{s}\".items SELECT g, 'late' FROM generate_series(21, 25) g")
    killed = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(project.root)],
        env={**os.environ, "HAKIRI_CRASH_AT": "after_stage"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == CRASH_EXIT_CODE, killed.stderr
    _run(pg_url, f"SELECT pg_drop_replication_slot('s_{s}')")
    done = project.cli("apply")
    assert done.exit_code == 0, done.output
    assert _same(project)
