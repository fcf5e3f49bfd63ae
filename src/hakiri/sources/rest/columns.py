"""What an API's records become: the columns an endpoint declares, or the columns inferred
from the records of a first page (`infer_columns`)."""

from __future__ import annotations

import re
from typing import Any

from hakiri.guards.spark_types import quoted_name
from hakiri.sources.rest.engine_read import ApiColumn
from hakiri.spec.rest import RestColumn, RestEndpoint

__all__ = ["declared_columns", "infer_columns", "key_path"]


def declared_columns(endpoint: RestEndpoint) -> tuple[ApiColumn, ...] | None:
    """The endpoint's declared `columns`; None when it declares none (they are inferred)."""
    if endpoint.columns is None:
        return None
    found = []
    for name, declared in endpoint.columns.items():
        column = declared if isinstance(declared, RestColumn) else RestColumn(type=declared)
        found.append(ApiColumn(name, column.path or key_path(name), column.type))
    return tuple(found)


_ISO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?(Z|[+-]\d{2}:?\d{2})?$")


def infer_columns(records: list[dict[str, Any]]) -> tuple[ApiColumn, ...]:
    """Columns for records without declared ones: each top-level field, in the order first
    seen, typed by its values across the records: integers bigint, with fractions double,
    true/false boolean, ISO 8601 times timestamp (inside objects: string), other text
    string, objects structs (a `flatten` transform spreads them into columns), lists
    arrays; a field whose values disagree is string (JSON text)."""
    found: dict[str, Any] = {}
    for record in records:
        for key, value in record.items():
            shape = _shape(value, top=True)
            found[key] = _merged(found[key], shape) if key in found else shape
    return tuple(ApiColumn(k, key_path(k), _ddl(v)) for k, v in found.items())


_NULL = "null"


def _shape(value: Any, *, top: bool = False) -> Any:
    """A value's type: a Spark type name, {field: shape} for an object, [shape] for a list."""
    if value is None:
        return _NULL
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "bigint"
    if isinstance(value, float):
        return "double"
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()} if value else "string"
    if isinstance(value, list):
        element: Any = _NULL
        for item in value:
            element = _merged(element, _shape(item))
        return [element]
    if top and isinstance(value, str) and _ISO_TIME.match(value):
        return "timestamp"
    return "string"


def _merged(a: Any, b: Any) -> Any:
    """One shape for two values of a field: the wider one, string where they disagree."""
    if a == _NULL:
        return b
    if b == _NULL or a == b:
        return a
    if isinstance(a, dict) and isinstance(b, dict):
        keys = [*a, *(k for k in b if k not in a)]
        return {k: _merged(a.get(k, _NULL), b.get(k, _NULL)) for k in keys}
    if isinstance(a, list) and isinstance(b, list):
        return [_merged(a[0], b[0])]
    if isinstance(a, str) and isinstance(b, str) and {a, b} == {"bigint", "double"}:
        return "double"
    return "string"


def _ddl(shape: Any) -> str:
    if isinstance(shape, dict):
        fields = ", ".join(f"{quoted_name(k)}: {_ddl(v)}" for k, v in shape.items())
        return f"struct<{fields}>"
    if isinstance(shape, list):
        return f"array<{_ddl(shape[0])}>"
    return "string" if shape == _NULL else str(shape)


def key_path(key: str) -> str:
    """The JSON path of a record's top-level field."""
    return key if re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", key) else f"['{key}']"
