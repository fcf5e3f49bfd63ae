"""What the Sail engine refuses, as a user meets it: `validate` and `plan` name the pipeline,
the reason and the alternative before anything runs; what only the data shows fails the
batch in its read, before a row is written, with a one-line error."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest
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


# ------------------------------------------------------- known only from the data: Sail's pass


def _applied(tmp_path: Path, config: str, files: dict[str, str | bytes]) -> Result:
    project = _context_project(tmp_path, config)
    for name, text in files.items():
        path = project.root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(text if isinstance(text, bytes) else textwrap.dedent(text).encode())
    return project.cli("apply")


@pytest.mark.sail_only
def test_a_csv_record_of_the_wrong_width_cannot_be_dropped_on_sail(tmp_path: Path, spark) -> None:
    result = _applied(
        tmp_path,
        'path = "data/*.csv", on_malformed = "drop"',
        {"data/a.csv": "id,name\n1,a\n2\n3,c\n"},
    )
    assert result.exit_code == 1
    text = _one_line(result)
    assert "data/a.csv:3: malformed csv record: 1 field where 2 are expected" in text
    assert "cannot set it aside" in text
    assert not (tmp_path / ".hakiri" / "context" / "t").exists()  # nothing was written


@pytest.mark.sail_only
def test_a_json_array_file_is_refused_on_sail(tmp_path: Path, spark) -> None:
    result = _applied(
        tmp_path, 'path = "data/*.json", format = "json"', {"data/a.json": '[{"id": 1}]'}
    )
    assert result.exit_code == 1
    assert "data/a.json: Sail's from_json does not report the elements" in _one_line(result)
    assert not (tmp_path / ".hakiri" / "context" / "t").exists()
