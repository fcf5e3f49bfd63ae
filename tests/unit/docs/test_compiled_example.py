"""The worked example of docs/transforms.md's "Compiled transforms": the JSON is what the
module compiles to (its hash is the module's), `hakiri validate` accepts it, and `hakiri
compile --check` finds it current."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from typer.testing import CliRunner

from hakiri.cli.main import app

ROOT = Path(__file__).resolve().parents[3]


def _blocks() -> dict[str, str]:
    text = (ROOT / "docs" / "transforms.md").read_text()
    section = text.split("## Compiled transforms", 1)[1].split("\n## ", 1)[0]
    return {
        lang: re.search(rf"```{lang}\n(.*?)```", section, re.S).group(1)  # type: ignore[union-attr]
        for lang in ("python", "toml", "json")
    }


def test_the_worked_example_validates_and_is_current(tmp_path: Path) -> None:
    blocks = _blocks()
    (tmp_path / "hakiri.toml").write_text('[project]\nname = "docs"\n\n' + blocks["toml"])
    (tmp_path / "transforms").mkdir()
    (tmp_path / "transforms" / "orders.py").write_text(blocks["python"])
    (tmp_path / "pipelines").mkdir()
    (tmp_path / "pipelines" / "orders.transforms.json").write_text(blocks["json"])
    document = json.loads(blocks["json"])
    assert (
        document["source_hash"] == "sha256:" + hashlib.sha256(blocks["python"].encode()).hexdigest()
    )

    runner = CliRunner()
    validated = runner.invoke(app, ["validate", "--json", "--project", str(tmp_path)])
    assert validated.exit_code == 0, validated.stdout
    assert json.loads(validated.stdout)["valid"] is True
    checked = runner.invoke(app, ["compile", "--check", "--project", str(tmp_path)])
    assert checked.exit_code == 0, checked.stderr
    assert "current" in checked.stdout
