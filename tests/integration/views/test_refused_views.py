"""A view that reads files instead of the context store's tables is refused by `hakiri
validate` (and so by plan and apply) with the file and line of what was refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.views_example import write_example


@pytest.mark.parametrize(
    ("relative", "text", "said"),
    [
        (
            "views/raw.toml",
            'name = "raw_orders"\nsql = """\nSELECT *\nFROM read_csv(\'/etc/passwd\')\n"""\n',
            "error: view `raw_orders`: read_csv() reads files or makes rows outside the "
            "context store's tables (views/raw.toml:4 at sql)",
        ),
        (
            "views/pq.json",
            '{\n  "name": "pq",\n  "sql": "SELECT * FROM parquet.`/tmp/x`"\n}\n',
            "error: view `pq`: parquet.`/tmp/x` is a path or a qualified name: name "
            "context-store tables and views bare (`orders`) (views/pq.json:3 at sql)",
        ),
    ],
)
def test_a_view_reading_a_file_or_a_path_is_refused_with_file_and_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, relative: str, text: str, said: str
) -> None:
    write_example(tmp_path)
    (tmp_path / relative).write_text(text)
    monkeypatch.chdir(tmp_path)
    for command in (["validate"], ["plan"]):
        result = CliRunner().invoke(app, command, catch_exceptions=False)
        assert result.exit_code == 1
        assert said in result.stderr
        assert (
            "hint: a view or query may read the context store's tables and views" in result.stderr
        )
        assert "Traceback" not in result.stderr
