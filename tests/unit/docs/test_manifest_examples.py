"""Every manifest example in the docs validates, every load mode has one, and
getting-started lists what `hakiri init` creates."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app

ROOT = Path(__file__).resolve().parents[3]
DOCS = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
MODES = (
    "append",
    "truncate",
    "upsert",
    "blue_green",
    "incremental_watermark",
    "cdc_mirror",
    "scd2",
    "replace_window",
)
# What an example may lean on without declaring it: a project name and the connections the
# docs use, with their secrets in the environment.
HEADER = """
[project]
name = "docs"

[connections.wh]
type = "postgres"
url = "postgresql://hakiri@localhost/warehouse"

[connections.app]
type = "postgres"
url = "postgresql://hakiri@localhost/app"

[connections.crm]
type = "postgres"
url = "postgresql://hakiri@localhost/crm"

[connections.warehouse]
type = "postgres"
url = "postgresql://hakiri@localhost/warehouse"

[connections.shop]
type = "postgres"
url = "postgresql://hakiri@localhost/shop"
"""


def _examples() -> list[tuple[str, str]]:
    found = []
    for path in DOCS:
        text = path.read_text()
        for match in re.finditer(r"```toml\n(.*?)```", text, re.S):
            if "[[pipeline]]" in match.group(1):
                line = text.count("\n", 0, match.start()) + 1
                found.append((f"{path.relative_to(ROOT)}:{line}", match.group(1)))
    return found


EXAMPLES = _examples()


@pytest.mark.parametrize(("where", "manifest"), EXAMPLES, ids=[w for w, _ in EXAMPLES])
def test_a_manifest_example_validates(where: str, manifest: str, tmp_path: Path) -> None:
    text = manifest if "[project]" in manifest else HEADER + manifest
    (tmp_path / "hakiri.toml").write_text(text)
    names = set(re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)", text))
    result = CliRunner().invoke(
        app,
        ["validate", "--project", str(tmp_path)],
        env={name: "secret" for name in names},
        catch_exceptions=False,
    )
    assert result.exit_code == 0, f"{where}:\n{result.stdout}{result.stderr}"


def test_every_load_mode_has_a_manifest_example() -> None:
    shown = {m for _, manifest in EXAMPLES for m in re.findall(r'mode = "(\w+)"', manifest)}
    assert set(MODES) <= shown, sorted(set(MODES) - shown)


def test_getting_started_lists_what_init_creates(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["init", str(tmp_path / "shop")], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    created = re.findall(r"created (\S+)", result.stdout + result.stderr)
    made = [str(Path(p).relative_to(tmp_path)) for p in created]
    guide = (ROOT / "docs" / "getting-started.md").read_text()
    listed = re.findall(r"^created (shop/\S+)$", guide, re.M)
    assert listed == made
