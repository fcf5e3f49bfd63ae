"""`hakiri plan` on a PostgreSQL table source: parallelism warnings and a backfill in progress."""

from __future__ import annotations

import json
from pathlib import Path

from tests.support.project import Project


def backfill_project(root: Path, pg_url: str, schema: str) -> Project:
    """`src` (1,000 rows, one a minute from 2024-01-01 00:01) appended into `dst` in 6-hour
    chunks, two at a time, one chunk per apply."""
    project = Project(root, pg_url, schema)
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "backfill-plan"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        tables = [{{ name = "src", target = "dst", incremental = "updated_at" }}]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        load = {{ mode = "append" }}

        [pipeline.backfill]
        window = "6h"
        parallelism = 2
        max_chunks_per_tick = 1
        """,
    )
    project.query(f'CREATE TABLE "{schema}".src (id bigint PRIMARY KEY, updated_at timestamptz)')
    project.query(
        f'INSERT INTO "{schema}".src '
        "SELECT g, timestamptz '2024-01-01 00:00+00' + g * interval '1 minute' "
        "FROM generate_series(1, 1000) g"
    )
    project.query(f'ANALYZE "{schema}".src')  # row estimates from statistics, as in production
    return project


def test_plan_warns_about_parallel_append_and_exits_2_while_chunks_remain(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = backfill_project(tmp_path, pg_url, pg_schema)
    before = project.cli("plan")
    assert before.exit_code == 0, before.stderr
    assert "is loaded twice; use mode = 'upsert'" in before.stdout  # timestamp cursor + append

    first = project.cli("apply", "--json")
    assert first.exit_code == 0, first.stderr
    [outcome] = json.loads(first.stdout)
    # 00:01 .. 16:40 in 6-hour windows: three chunks, one per apply
    assert (outcome["batches"], outcome["remaining"]) == (1, 2)

    result = project.cli("plan", "--detailed-exitcode")
    assert result.exit_code == 2, result.stderr
    assert "~ p" in result.stdout
    assert "backfilling src: 2 of 3 chunk(s) left" in result.stdout
    assert "loaded twice" in result.stdout
    assert "Plan: 0 to add, 1 to change, 0 to retire." in result.stdout
    [planned] = json.loads(project.cli("plan", "--json").stdout)["pipelines"]
    assert planned["action"] == "change" and planned["diff"] == []
    # the two chunks left are the work; no row is past planned_to (2024-01-01 16:40)
    [pending] = planned["pending"]
    assert (pending["queued_batches"], pending["new_batches"]) == (2, 0)
    [load] = planned["steps"]
    assert load["step"] == "load" and len(load["batches"]) == 1  # max_chunks_per_tick = 1

    for _ in range(2):
        assert project.cli("apply").exit_code == 0
    assert project.query(f'SELECT count(*) FROM "{pg_schema}".dst') == [(1000,)]
    # finished, and no row past planned_to: converged
    done = project.cli("plan", "--detailed-exitcode")
    assert done.exit_code == 0, done.stderr
    assert "backfilling" not in done.stdout
    assert "1 unchanged" in done.stdout
