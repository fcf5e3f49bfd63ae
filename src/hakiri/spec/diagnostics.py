"""Turn jsonschema and pydantic errors into Diagnostics that name file, line and key.

The rule for every message: what was wrong, at which key, and what would be right
(for an unknown key, the closest valid key).
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import ValidationError as SchemaError
from pydantic import ValidationError as ModelError

from hakiri.errors import Diagnostic
from hakiri.spec.locate import KeyPath, LineIndex

_JSON_TYPE_NAMES = {
    dict: "a table/object",
    list: "an array",
    str: "a string",
    bool: "a boolean",
    int: "an integer",
    float: "a number",
    type(None): "null",
}


def format_path(path: Iterable[str | int]) -> str:
    out = ""
    for part in path:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out or "(document root)"


def _describe(value: Any) -> str:
    kind = _JSON_TYPE_NAMES.get(type(value), type(value).__name__)
    shown = json.dumps(value, default=str)
    return f"{kind} {shown}" if len(shown) <= 40 and not isinstance(value, dict | list) else kind


def _closest(word: str, options: Iterable[str]) -> str | None:
    matches = difflib.get_close_matches(word, list(options), n=1, cutoff=0.6)
    return matches[0] if matches else None


class SchemaChecker:
    """Validates one kind of document against its generated JSON Schema."""

    def __init__(self, schema: dict[str, Any]) -> None:
        self._validator = Draft202012Validator(schema)

    def check(
        self, document: Any, file: Path, index: LineIndex, base: KeyPath = ()
    ) -> list[Diagnostic]:
        found: list[Diagnostic] = []
        seen: set[tuple[str, str]] = set()
        for error in self._validator.iter_errors(document):
            for path, message, hint in _explain(error):
                full = (*base, *path)
                key = (format_path(full), message)
                if key in seen:
                    continue
                seen.add(key)
                found.append(
                    Diagnostic(
                        message=message,
                        file=file,
                        line=index.line_of(full),
                        path=format_path(full),
                        hint=hint,
                    )
                )
        return sorted(found, key=lambda d: (d.line or 0, d.path))


def _explain(error: SchemaError) -> Iterator[tuple[KeyPath, str, str | None]]:
    """One error -> one or more (path, message, hint), descending into the union branch that was meant."""
    path: KeyPath = tuple(error.absolute_path)
    schema = error.schema if isinstance(error.schema, dict) else {}
    instance = error.instance

    if error.validator in ("oneOf", "anyOf") and error.context:
        branch = _meant_branch(error, schema, instance)
        if isinstance(branch, tuple):
            yield branch
            return
        if branch is not None:
            for sub in error.context:
                if sub.schema_path and sub.schema_path[0] == branch:
                    yield from _explain(sub)
            return
        expected = sorted({_branch_kind(s) for s in error.context})
        yield path, f"expected {' or '.join(expected)}, got {_describe(instance)}", None
        return

    if error.validator == "additionalProperties" and isinstance(instance, dict):
        allowed = list(schema.get("properties", {}))
        for extra in sorted(set(instance) - set(allowed)):
            close = _closest(extra, allowed)
            hint = f"did you mean `{close}`?" if close else f"valid keys here: {', '.join(allowed)}"
            yield (*path, extra), f"unknown key `{extra}`", hint
        return

    if error.validator == "required":
        message = schema.get("x-message")
        missing = error.message.split("'")[1] if "'" in error.message else error.message
        if message:
            yield (*path, "mode"), message, f"add `{missing} = ...` to this load section"
        else:
            yield (*path, missing), f"missing required key `{missing}`", None
        return

    if error.validator == "type":
        expected = error.validator_value
        names = expected if isinstance(expected, list) else [expected]
        yield path, f"expected {' or '.join(names)}, got {_describe(instance)}", None
        return

    if error.validator in ("enum", "const"):
        options = error.validator_value if error.validator == "enum" else [error.validator_value]
        shown = ", ".join(json.dumps(o) for o in options)
        close = _closest(str(instance), [str(o) for o in options])
        yield (
            path,
            f"expected one of {shown}, got {_describe(instance)}",
            (f"did you mean {json.dumps(close)}?" if close else None),
        )
        return

    if error.validator in ("minLength", "maxLength") and isinstance(instance, str):
        limit = error.validator_value
        if error.validator == "minLength" and limit == 1:
            yield path, "expected a non-empty string, got an empty one", None
        else:
            bound = "at least" if error.validator == "minLength" else "at most"
            unit = "character" if limit == 1 else "characters"
            yield path, f"expected {bound} {limit} {unit}, got {_describe(instance)}", None
        return

    if error.validator == "pattern":
        what = schema.get("description") or f"text matching {error.validator_value}"
        yield (
            path,
            f"{_describe(instance)} is not valid here: expected {what[0].lower()}{what[1:]}",
            None,
        )
        return

    yield path, error.message, None


def _meant_branch(
    error: SchemaError, schema: dict[str, Any], instance: Any
) -> int | tuple[KeyPath, str, str | None] | None:
    """Which alternative of a union the author meant: by discriminator, else by type."""
    path: KeyPath = tuple(error.absolute_path)
    options = schema.get(error.validator, [])
    disc = schema.get("discriminator")
    if disc and isinstance(instance, dict):
        prop = disc["propertyName"]
        mapping: dict[str, str] = disc.get("mapping", {})
        if prop not in instance:
            return (
                (*path, prop),
                f"missing required key `{prop}` (one of {', '.join(mapping)})",
                None,
            )
        value = instance[prop]
        if not isinstance(value, str):
            return (
                (*path, prop),
                f"expected a string for `{prop}` (one of {', '.join(mapping)}), "
                f"got {_describe(value)}",
                None,
            )
        if value not in mapping:
            close = _closest(str(value), mapping)
            hint = (
                f"did you mean {json.dumps(close)}?"
                if close
                else f"supported: {', '.join(mapping)}"
            )
            return (*path, prop), f"unknown {prop} {json.dumps(value)}", hint
        target = mapping[value]
        for i, option in enumerate(options):
            if option.get("$ref") == target:
                return i
    # No discriminator: keep the branches whose top-level type matched.
    wrong_type = {
        sub.schema_path[0]
        for sub in error.context or []
        if sub.schema_path and not sub.path and sub.validator == "type"
    }
    candidates = [i for i in range(len(options)) if i not in wrong_type]
    return candidates[0] if len(candidates) == 1 else None


def _branch_kind(sub: SchemaError) -> str:
    if sub.validator == "type":
        value = sub.validator_value
        return " or ".join(value) if isinstance(value, list) else str(value)
    return "a valid value"


# ------------------------------------------------------------------- pydantic


def model_diagnostics(
    error: ModelError, raw: Any, file: Path, index: LineIndex, base: KeyPath = ()
) -> list[Diagnostic]:
    """Pydantic errors (the checks JSON Schema cannot express) as Diagnostics."""
    found = []
    for item in error.errors():
        loc = tuple(item["loc"])
        if item["type"] == "missing" and loc and isinstance(loc[-1], str):
            # The missing key is not in the document: name it, under where it belongs.
            path = (*_real_path(loc[:-1], raw), loc[-1])
        else:
            path = _real_path(loc, raw)
        ctx = item.get("ctx") or {}
        if item["type"] == "mode_requires_key":
            path = (*path, "mode")
        elif "at" in ctx:
            # A check across keys names the key the message is about ('load.deletes': a
            # pipeline-wide check that points into a table below it).
            path = (*path, *str(ctx["at"]).split("."))
        message = str(item["msg"]).removeprefix("Value error, ")
        full = (*base, *path)
        found.append(
            Diagnostic(
                message=message,
                file=file,
                line=index.line_of(full),
                path=format_path(full),
                hint=ctx.get("hint")
                or (f"add `{ctx['field']}` to this load section" if "field" in ctx else None),
            )
        )
    return found


def _real_path(loc: KeyPath, raw: Any) -> KeyPath:
    """Drop pydantic's union-tag segments (e.g. 'files' in source.files.config) from a loc."""
    out: list[str | int] = []
    node = raw
    for part in loc:
        if (isinstance(node, dict) and part in node) or (
            isinstance(node, list) and isinstance(part, int) and part < len(node)
        ):
            node = node[part]
            out.append(part)
        elif isinstance(node, dict) and part in node.values():
            continue  # a discriminator tag, not a key
        elif isinstance(node, dict | list) or part == "__root__":
            continue
        else:
            break
    return tuple(out)
