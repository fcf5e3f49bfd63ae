"""docs/views.md: its worked example is a project `hakiri validate` accepts, with the output
the doc shows, and README and manifest.md link to it."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.views_example import DOC, example_files, example_output, write_example


def test_the_worked_example_validates_as_the_doc_shows(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert list(example_files()) == [
        "hakiri.toml",
        "views/customer_spend.toml",
        "views/big_spenders.json",
    ]
    write_example(tmp_path)
    monkeypatch.chdir(tmp_path)
    result = CliRunner().invoke(app, ["validate"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == example_output("hakiri validate")


def test_readme_and_the_manifest_guide_link_to_it() -> None:
    root = DOC.parents[1]
    assert "(docs/views.md)" in (root / "README.md").read_text()
    assert "(views.md)" in (root / "docs" / "manifest.md").read_text()
