"""Pre and post hooks through `hakiri apply` into a real PostgreSQL: when they run, and what a failing
one leaves behind."""

from __future__ import annotations

import json
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from hakiri.errors import UnsafeHook
from hakiri.hooks.runner import run_sql_hooks
from hakiri.hooks.webhook import allow_loopback_for_tests
from hakiri.spec.hooks import SqlHook
from tests.support.project import Project, postgres_project


def make_project(root: Path, pg_url: str, schema: str, mode: str, hooks: str) -> Project:
    project = postgres_project(
        root,
        pg_url,
        schema,
        source='{ path = "data/*.csv", columns = { id = "bigint", v = "string" } }',
        body=f'load = {{ mode = "{mode}" }}\nhooks = {hooks}',
    )
    project.write("data/a.csv", "id,v\n1,x\n2,y\n")
    return project


def last_run(project: Project) -> dict:
    return json.loads(project.cli("runs", "p", "--json").stdout)[0]


def create_target_and_view(project: Project) -> None:
    t = sql.Identifier(project.schema, "t")
    project.query(sql.SQL("CREATE TABLE {} (id bigint, v text)").format(t))
    project.query(
        sql.SQL("CREATE MATERIALIZED VIEW {} AS SELECT count(*) AS n FROM {}").format(
            sql.Identifier(project.schema, "t_count"), t
        )
    )


def view_count(project: Project) -> int:
    return project.query(
        sql.SQL("SELECT n FROM {}").format(sql.Identifier(project.schema, "t_count"))
    )[0][0]


def test_post_hook_refreshes_a_materialized_view_after_the_load(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        "append",
        '{ post = [{ type = "refresh_mat_view", view = "t_count" }, { type = "sql", statement = "ANALYZE t" }] }'.replace(
            "ANALYZE t", f'ANALYZE \\"{pg_schema}\\".t'
        ),
    )
    create_target_and_view(project)
    result = project.cli("apply")
    assert result.exit_code == 0, result.stderr
    assert view_count(project) == 2
    analyzed = project.query(
        "SELECT last_analyze IS NOT NULL FROM pg_stat_user_tables WHERE schemaname = %s AND relname = 't'",
        pg_schema,
    )
    assert analyzed == [(True,)]


def test_a_failing_pre_hook_stops_the_run_before_anything_loads(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        "append",
        '{ pre = [{ type = "refresh_mat_view", view = "missing_view" }] }',
    )
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "pre refresh_mat_view hook on missing_view failed" in result.stderr
    assert "nothing was loaded" in result.stderr
    assert project.query("SELECT to_regclass(%s)", f'"{pg_schema}".t') == [(None,)]
    assert last_run(project)["status"] == "failed"
    # Fix the hook: the batch is still pending and loads on the next apply.
    project.write(
        "hakiri.toml",
        (project.root / "hakiri.toml").read_text().replace("missing_view", "t_count"),
    )
    create_target_and_view(project)
    assert project.cli("apply").exit_code == 0
    assert project.rows("t") == [(1, "x"), (2, "y")]
    assert view_count(project) == 0  # pre hook: refreshed before the load


def test_a_failing_post_hook_after_a_committed_load_marks_the_run_partial(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        "append",
        '{ post = [{ type = "refresh_mat_view", view = "missing_view" }] }',
    )
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "post refresh_mat_view hook on missing_view failed" in result.stderr
    assert "the rows were loaded before the post hook ran" in result.stderr
    assert project.rows("t") == [(1, "x"), (2, "y")]
    run = last_run(project)
    assert (run["status"], run["error_kind"], run["row_count"]) == ("partial", "HookError", 2)
    # Nothing left to load: the batch is committed. The spec the partial run could not record
    # is recorded now, and apply says so.
    again = project.cli("apply")
    assert again.exit_code == 0
    assert "no rows to load; 1 manifest change recorded" in again.stdout
    assert "no changes: every pipeline is up to date" in project.cli("apply").stdout


def test_blue_green_post_hook_runs_before_the_swap_and_a_failure_keeps_the_old_table(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        "blue_green",
        '{ post = [{ type = "sql", statement = "SELECT 1 / (SELECT count(*) - 3 FROM t)" }] }',
    )
    # First load: t does not exist, so blue_green creates it and the hook sees 2 rows: 1/(2-3) fine.
    assert project.cli("apply").exit_code == 0, "first load"
    assert project.rows("t") == [(1, "x"), (2, "y")]
    # Next load brings 3 rows; inside the swap transaction the hook still reads the OLD `t`
    # (unqualified name resolves to the live table, which has 2 rows) -> fine as well.
    project.write("data/a.csv", "id,v\n1,x\n2,y\n3,z\n")
    assert project.cli("apply").exit_code == 0
    assert len(project.rows("t")) == 3
    # Now the live table has 3 rows: the hook divides by zero, the swap rolls back.
    project.write("data/a.csv", "id,v\n9,new\n")
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "post sql hook" in result.stderr and "division by zero" in result.stderr
    assert [r[0] for r in project.rows("t")] == [1, 2, 3]
    leftovers = project.query(
        "SELECT tablename FROM pg_tables WHERE schemaname = %s ORDER BY 1", pg_schema
    )
    assert leftovers == [("t",)]


def test_the_sql_guard_runs_again_at_run_time(pg_url: str, pg_schema: str) -> None:
    # A hook that bypassed manifest validation (built without it) is still refused, before it runs.
    sneaky = SqlHook.model_construct(type="sql", statement=f'DROP SCHEMA "{pg_schema}" CASCADE')
    with psycopg.connect(pg_url, autocommit=True) as conn:
        with pytest.raises(UnsafeHook):
            run_sql_hooks(conn, "post", [sneaky], default_schema=pg_schema, in_transaction=False)
        assert conn.execute(
            "SELECT count(*) FROM pg_namespace WHERE nspname = %s", (pg_schema,)
        ).fetchone() == (1,)


def test_a_post_webhook_receives_the_run_summary(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, hook_server, ca_file: str, monkeypatch
) -> None:
    monkeypatch.setenv("HOOK_TOKEN", "s3cret")
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        "append",
        f'{{ post = [{{ type = "webhook", url = "https://localhost:{hook_server.port}/done?token=${{HOOK_TOKEN}}" }}] }}',
    )
    with allow_loopback_for_tests(ca_file):
        result = project.cli("apply")
        run = last_run(project)
    assert result.exit_code == 0, result.stderr
    [received] = hook_server.requests
    assert received.path == "/done?token=s3cret"
    body = json.loads(received.body)
    assert {k: body[k] for k in ("pipeline_id", "run_id", "status", "rows_loaded", "hook")} == {
        "pipeline_id": "p",
        "run_id": run["run_id"],
        "status": "success",
        "rows_loaded": 2,
        "hook": "post",
    }


def test_a_webhook_to_loopback_is_refused_when_the_manifest_loads(
    tmp_path: Path, pg_url: str, pg_schema: str, spark, hook_server
) -> None:
    project = make_project(
        tmp_path,
        pg_url,
        pg_schema,
        "append",
        f'{{ post = [{{ type = "webhook", url = "https://localhost:{hook_server.port}/done" }}] }}',
    )
    result = project.cli("apply")
    assert result.exit_code == 1
    assert "webhook URL refused: localhost is a loopback name" in result.stderr
    assert hook_server.requests == [] and hook_server.connections == 0
    assert project.query("SELECT to_regclass(%s)", f'"{pg_schema}".t') == [(None,)]
