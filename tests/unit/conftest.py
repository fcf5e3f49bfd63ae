"""Fixtures for the fast tests: a project in a tmp dir, and the CLI run in-process."""

from __future__ import annotations

import shutil
import textwrap
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app

REPO = Path(__file__).resolve().parents[2]


class ProjectDir:
    """A project directory under construction; the test's cwd, as for a user."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"), encoding="utf-8")
        return path

    def read(self, relative: str) -> str:
        return (self.root / relative).read_text(encoding="utf-8")

    def snapshot(self) -> dict[str, str]:
        return {
            str(p.relative_to(self.root)): p.read_text(encoding="utf-8")
            for p in sorted(self.root.rglob("*"))
            if p.is_file()
        }


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> ProjectDir:
    monkeypatch.chdir(tmp_path)
    return ProjectDir(tmp_path)


@pytest.fixture
def example_project(project: ProjectDir) -> ProjectDir:
    """A copy of the repository's own example project."""
    shutil.copy(REPO / "hakiri.toml", project.root / "hakiri.toml")
    shutil.copytree(REPO / "pipelines", project.root / "pipelines")
    shutil.copytree(REPO / "schemas", project.root / "schemas")
    return project


@pytest.fixture
def cli() -> Callable[..., object]:
    runner = CliRunner()

    def run(*args: str, env: dict[str, str] | None = None):
        return runner.invoke(app, list(args), env=env, catch_exceptions=False)

    return run


MINIMAL = """
[project]
name = "t"
"""

# One files pipeline `orders`, for tests that add keys to it (hooks, transforms, ...).
FILES_PIPELINE = """
[[pipeline]]
id = "orders"
source = { connector = "files", config = { path = "data/*.csv" } }
tables = ["orders"]
"""


def error_lines(result: Any) -> list[str]:
    """The `error:` lines a CLI run printed on stderr."""
    return [line for line in result.stderr.splitlines() if line.startswith("error:")]
