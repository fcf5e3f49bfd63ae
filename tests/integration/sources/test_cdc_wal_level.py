"""A cdc_mirror source on a server without logical decoding (wal_level = replica, the
default): plan and apply fail with one line naming the setting and the fix, and nothing is
created on the source (no slot, no publication)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import psycopg
import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.postgres import TestPostgres

pytestmark = pytest.mark.integration


def test_a_source_without_logical_wal_is_one_clear_error_before_anything_is_created(
    tmp_path: Path, pg_url: str
) -> None:
    with TestPostgres(wal_level="replica") as server:
        with psycopg.connect(server.url, autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id bigint PRIMARY KEY, status text)")
            conn.execute("INSERT INTO orders VALUES (1, 'new')")
        (tmp_path / "hakiri.toml").write_text(
            textwrap.dedent(f"""
            [project]
            name = "cdc"

            [[pipeline]]
            id = "mirror"
            tables = ["orders"]
            load = {{ mode = "cdc_mirror", upsert_key = ["id"] }}
            destination = {{ connector = "postgres", config = {{ url = "{pg_url}" }} }}
            source = {{ connector = "postgres", config = {{ url = "{server.url}", cdc = {{ slot = "s_wal", publication = "p_wal" }} }} }}
            """)
        )
        for command in ("plan", "apply"):
            done = CliRunner().invoke(app, [command, "--project", str(tmp_path)])
            assert done.exit_code == 1, (command, done.stdout, done.stderr)
            said = done.stdout + done.stderr
            assert "the server runs with wal_level = replica" in said, said
            if command == "apply":  # plan lists each pipeline's error; apply gives the fix
                assert "hint: set it and restart the server: ALTER SYSTEM SET wal_level" in said
            assert "internal error" not in said and "Traceback" not in said, said
        with psycopg.connect(server.url) as conn:
            assert conn.execute("SELECT count(*) FROM pg_replication_slots").fetchone() == (0,)
            assert conn.execute("SELECT count(*) FROM pg_publication").fetchone() == (0,)
