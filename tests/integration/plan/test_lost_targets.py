"""A target dropped by hand after hakiri loaded it: plan says apply reloads it (exit 2), apply
loads the same rows again, and the next plan has nothing to do (exit 0). The same for a table
dropped and created again by hand, and for a context-store table whose directory was removed.
Where a file that made the table is gone, plan and apply say so, and only
`apply --restore-partial` goes on with what the files still hold."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import psycopg
import pytest
from deltalake import DeltaTable
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app

pytestmark = pytest.mark.integration


def _project(root: Path, destination: str) -> None:
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.csv").write_text("id,name\n1,ada\n2,grace\n")
    (root / "data" / "b.csv").write_text("id,name\n3,linus\n")
    (root / "hakiri.toml").write_text(
        f"""
[project]
name = "lost"

[connections.wh]
type = "postgres"
url = "${{WH_URL}}"

[[pipeline]]
id = "people"
source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", name = "string" }} }} }}
tables = ["people"]
destination = {destination}
"""
    )


class Cli:
    def __init__(self, root: Path, env: dict[str, str]) -> None:
        self.root, self.env = root, env

    def __call__(self, *args: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(app, [*args, "--project", str(self.root)], env=self.env)

    def plan(self) -> tuple[int, dict]:
        done = self("plan", "--json", "--detailed-exitcode")
        return done.exit_code, json.loads(done.stdout)


def _pg_rows(pg_url: str, schema: str) -> list[tuple]:
    with psycopg.connect(pg_url) as conn:
        query = sql.SQL("SELECT id, name FROM {} ORDER BY id").format(
            sql.Identifier(schema, "people")
        )
        return conn.execute(query).fetchall()


def _pg(pg_url: str, statement: sql.Composable) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(statement)


def _applied(cli: Cli) -> None:
    done = cli("apply")
    assert done.exit_code == 0, done.stderr


def test_a_postgres_target_dropped_by_hand_is_planned_and_reloaded(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    _project(
        tmp_path,
        f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}',
    )
    cli = Cli(tmp_path, {"WH_URL": pg_url})
    _applied(cli)
    loaded = _pg_rows(pg_url, pg_schema)
    assert len(loaded) == 3

    _pg(pg_url, sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_schema, "people")))
    code, plan = cli.plan()
    assert code == 2, plan
    [pipeline] = plan["pipelines"]
    assert pipeline["action"] == "change"
    assert (
        f"{pg_schema}.people is missing since hakiri loaded it: apply creates it and reloads "
        "2 batches"
    ) in pipeline["warnings"]
    [restore] = [s for s in pipeline["steps"] if s["step"] == "restore"]
    assert (restore["target"], len(restore["batches"])) == (f"{pg_schema}.people", 2)

    applied = cli("apply", "--json")
    assert applied.exit_code == 0, applied.stderr
    [outcome] = json.loads(applied.stdout)
    assert outcome["steps"] == pipeline["steps"]  # plan said what apply did
    assert _pg_rows(pg_url, pg_schema) == loaded  # the same rows, once
    assert cli.plan()[0] == 0

    # Dropped and created again by hand (empty): another table by that name, reloaded too.
    _pg(pg_url, sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_schema, "people")))
    _pg(
        pg_url,
        sql.SQL("CREATE TABLE {} (id bigint, name text)").format(
            sql.Identifier(pg_schema, "people")
        ),
    )
    code, plan = cli.plan()
    assert code == 2
    assert any("was dropped and created again" in w for w in plan["pipelines"][0]["warnings"])
    _applied(cli)
    assert _pg_rows(pg_url, pg_schema) == loaded
    assert cli.plan()[0] == 0


def test_a_context_table_removed_comes_back_and_a_gone_file_needs_a_choice(
    tmp_path: Path, spark
) -> None:
    _project(tmp_path, '{ connector = "context" }')
    cli = Cli(tmp_path, {})
    table = tmp_path / ".hakiri" / "context" / "people"
    _applied(cli)

    def rows() -> list[int]:
        return sorted(DeltaTable(str(table)).to_pyarrow_table().column("id").to_pylist())

    assert rows() == [1, 2, 3]
    shutil.rmtree(table)
    code, plan = cli.plan()
    assert code == 2, plan
    assert (
        "context:people is missing since hakiri loaded it: apply creates it and reloads 2 batches"
    ) in plan["pipelines"][0]["warnings"]
    _applied(cli)
    assert rows() == [1, 2, 3]
    assert cli.plan()[0] == 0

    # A file that made the table is gone: plan says what cannot come back; apply stops.
    shutil.rmtree(table)
    (tmp_path / "data" / "a.csv").unlink()
    code, plan = cli.plan()
    assert code == 1, plan
    [error] = plan["pipelines"][0]["errors"]
    assert (
        "context:people is missing since hakiri loaded it, and the source cannot give all of it back: data/a.csv is gone"
        in error
    )
    refused = cli("apply")
    assert refused.exit_code == 1
    assert "data/a.csv is gone" in refused.stderr
    assert "--restore-partial" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert not table.exists()  # nothing moved

    partial = cli("apply", "--restore-partial")
    assert partial.exit_code == 0, partial.stderr
    assert rows() == [3]  # what the files still hold
    assert cli.plan()[0] == 0
