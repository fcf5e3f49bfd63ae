"""An engine hakiri does not run on, as a user meets it. (Sail refuses none of hakiri's
capabilities any more: what its readers cannot do, hakiri's own paths do, and the conformance
tests in this folder run on both engines: test_malformed_on_every_engine,
test_datetime_patterns, test_provenance_inferred.)"""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner, Result

from hakiri.cli.main import app
from tests.support.project import Project

SAIL = {"HAKIRI_SPARK_ENGINE": "sail"}


def _context_project(root: Path, config: str, mode: str = "append") -> Project:
    project = Project(root, "", "")
    project.write(
        "hakiri.toml",
        f"""
        [project]
        name = "refusals"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ {config} }} }}
        tables = ["t"]
        load = {{ mode = "{mode}" }}
        """,
    )
    return project


def _run(project: Project, *args: str, env: dict[str, str]) -> Result:
    return CliRunner().invoke(
        app, [*args, "--project", str(project.root)], env=env, catch_exceptions=False
    )


def _one_line(result: Result) -> str:
    return " ".join(result.output.split())


def test_an_unknown_engine_is_one_line_with_the_choices(tmp_path: Path) -> None:
    project = _context_project(tmp_path, 'path = "data/*.csv"')
    result = _run(project, "validate", env={"HAKIRI_SPARK_ENGINE": "flink"})
    assert result.exit_code == 1
    assert "HAKIRI_SPARK_ENGINE='flink' is not an engine hakiri runs on" in _one_line(result)
    assert "Traceback" not in result.output
