"""Cron's apply with nothing to load still reaches the pipeline's destination: a broken
credential fails it (exit 1, one line naming the destination), not only the run that has data."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app

pytestmark = pytest.mark.integration


def test_nothing_pending_and_a_broken_destination_credential_is_exit_1(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.csv").write_text("id,name\n1,ada\n")
    (tmp_path / "hakiri.toml").write_text(
        f"""
[project]
name = "cron"

[connections.wh]
type = "postgres"
url = "${{WH_URL}}"

[[pipeline]]
id = "people"
source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", name = "string" }} }} }}
tables = ["people"]
destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
"""
    )

    def apply(url: str):  # type: ignore[no-untyped-def]
        return CliRunner().invoke(app, ["apply", "--project", str(tmp_path)], env={"WH_URL": url})

    assert apply(pg_url).exit_code == 0
    quiet = apply(pg_url)
    assert quiet.exit_code == 0 and "no changes" in quiet.stdout, quiet.stdout

    # The same URL with a role the server does not have: nothing to load, and still exit 1.
    broken = pg_url.replace("postgres@", "nobody@")
    failed = apply(broken)
    assert failed.exit_code == 1, failed.stdout
    errors = [line for line in failed.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and "cannot connect to PostgreSQL" in errors[0], failed.stderr
    assert 'role "nobody" does not exist' in errors[0]
    assert "Traceback" not in failed.stderr
