from __future__ import annotations

import subprocess
import sys

from hakiri import __version__
from tests.unit.conftest import REPO


def test_version(cli) -> None:
    result = cli("--version")
    assert result.exit_code == 0
    assert result.stdout.strip() == f"hakiri {__version__}"


def test_init_scaffolds_a_project_that_validates(project, cli) -> None:
    result = cli("init", "demo")
    assert result.exit_code == 0, result.stderr
    root = project.root / "demo"
    for relative in (
        "hakiri.toml",
        "pipelines/users.json",
        "data/users/users.csv",
        ".gitignore",
        "schemas/pipeline.json",
        "schemas/project.json",
        "schemas/openapi.json",
    ):
        assert (root / relative).is_file(), relative
    assert cli("schema", "export", "--check", "--project", str(root)).exit_code == 0
    assert ".hakiri/" in (root / ".gitignore").read_text()
    check = cli("validate", "--project", str(root))
    assert check.exit_code == 0, check.stderr
    assert "1 pipeline valid" in check.stdout


def test_init_refuses_to_overwrite_a_project(project, cli) -> None:
    project.write("hakiri.toml", "[project]\nname = 'x'\n")
    result = cli("init")
    assert result.exit_code == 1
    assert "already exists" in result.stderr
    assert project.read("hakiri.toml") == "[project]\nname = 'x'\n"


def test_the_repository_example_project_validates(cli) -> None:
    result = cli("validate", "--project", str(REPO))
    assert result.exit_code == 0, result.stderr
    assert "3 pipelines valid" in result.stdout


def test_help_and_validate_never_import_pyspark() -> None:
    script = (
        "import sys\n"
        "from hakiri.cli.main import app\n"
        "from typer.testing import CliRunner\n"
        "runner = CliRunner()\n"
        f"assert runner.invoke(app, ['--help']).exit_code == 0\n"
        f"assert runner.invoke(app, ['validate', '--project', {str(REPO)!r}]).exit_code == 0\n"
        "loaded = sorted(m for m in sys.modules if m.split('.')[0] in ('pyspark', 'py4j'))\n"
        "print(loaded)\n"
        "sys.exit(1 if loaded else 0)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_unexpected_error_is_one_line_without_traceback(project, cli) -> None:
    # A directory where hakiri.toml should be a file: not a manifest problem we model.
    (project.root / "hakiri.toml").mkdir()
    result = cli("validate")
    assert result.exit_code == 1
    assert "Traceback" not in result.stderr
    assert result.stderr.startswith("error: ")
    assert "hint:" in result.stderr
