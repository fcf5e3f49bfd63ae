"""`plan -o` then `apply plan.json` applies the views the plan showed, and refuses a plan made
before a view was edited. No engine: the project's one view reads no table."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from hakiri.cli.main import app

PROJECT = """[project]
name = "saved"

[[view]]
name = "today"
sql = "SELECT current_date() AS day"
"""


def _cli(root: Path, *args: str):  # type: ignore[no-untyped-def]
    return CliRunner().invoke(app, [*args, "--project", str(root)], catch_exceptions=False)


def test_a_saved_plan_applies_its_views_and_is_stale_once_a_view_changed(tmp_path: Path) -> None:
    (tmp_path / "hakiri.toml").write_text(PROJECT)
    plan_file = tmp_path / "plan.json"
    assert _cli(tmp_path, "plan", "-o", str(plan_file)).exit_code == 0
    (tmp_path / "hakiri.toml").write_text(PROJECT.replace("AS day", "AS today"))
    stale = _cli(tmp_path, "apply", str(plan_file))
    assert stale.exit_code == 1
    assert "error: plan is stale: view `today` changed since the plan" in stale.stderr

    assert _cli(tmp_path, "plan", "-o", str(plan_file)).exit_code == 0
    applied = _cli(tmp_path, "apply", str(plan_file), "--json")
    assert applied.exit_code == 0, applied.stderr
    assert json.loads(applied.stdout) == [
        {"view": "today", "status": "created", "version": 1, "reads": []}
    ]
    assert _cli(tmp_path, "plan", "--detailed-exitcode").exit_code == 0
