"""Format-preserving changes to manifests: create, convert (TOML <-> JSON) and edit.

Every change is computed as new file texts, validated in memory together with
the rest of the project, and written only if it introduces no new error; so a
refused edit leaves every file as it was.
TOML goes through tomlkit, so comments and key order survive; JSON keeps its key
order. Conversion is lossless except for TOML comments, which JSON cannot hold.
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

import tomlkit
from tomlkit.items import InlineTable, Table

from hakiri.errors import Diagnostic, EditError, ManifestError, PipelineNotFound
from hakiri.spec.loader import (
    PIPELINES_DIR,
    PROJECT_FILE,
    ManifestFormat,
    Origin,
    display_path,
    load_project,
)
from hakiri.spec.locate import index_toml

Format = Literal["json", "toml"]
SCHEMA_REF = "../schemas/pipeline.json"
# Pipeline keys written as inline tables when a pipeline is rendered to TOML;
# the other tables become [pipeline.<key>] sections.
_INLINE_KEYS = {"source", "destination", "incremental", "renames"}


@dataclass(frozen=True)
class Change:
    """The outcome of an edit: files written (new text) or removed (None)."""

    files: dict[Path, str | None]
    summary: str


# ------------------------------------------------------------------ finding definitions


def find_definitions(
    root: Path, overrides: Mapping[Path, str | None] | None = None
) -> dict[str, list[Origin]]:
    """id -> every place it is defined, from syntax alone (works on an invalid project too)."""
    overrides = {p.resolve(): t for p, t in (overrides or {}).items()}

    def read(path: Path) -> str | None:
        if path.resolve() in overrides:
            return overrides[path.resolve()]
        return path.read_text(encoding="utf-8") if path.is_file() else None

    found: dict[str, list[Origin]] = {}
    project_text = read(root / PROJECT_FILE)
    if project_text is not None:
        try:
            data = tomllib.loads(project_text)
        except tomllib.TOMLDecodeError:
            data = {}
        index = index_toml(project_text)
        for i, item in enumerate(
            data.get("pipeline", []) if isinstance(data.get("pipeline"), list) else []
        ):
            if isinstance(item, dict) and isinstance(item.get("id"), str):
                origin = Origin(
                    root / PROJECT_FILE,
                    index.line_of(("pipeline", i)),
                    ManifestFormat.TOML_INLINE,
                    i,
                )
                found.setdefault(item["id"], []).append(origin)
    directory = root / PIPELINES_DIR
    candidates = {p.resolve() for p in directory.glob("*")} | {
        p for p in overrides if p.parent == directory.resolve()
    }
    for path in sorted(candidates):
        text = read(path)
        if text is None or path.suffix not in (".toml", ".json"):
            continue
        try:
            data = json.loads(text) if path.suffix == ".json" else tomllib.loads(text)
        except (json.JSONDecodeError, tomllib.TOMLDecodeError):
            continue
        if isinstance(data, dict) and isinstance(data.get("id"), str):
            fmt = ManifestFormat.JSON if path.suffix == ".json" else ManifestFormat.TOML
            found.setdefault(data["id"], []).append(Origin(path, 1, fmt))
    return found


def _one_definition(root: Path, pipeline_id: str) -> Origin:
    places = find_definitions(root).get(pipeline_id)
    if not places:
        raise PipelineNotFound(
            f"no pipeline `{pipeline_id}` in {display_path(root)}",
            "`hakiri validate` lists the pipelines",
        )
    if len(places) > 1:
        raise EditError(
            f"pipeline `{pipeline_id}` is defined in {len(places)} places: {', '.join(map(str, places))}",
            "remove all but one definition by hand first",
        )
    return places[0]


# ------------------------------------------------------------------ reading and rendering documents


def read_pipeline_document(origin: Origin) -> dict[str, Any]:
    """The pipeline's raw document (placeholders unexpanded, `$schema` dropped)."""
    text = origin.file.read_text(encoding="utf-8")
    if origin.format is ManifestFormat.JSON:
        data = json.loads(text)
    elif origin.format is ManifestFormat.TOML:
        data = tomllib.loads(text)
    else:
        data = tomllib.loads(text)["pipeline"][origin.index]
    return {k: v for k, v in data.items() if k != "$schema"}


def render_json(document: Mapping[str, Any]) -> str:
    return json.dumps({"$schema": SCHEMA_REF, **document}, indent=2, ensure_ascii=False) + "\n"


def _inline(value: Any) -> Any:
    if isinstance(value, dict):
        table = tomlkit.inline_table()
        for k, v in value.items():
            table[k] = _inline(v)
        return table
    if isinstance(value, list):
        array = tomlkit.array()
        array.extend(_inline(v) for v in value)
        if any(isinstance(v, dict) for v in value):
            array.multiline(True)
        return array
    return value


def _section(value: dict[str, Any]) -> Table:
    """A [section]: nested lists of tables become [[arrays]], deeper tables inline."""
    table = tomlkit.table()
    for key, item in value.items():
        if isinstance(item, list) and item and all(isinstance(v, dict) for v in item):
            aot = tomlkit.aot()
            for element in item:
                aot.append(_section_inline_values(element))
            table[key] = aot
        else:
            table[key] = _inline(item)
    return table


def _section_inline_values(value: dict[str, Any]) -> Table:
    table = tomlkit.table()
    for key, item in value.items():
        table[key] = _inline(item)
    return table


def pipeline_as_toml_table(document: Mapping[str, Any]) -> Table:
    """A pipeline document as a tomlkit table suited to a [[pipeline]] block or a file of its own."""
    table = tomlkit.table()
    sections: list[tuple[str, Any]] = []
    for key, value in document.items():
        if isinstance(value, dict) and key not in _INLINE_KEYS:
            sections.append((key, _section(value)))
        elif key == "transforms" and isinstance(value, list) and value:
            aot = tomlkit.aot()
            for step in value:
                aot.append(_section_inline_values(step))
            sections.append((key, aot))
        else:
            table[key] = _inline(value)
    for key, value in sections:  # sections after plain keys, as TOML requires for readability
        table[key] = value
    return table


def _append_to_project(project_text: str, document: Mapping[str, Any]) -> str:
    doc = tomlkit.parse(project_text)
    table = pipeline_as_toml_table(document)
    if "pipeline" in doc:
        doc["pipeline"][-1].add(tomlkit.nl())  # a blank line between [[pipeline]] blocks
        doc["pipeline"].append(table)
    else:
        aot = tomlkit.aot()
        aot.append(table)
        doc.add(tomlkit.nl())
        doc.append("pipeline", aot)
    return tomlkit.dumps(doc)


def _remove_from_project(project_text: str, index: int) -> str:
    doc = tomlkit.parse(project_text)
    pipelines = doc["pipeline"]
    del pipelines[index]
    if len(pipelines) == 0:
        del doc["pipeline"]
    return tomlkit.dumps(doc)


# ------------------------------------------------------------------ applying a change safely


def _diagnostic_key(d: Diagnostic) -> tuple[str, str, str]:
    return (str(d.file), d.path, d.message)


def _problems(root: Path, overrides: Mapping[Path, str | None]) -> list[Diagnostic]:
    try:
        load_project(root, overrides=overrides)
    except ManifestError as exc:
        return [d for d in exc.diagnostics if d.severity == "error"]
    return []


def apply_change(root: Path, change: Change) -> Change:
    """Write `change` if it adds no error to the project; otherwise raise and write nothing."""
    before = {_diagnostic_key(d) for d in _problems(root, {})}
    introduced = [d for d in _problems(root, change.files) if _diagnostic_key(d) not in before]
    if introduced:
        raise ManifestError(introduced)
    for path, text in change.files.items():
        if text is None:
            path.unlink()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    return change


# ------------------------------------------------------------------ create, convert, edit


def create_pipeline(root: Path, document: dict[str, Any], fmt: Format = "json") -> Change:
    pipeline_id = document.get("id")
    if not isinstance(pipeline_id, str):
        raise EditError("a new pipeline needs an id", "pass the id as the first argument")
    existing = find_definitions(root).get(pipeline_id)
    if existing:
        raise EditError(
            f"pipeline `{pipeline_id}` already exists at {existing[0]}",
            f"edit it with `hakiri pipeline edit {pipeline_id} --set key=value`",
        )
    if fmt == "json":
        target = root / PIPELINES_DIR / f"{pipeline_id}.json"
        files: dict[Path, str | None] = {target: render_json(document)}
    else:
        target = root / PROJECT_FILE
        files = {target: _append_to_project(target.read_text(encoding="utf-8"), document)}
    return apply_change(
        root, Change(files, f"created pipeline `{pipeline_id}` in {display_path(target)}")
    )


def convert_pipeline(root: Path, pipeline_id: str, to: Format) -> Change:
    origin = _one_definition(root, pipeline_id)
    current: Format = "json" if origin.format is ManifestFormat.JSON else "toml"
    if current == to:
        return Change(
            {}, f"pipeline `{pipeline_id}` is already {to.upper()} ({origin}); nothing to do"
        )
    document = read_pipeline_document(origin)
    files: dict[Path, str | None] = {}
    project_file = root / PROJECT_FILE
    if to == "json":
        target = root / PIPELINES_DIR / f"{pipeline_id}.json"
        if target.exists():
            raise EditError(f"{display_path(target)} already exists", "move it away first")
        files[target] = render_json(document)
        if origin.format is ManifestFormat.TOML_INLINE:
            files[project_file] = _remove_from_project(
                project_file.read_text(encoding="utf-8"), origin.index or 0
            )
        else:
            files[origin.file] = None
    else:
        target = project_file
        files[project_file] = _append_to_project(project_file.read_text(encoding="utf-8"), document)
        files[origin.file] = None
    return apply_change(
        root,
        Change(files, f"moved pipeline `{pipeline_id}` from {origin} to {display_path(target)}"),
    )


_PART = re.compile(r"([^.\[\]]+)|\[(\d+)\]")


def parse_key_path(text: str) -> list[str | int]:
    """'validate.rules[0].on_fail' -> ['validate', 'rules', 0, 'on_fail']."""
    parts: list[str | int] = []
    for match in _PART.finditer(text):
        parts.append(match.group(1) if match.group(1) is not None else int(match.group(2)))
    if (
        not parts
        or "".join(f".{p}" if isinstance(p, str) else f"[{p}]" for p in parts).lstrip(".") != text
    ):
        raise EditError(
            f"not a key path: {text!r}",
            "use dotted keys with [n] for list items, e.g. load.mode or validate.rules[0].on_fail",
        )
    return parts


def parse_value(text: str) -> Any:
    """A --set value is read as a TOML value (numbers, booleans, arrays, inline tables), else as a string."""
    try:
        return tomllib.loads(f"v = {text}")["v"]
    except tomllib.TOMLDecodeError:
        return text


def set_at(container: Any, path: list[str | int], value: Any, make_table: Any) -> None:
    """Set (or, with _UNSET, delete) `path` in a JSON dict or a tomlkit container, creating tables on the way."""
    for i, part in enumerate(path[:-1]):
        try:
            container = container[part]
        except (KeyError, IndexError, TypeError) as exc:
            if isinstance(part, int) or not hasattr(container, "__setitem__"):
                raise EditError(
                    f"no item at {'.'.join(map(str, path[: i + 1]))}", "check the key path"
                ) from exc
            container[part] = make_table(container)
            container = container[part]
    last = path[-1]
    if value is _UNSET:
        try:
            del container[last]
        except (KeyError, IndexError, TypeError) as exc:
            raise EditError(
                f"nothing to unset at {'.'.join(map(str, path))}", "check the key path"
            ) from exc
    else:
        if isinstance(last, int) and last >= len(container):
            raise EditError(
                f"list index {last} is out of range at {'.'.join(map(str, path))}",
                "append by setting the whole list",
            )
        # Plain dict/list: a JSON document. Anything else is a tomlkit container,
        # where new tables should be inline so they stay on the key's line.
        container[last] = value if type(container) in (dict, list) else _inline(value)


_UNSET = object()


def edit_pipeline(
    root: Path, pipeline_id: str, sets: list[tuple[str, str]], unsets: list[str] | None = None
) -> Change:
    unsets = unsets or []
    origin = _one_definition(root, pipeline_id)
    assignments: list[tuple[list[str | int], Any]] = [
        (parse_key_path(k), parse_value(v)) for k, v in sets
    ]
    assignments += [(parse_key_path(k), _UNSET) for k in unsets]
    if any(path == ["id"] for path, _ in assignments):
        raise EditError(
            "the id of a pipeline cannot be edited", "create a new pipeline and remove the old one"
        )
    text = origin.file.read_text(encoding="utf-8")
    if origin.format is ManifestFormat.JSON:
        data = json.loads(text)
        for path, value in assignments:
            set_at(data, path, value, lambda _parent: {})
        new_text = json.dumps(data, indent=2, ensure_ascii=False) + "\n"
    else:
        doc = tomlkit.parse(text)
        node = doc["pipeline"][origin.index] if origin.format is ManifestFormat.TOML_INLINE else doc
        for path, value in assignments:
            set_at(
                node,
                path,
                value,
                lambda parent: (
                    tomlkit.inline_table() if isinstance(parent, InlineTable) else tomlkit.table()
                ),
            )
        new_text = tomlkit.dumps(doc)
    shown = ", ".join([f"{k}={v}" for k, v in sets] + [f"-{k}" for k in unsets])
    return apply_change(
        root,
        Change(
            {origin.file: new_text},
            f"edited pipeline `{pipeline_id}` in {origin.file.name}: {shown}",
        ),
    )


__all__ = [
    "Change",
    "convert_pipeline",
    "create_pipeline",
    "edit_pipeline",
    "find_definitions",
    "parse_key_path",
    "parse_value",
    "pipeline_as_toml_table",
    "read_pipeline_document",
    "render_json",
    "set_at",
]
