"""The manifest problems issue 19 found by hand, each one clear diagnostic with `file:line`.

Every case adds one broken file to a copy of the example project and a second file
with an ordinary mistake: both are reported, so a bad file never hides the others.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from hakiri.cli.main import app

REPO = Path(__file__).resolve().parents[3]
OTHER = 'id = "other"\nsource = { connector = "files", config = { path = "x/*.csv" } }\ntables = ["t"]\nschedul = "every 1h"\n'
OTHER_ERROR = "error: unknown key `schedul` (pipelines/other.toml:4 at schedul)"
SOURCE = 'source = { connector = "files", config = { path = "x/*.csv" } }\ntables = ["t"]\n'

CASES: dict[str, tuple[str, bytes, str]] = {
    "a stray 0xff byte": (
        "bad.toml",
        b'id = "bad"\xff\n',
        "error: the file is not UTF-8: byte 0xff at line 1, column 11 (pipelines/bad.toml:1)",
    ),
    "a Latin-1 file": (
        "bad.toml",
        'id = "bad"\n# café\n'.encode("latin-1"),
        "error: the file is not UTF-8: byte 0xe9 at line 2, column 6 (pipelines/bad.toml:2)",
    ),
    "a UTF-16 file": (
        "bad.toml",
        'id = "bad"\n'.encode("utf-16"),
        "error: the file is UTF-16; hakiri reads manifests as UTF-8 (pipelines/bad.toml:1)",
    ),
    "a deep TOML array": (
        "bad.toml",
        ('id = "bad"\nx = ' + "[" * 3000 + "]" * 3000 + "\n").encode(),
        "error: the document nests more than 64 levels deep (pipelines/bad.toml:2)",
    ),
    "a deep TOML inline table": (
        "bad.toml",
        ('id = "bad"\nx = ' + "{a = " * 3000 + "1" + "}" * 3000 + "\n").encode(),
        "error: the document nests more than 64 levels deep (pipelines/bad.toml:2)",
    ),
    "a deep table header": (
        "bad.toml",
        ('id = "bad"\n\n[' + ".".join(["a"] * 3000) + "]\n").encode(),
        "error: the document nests more than 64 levels deep (pipelines/bad.toml:3)",
    ),
    "a deep JSON object": (
        "bad.json",
        ('{"id": "bad",\n "x": ' + '{"a": ' * 3000 + "1" + "}" * 3000 + "}\n").encode(),
        "error: the document nests more than 64 levels deep (pipelines/bad.json:2)",
    ),
    "a 5,000-digit integer": (
        "bad.toml",
        ('id = "bad"\n' + SOURCE + "x = " + "7" * 5000 + "\n").encode(),
        "error: an integer literal of 5,000 digits is longer than hakiri reads (4,300) "
        "(pipelines/bad.toml:4)",
    ),
    "a table as a source connector": (
        "bad.toml",
        b'id = "bad"\nsource = { connector = { a = 1 }, config = {} }\ntables = ["t"]\n',
        "error: expected a string for `connector` (one of files, github, postgres, rest, shopify), got a table/object "
        "(pipelines/bad.toml:2 at source.connector)",
    ),
    "an array as a rule type": (
        "bad.toml",
        (
            'id = "bad"\n' + SOURCE + '[[validate.rules]]\ntype = ["not_null"]\ncolumn = "a"\n'
        ).encode(),
        "error: expected a string for `type` (one of field_type, max_length, not_null, range, "
        "regex), got an array (pipelines/bad.toml:5 at validate.rules[0].type)",
    ),
    "a table as a transform op": (
        "bad.json",
        (
            b'{"id": "bad",\n "source": {"connector": "files", "config": {"path": "x"}},\n'
            b' "tables": ["t"],\n "transforms": [{"op": {"x": 1}}]}\n'
        ),
        "(pipelines/bad.json:4 at transforms[0].op)",
    ),
    "an unknown dotted table": (
        "bad.toml",
        ('id = "bad"\n' + SOURCE + "\n[foo.bar]\nx = 1\n").encode(),
        "error: unknown key `foo` (pipelines/bad.toml:5 at foo)",
    ),
    "a syntax error at the end": (
        "bad.toml",
        ('id = "bad"\n' + SOURCE + "x = [1,\n").encode(),
        "error: invalid TOML: Invalid value (pipelines/bad.toml:4)",
    ),
    "a required key missing": (
        "bad.toml",
        b'id = "bad"\ntables = ["t"]\n',
        "error: missing required key `source` (pipelines/bad.toml:1 at source)",
    ),
}


@pytest.mark.parametrize("case", list(CASES))
def test_each_hostile_manifest_is_one_located_diagnostic_and_hides_no_other(
    case: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name, data, expected = CASES[case]
    shutil.copy(REPO / "hakiri.toml", tmp_path)
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines")
    (tmp_path / "pipelines" / name).write_bytes(data)
    (tmp_path / "pipelines" / "other.toml").write_text(OTHER)

    monkeypatch.chdir(tmp_path)  # file names are shown relative to the working directory
    result = CliRunner().invoke(app, ["validate", "--project", "."])

    assert result.exit_code == 1
    assert "internal error" not in result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert any(expected in line for line in errors), result.stderr
    assert OTHER_ERROR in errors
    assert errors[-1] == "error: 2 problems in the project manifests", result.stderr
    located = re.compile(r"\((?:[^()\s]+):\d+(?: at .*)?\)$")
    assert all(located.search(line) for line in errors[:-1]), result.stderr


def test_a_bad_default_destination_has_its_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shutil.copytree(REPO / "pipelines", tmp_path / "pipelines")
    text = (REPO / "hakiri.toml").read_text()
    (tmp_path / "hakiri.toml").write_text(
        text.replace('default_destination = "context"', 'default_destination = "nowhere"')
    )
    line = next(
        n for n, s in enumerate(text.splitlines(), 1) if s.startswith("default_destination")
    )

    monkeypatch.chdir(tmp_path)  # file names are shown relative to the working directory
    result = CliRunner().invoke(app, ["validate", "--project", "."])

    assert result.exit_code == 1
    assert (
        "error: default_destination `nowhere` is neither 'context' nor a connection "
        f"(hakiri.toml:{line} at context.default_destination)"
    ) in result.stderr
