"""`hakiri validate` on hostile manifests: mutated copies of the example project's own files.

Structural mutations (a value's type swapped, a key deleted or added, a discriminator
given a table, nesting a few hundred levels deep, huge integers, unicode and control
characters) and textual ones (bytes inserted, the file cut short, re-encoded as Latin-1
or UTF-16, lines deleted or duplicated). Whatever the input: exit code 0 or 1, never an
internal error, and every error line names its file and line.
"""

from __future__ import annotations

import json
import re
import shutil
import tempfile
from pathlib import Path
from typing import Any

import tomlkit
from hypothesis import HealthCheck, assume, event, example, given, settings
from hypothesis import strategies as st
from typer.testing import CliRunner

from hakiri.cli.main import app

REPO = Path(__file__).resolve().parents[3]
TOML_FILE = "pipelines/events.toml"
JSON_FILE = "pipelines/customers.json"
SUMMARY = re.compile(r"^error: \d+ problems? in the project manifests$")
LOCATED = re.compile(r"\((?:[^()\s]+):\d+(?: at .*)?\)$")

ODD_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=False),
    st.text(max_size=20),
    st.lists(st.integers(), max_size=3),
    st.dictionaries(st.text(max_size=5), st.integers(), max_size=2),
    st.just(10**5000),
    st.text(alphabet=st.characters(codec="utf-8"), max_size=10),
)


def _paths(node: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix] if prefix else []
    if isinstance(node, dict):
        for key, value in node.items():
            found += _paths(value, (*prefix, key))
    elif isinstance(node, list):
        for i, value in enumerate(node):
            found += _paths(value, (*prefix, i))
    return found


def _parent(doc: Any, path: tuple[Any, ...]) -> Any:
    for part in path[:-1]:
        doc = doc[part]
    return doc


def _mutate(doc: Any, op: str, pick: int, value: Any) -> Any:
    paths = _paths(doc)
    path = paths[pick % len(paths)]
    parent, last = _parent(doc, path), path[-1]
    if op == "replace":
        parent[last] = value
    elif op == "delete":
        del parent[last]
    elif op == "add_key":
        target = parent[last] if isinstance(parent[last], dict) else parent
        if isinstance(target, dict):
            target[str(value)[:10] or "k"] = value
    elif op == "deep":
        nested = parent[last]
        for _ in range(200 + pick % 3000):
            nested = [nested]
        parent[last] = nested
    elif op == "discriminator":
        for key in ("connector", "type", "op"):
            for p in paths:
                if p and p[-1] == key:
                    _parent(doc, p)[key] = {"a": [1]}
                    return doc
    return doc


def _serialize(doc: Any, is_json: bool) -> bytes:
    if is_json:
        return json.dumps(doc, ensure_ascii=False).encode("utf-8", "surrogatepass")
    return tomlkit.dumps(doc).encode("utf-8", "surrogatepass")


def _textual(data: bytes, op: str, where: float, junk: bytes) -> bytes:
    at = int(len(data) * where)
    lines = data.split(b"\n")
    line = int(len(lines) * where) % max(len(lines), 1)
    if op == "insert":
        return data[:at] + junk + data[at:]
    if op == "truncate":
        return data[:at]
    if op == "latin1":
        return data.decode("utf-8").replace("e", "é").encode("latin-1", "replace")
    if op == "utf16":
        return data.decode("utf-8").encode("utf-16")
    if op == "bom":
        return b"\xef\xbb\xbf" + data
    if op == "delete_line":
        return b"\n".join(lines[:line] + lines[line + 1 :])
    if op == "duplicate_line":
        return b"\n".join(lines[: line + 1] + lines[line:])
    return data


structural = st.tuples(
    st.just("structural"),
    st.booleans(),
    st.sampled_from(["replace", "delete", "add_key", "deep", "discriminator"]),
    st.integers(0, 10_000),
    ODD_VALUES,
)
textual = st.tuples(
    st.just("textual"),
    st.booleans(),
    st.sampled_from(
        ["insert", "truncate", "latin1", "utf16", "bom", "delete_line", "duplicate_line"]
    ),
    st.floats(0, 1),
    st.binary(max_size=8),
)


@settings(
    max_examples=400,
    deadline=None,
    derandomize=True,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(mutation=st.one_of(structural, textual))
@example(mutation=("structural", True, "discriminator", 0, None))
@example(mutation=("structural", False, "deep", 2999, None))
@example(mutation=("structural", False, "replace", 1, 10**5000))
@example(mutation=("textual", False, "insert", 0.2, b"\xff"))
@example(mutation=("textual", True, "utf16", 0.0, b""))
def test_validate_survives_hostile_manifests_with_located_errors(mutation: tuple[Any, ...]) -> None:
    kind, is_json, op, where, extra = mutation
    relative = JSON_FILE if is_json else TOML_FILE
    original = (REPO / relative).read_bytes()
    if kind == "structural":
        doc = json.loads(original) if is_json else tomlkit.loads(original.decode()).unwrap()
        try:
            data = _serialize(_mutate(doc, op, where, extra), is_json)
        except (ValueError, TypeError, RecursionError):
            assume(False)  # the serializer cannot write it; the file could not exist either
    else:
        data = _textual(original, op, where, extra)

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        shutil.copy(REPO / "hakiri.toml", root)
        shutil.copytree(REPO / "pipelines", root / "pipelines")
        (root / relative).write_bytes(data)
        result = CliRunner().invoke(app, ["validate", "--project", str(root)])

    event(f"{kind} {op}: exit {result.exit_code}")
    assert result.exit_code in (0, 1), result.output
    assert "internal error" not in result.stderr, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert result.exit_code == 0 or errors
    for line in errors:
        assert SUMMARY.match(line) or LOCATED.search(line), line
    assert len(errors) == len(set(errors)), result.stderr  # no diagnostic twice
