"""Simple JSON paths: where an API response keeps its records, its next link or its token.

    JsonPath.parse("$")                 the body itself
    JsonPath.parse("data.items")        body["data"]["items"]
    JsonPath.parse("$.data[*]")         every element of body["data"]
    JsonPath.parse("$.pages[0].next")   an index, then a key
    JsonPath.parse("$['odd key'].x")    a key that is not a plain name

That is the part of JSONPath that record selectors need; filters, slices and recursive
descent are refused with a message rather than half-supported.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hakiri.errors import SourceDataError

__all__ = ["EVERY", "JsonPath", "select_records"]


class _Every:
    """The `[*]` step: every element of a list (or value of an object)."""

    def __repr__(self) -> str:
        return "[*]"


EVERY = _Every()
_STEP = re.compile(
    r"""\.(?P<name>[A-Za-z_$][\w$-]*)       # .name
      | \[(?P<index>-?\d+)\]               # [0]
      | \[(?P<wild>\*)\]                   # [*]
      | \.(?P<dotwild>\*)                  # .*
      | \[(?P<q>['"])(?P<quoted>.*?)(?P=q)\]  # ['key']
    """,
    re.VERBOSE,
)


@dataclass(frozen=True)
class JsonPath:
    """A parsed path: keys (str), indexes (int) and `EVERY` steps (which fan out)."""

    text: str
    steps: tuple[str | int | _Every, ...]

    @classmethod
    def parse(cls, text: str) -> JsonPath:
        """Raises ValueError, with the position, for what this subset cannot read."""
        source = text.strip()
        rest = source[1:] if source.startswith("$") else f".{source}" if source else ""
        steps: list[str | int | _Every] = []
        pos = 0
        while pos < len(rest):
            match = _STEP.match(rest, pos)
            if match is None:
                raise ValueError(
                    f"cannot read JSON path {text!r} at {rest[pos:]!r}: use keys "
                    "(`data.items`), indexes (`[0]`), `[*]` or quoted keys (`['a b']`)"
                )
            if match.group("name") is not None:
                steps.append(match.group("name"))
            elif match.group("index") is not None:
                steps.append(int(match.group("index")))
            elif match.group("quoted") is not None:
                steps.append(match.group("quoted"))
            else:
                steps.append(EVERY)
            pos = match.end()
        return cls(text=text, steps=tuple(steps))

    @property
    def fans_out(self) -> bool:
        return EVERY in self.steps

    def find(self, document: Any) -> list[Any]:
        """Every value the path reaches; [] when a key or index is missing."""
        values = [document]
        for step in self.steps:
            found: list[Any] = []
            for value in values:
                if isinstance(step, _Every):
                    if isinstance(value, list):
                        found.extend(value)
                    elif isinstance(value, dict):
                        found.extend(value.values())
                elif isinstance(step, int):
                    if isinstance(value, list) and -len(value) <= step < len(value):
                        found.append(value[step])
                elif isinstance(value, dict) and step in value:
                    found.append(value[step])
            values = found
        return values

    def first(self, document: Any) -> Any:
        """The first value the path reaches, or None."""
        values = self.find(document)
        return values[0] if values else None


def select_records(document: Any, path: JsonPath, *, where: str) -> list[dict[str, Any]]:
    """The records of one response: what `path` reaches, a list's elements spread out.

    A path that reaches nothing is an error (a wrong selector loses every record quietly
    otherwise); `null` there is an empty page. Every record must be a JSON object.
    """
    found = path.find(document)
    if not found:
        raise SourceDataError(
            f"{where}: the record selector {path.text!r} finds nothing in the response "
            f"(it has {_shape(document)})",
            "set `records` to the JSON path of the list of records, e.g. `data.items` or `$`",
        )
    records: list[Any] = []
    for value in found:
        if value is None:
            continue
        if isinstance(value, list) and not path.fans_out:
            records.extend(value)
        else:
            records.append(value)
    for record in records:
        if not isinstance(record, dict):
            raise SourceDataError(
                f"{where}: the record selector {path.text!r} finds a {type(record).__name__}, "
                "not a JSON object",
                "point `records` at a list of objects",
            )
    return records


def _shape(document: Any) -> str:
    if isinstance(document, dict):
        keys: Sequence[str] = list(document)[:8]
        return f"keys {', '.join(keys)}" if keys else "no keys"
    if isinstance(document, list):
        return f"a list of {len(document)}"
    return f"a {type(document).__name__}"
