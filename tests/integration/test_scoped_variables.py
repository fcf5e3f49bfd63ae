"""A command resolves only the variables of the pipelines it works on: with the variable of a
connection that one pipeline uses unset (cron's empty environment), the other pipelines plan
and apply, `runs`, `status` and `alerts` answer, and whatever does need it names the variable,
its line and the pipeline. `validate` still checks the whole project."""

from __future__ import annotations

import os
from pathlib import Path

from deltalake import DeltaTable
from typer.testing import CliRunner

from hakiri.cli.main import app

PROJECT = """
[project]
name = "scoped"

[connections.other]
type = "postgres"
url = "${OTHER_PG_URL}"

[[pipeline]]
id = "local"
source = { connector = "files", config = { path = "data/*.csv", columns = { id = "bigint", name = "string" } } }
tables = ["people"]

[[pipeline]]
id = "other"
source = { connector = "postgres", config = { connection = "other" } }
tables = ["accounts"]
"""


def test_an_unset_variable_only_fails_the_commands_of_the_pipeline_that_needs_it(
    tmp_path: Path, spark, monkeypatch
) -> None:
    monkeypatch.chdir(tmp_path)  # files are named as a user in the project sees them
    (tmp_path / "hakiri.toml").write_text(PROJECT)
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "people.csv").write_text("id,name\n1,ada\n2,grace\n")
    env = {k: v for k, v in os.environ.items() if k != "OTHER_PG_URL"}

    def cli(*args: str):
        return CliRunner().invoke(app, [*args, "--project", str(tmp_path)], env=env)

    for command in (("plan", "local"), ("apply", "local"), ("runs",), ("status",), ("alerts",)):
        done = cli(*command)
        assert done.exit_code == 0, (command, done.stdout, done.stderr)
        assert "Traceback" not in done.stderr
    people = DeltaTable(str(tmp_path / ".hakiri" / "context" / "people")).to_pyarrow_table()
    assert sorted(people.column("id").to_pylist()) == [1, 2]

    for command in (("plan",), ("apply", "other"), ("apply",)):
        done = cli(*command)
        assert done.exit_code == 1, (command, done.stdout, done.stderr)
        assert (
            "error: environment variable `OTHER_PG_URL` is not set; pipeline `other` needs it "
            "(hakiri.toml:7 at connections.other.url)"
        ) in done.stderr, (command, done.stderr)
        assert "hint: export OTHER_PG_URL=..." in done.stderr
        assert "Traceback" not in done.stderr

    checked = cli("validate")
    assert checked.exit_code == 1
    assert "environment variable `OTHER_PG_URL` is not set (hakiri.toml:7" in checked.stderr
