"""What the Sail engine refuses, as a user meets it: `validate` and `plan` name the pipeline,
the reason and the alternative before anything runs. (What Sail's readers cannot set aside,
JSON array elements and CSV records of the wrong width, hakiri's tasks read on Sail:
test_malformed_on_every_engine.)"""

from __future__ import annotations

import json
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


def test_validate_names_what_sail_refuses_and_spark_runs_it(tmp_path: Path) -> None:
    project = _context_project(
        tmp_path, 'path = "data/*.csv", timestamp_format = "dd.MM.yyyy HH:mm"'
    )
    project.write("data/a.csv", "id,at\n1,01.02.2024 10:00\n")

    on_sail = _run(project, "validate", env=SAIL)
    assert on_sail.exit_code == 1
    text = _one_line(on_sail)
    assert "pipeline p: Sail parses date and timestamp patterns differently" in text
    assert "(engine sail)" in text and 'engine = "spark"' in text
    assert "Traceback" not in on_sail.output

    assert _run(project, "validate", env={"HAKIRI_SPARK_ENGINE": "spark"}).exit_code == 0


def test_plan_reports_the_refusal_as_an_error_of_the_pipeline(tmp_path: Path) -> None:
    project = _context_project(
        tmp_path, 'path = "data/*.csv", date_format = "dd.MM.yyyy"', mode="append"
    )
    project.write("data/a.csv", "id,day\n1,01.02.2024\n")

    result = _run(project, "plan", "--json", env=SAIL)
    assert result.exit_code == 1, result.output
    document = json.loads(result.stdout)
    [pipeline] = document["pipelines"]
    assert any(
        "Sail parses date and timestamp patterns differently" in e for e in pipeline["errors"]
    )


def test_an_unknown_engine_is_one_line_with_the_choices(tmp_path: Path) -> None:
    project = _context_project(tmp_path, 'path = "data/*.csv"')
    result = _run(project, "validate", env={"HAKIRI_SPARK_ENGINE": "flink"})
    assert result.exit_code == 1
    assert "HAKIRI_SPARK_ENGINE='flink' is not an engine hakiri runs on" in _one_line(result)
    assert "Traceback" not in result.output
