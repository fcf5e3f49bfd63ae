"""A small hakiri project in a temp dir, driven through the real CLI (Typer's CliRunner, in-process)."""

from __future__ import annotations

import textwrap
from pathlib import Path
from typing import Any

import psycopg
from psycopg import sql
from typer.testing import CliRunner, Result

from hakiri.cli.main import app


class Project:
    def __init__(self, root: Path, pg_url: str, schema: str) -> None:
        self.root, self.pg_url, self.schema = root, pg_url, schema

    def write(self, relative: str, text: str) -> None:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))

    def cli(self, *args: str, env: dict[str, str] | None = None) -> Result:
        """`hakiri ARGS --project ROOT`, in-process; `env` is set for the call only."""
        return CliRunner().invoke(
            app, [*args, "--project", str(self.root)], env=env, catch_exceptions=False
        )

    def rows(self, table: str, order: str = "id") -> list[tuple[Any, ...]]:
        with psycopg.connect(self.pg_url) as conn:
            return conn.execute(
                sql.SQL("SELECT * FROM {} ORDER BY {}").format(
                    sql.Identifier(self.schema, table), sql.Identifier(order)
                )
            ).fetchall()

    def id_name_rows(self, table: str, destination: str) -> list[tuple[Any, ...]]:
        """(id, name) of every row of `table`, sorted: in the suite's PostgreSQL schema, or
        read by delta-rs from the project's context store."""
        if destination == "postgres":
            return self.rows(table)
        from deltalake import DeltaTable

        found = DeltaTable(str(self.root / ".hakiri" / "context" / table)).to_pyarrow_table()
        return sorted((r["id"], r["name"]) for r in found.to_pylist())

    def query(self, statement: str | sql.Composable, *params: Any) -> list[tuple[Any, ...]]:
        with psycopg.connect(self.pg_url, autocommit=True) as conn:
            cursor = conn.execute(statement, params or None)
            return cursor.fetchall() if cursor.description else []


def postgres_project(root: Path, pg_url: str, schema: str, *, source: str, body: str) -> Project:
    """A project with one pipeline `p`: a files source (`source` is its inline config table)
    loading table `t` into `schema` of the suite's PostgreSQL; `body` adds pipeline keys."""
    project = Project(root, pg_url, schema)
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "test"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {source} }}
        tables = ["t"]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        {textwrap.dedent(body).strip().replace(chr(10), chr(10) + " " * 8)}
        """,
    )
    return project
