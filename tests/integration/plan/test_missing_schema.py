"""A target schema that does not exist: plan shows `+ create schema` and apply creates it; where
the destination's role may not create it, plan says so and apply stops before anything is
made, not even a cdc_mirror's replication slot or publication."""

from __future__ import annotations

import json
import textwrap
import uuid
from pathlib import Path

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.cdc_workload import drop_mirror

pytestmark = pytest.mark.integration


def _cli(root: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [*args, "--project", str(root)])


def test_a_missing_schema_is_planned_and_created(tmp_path: Path, pg_url: str, spark) -> None:
    schema = f"reporting_{uuid.uuid4().hex[:8]}"
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "pay.csv").write_text("id,amount\n1,2.5\n")
    (tmp_path / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "schemas"

        [[pipeline]]
        id = "pay"
        source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", amount = "double" }} }} }}
        tables = ["pay"]
        destination = {{ connector = "postgres", config = {{ url = "{pg_url}", schema = "{schema}" }} }}
        """)
    )
    try:
        planned = _cli(tmp_path, "plan")
        assert planned.exit_code == 0, planned.stderr
        assert f"+ create schema {schema}" in planned.stdout
        assert f"+ create {schema}.pay" in planned.stdout
        applied = _cli(tmp_path, "apply")
        assert applied.exit_code == 0, applied.stderr
        with psycopg.connect(pg_url) as conn:
            query = sql.SQL("SELECT id, amount FROM {}").format(sql.Identifier(schema, "pay"))
            assert conn.execute(query).fetchall() == [(1, 2.5)]
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(schema)))


def test_a_schema_the_role_may_not_create_stops_apply_before_the_slot(
    tmp_path: Path, pg_url: str, pg_schema: str
) -> None:
    role = f"loader_{uuid.uuid4().hex[:8]}"
    slot, publication = f"s_{pg_schema}", f"p_{pg_schema}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE ROLE {} LOGIN").format(sql.Identifier(role)))
        conn.execute(
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, status text)").format(
                sql.Identifier(pg_schema, "orders")
            )
        )
    loader_url = pg_url.replace("postgres@", f"{role}@")
    (tmp_path / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "schemas"

        [[pipeline]]
        id = "mirror"
        tables = ["orders"]
        load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
        destination = {{ connector = "postgres", config = {{ url = "{loader_url}", schema = "nowhere_{pg_schema}" }} }}
        source = {{ connector = "postgres", config = {{ url = "{pg_url}", schema = "{pg_schema}", cdc = {{ slot = "{slot}", publication = "{publication}" }} }} }}
        """)
    )
    try:
        planned = _cli(tmp_path, "plan", "--json")
        assert planned.exit_code == 1, planned.stdout
        [pipeline] = json.loads(planned.stdout)["pipelines"]
        refusal = f"schema nowhere_{pg_schema} does not exist, and the connection's role may not create it"
        assert any(refusal in e for e in pipeline["errors"]), pipeline["errors"]
        applied = _cli(tmp_path, "apply")
        assert applied.exit_code == 1
        assert refusal in applied.stderr, applied.stderr
        assert f"hint: create it (CREATE SCHEMA nowhere_{pg_schema})" in applied.stderr
        with psycopg.connect(pg_url) as conn:
            slots = conn.execute(
                "SELECT count(*) FROM pg_replication_slots WHERE slot_name = %s", (slot,)
            ).fetchone()
            publications = conn.execute(
                "SELECT count(*) FROM pg_publication WHERE pubname = %s", (publication,)
            ).fetchone()
        assert (slots, publications) == ((0,), (0,))
    finally:
        drop_mirror(pg_url, slot, publication, f"nowhere_{pg_schema}")
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP OWNED BY {}").format(sql.Identifier(role)))
            conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(role)))
