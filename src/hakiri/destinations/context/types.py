"""Spark SQL types -> Delta Lake type names, as the context store records them."""

from __future__ import annotations

import re
from typing import Any

_SPARK_TO_DELTA = {
    "string": "string",
    "varchar": "string",
    "tinyint": "byte",
    "byte": "byte",
    "smallint": "short",
    "short": "short",
    "int": "integer",
    "integer": "integer",
    "bigint": "long",
    "long": "long",
    "float": "float",
    "real": "float",
    "double": "double",
    "boolean": "boolean",
    "bool": "boolean",
    "date": "date",
    "timestamp": "timestamp",
    "timestamp_ltz": "timestamp",
    "timestamp_ntz": "timestamp_ntz",
    "binary": "binary",
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def spark_to_delta(spark_type: str) -> str | None:
    """Spark's name of a type as Delta names it ('bigint' -> 'long'); nested types are
    spelled as `inspect.type_name` writes a Delta schema's ('struct<id:long,tags:array<string>>'),
    so a struct read again compares equal to the one the table holds."""
    text = spark_type.strip()
    lowered = text.lower()
    if lowered.startswith("array<") and lowered.endswith(">"):
        element = spark_to_delta(text[6:-1])
        return None if element is None else f"array<{element}>"
    if lowered.startswith("map<") and lowered.endswith(">"):
        parts = _split_top_level(text[4:-1])
        kinds = [spark_to_delta(p) for p in parts]
        if len(kinds) != 2 or None in kinds:
            return None
        return f"map<{kinds[0]},{kinds[1]}>"
    if lowered.startswith("struct<") and lowered.endswith(">"):
        fields = []
        for part in _split_top_level(text[7:-1]):
            name, colon, kind = part.partition(":")
            field_type = spark_to_delta(kind) if colon else None
            if not name.strip() or field_type is None:
                return None
            fields.append(f"{name.strip().strip('`')}:{field_type}")
        return f"struct<{','.join(fields)}>" if fields else None
    normalized = lowered
    match = _DECIMAL.match(normalized)
    if match:
        return f"decimal({match.group(1)},{match.group(2)})"
    if normalized.startswith(("varchar(", "char(")):
        return "string"
    return _SPARK_TO_DELTA.get(normalized)


def delta_type_json(type_name: str) -> str | dict[str, Any] | None:
    """A type name, in Delta's or Spark's spelling ('long', 'bigint', 'decimal(12,2)',
    'array<long>', 'map<string,double>', 'struct<a:long>'), as the type of a Delta (and Spark)
    schema JSON field; None when it is no type the context store can hold."""
    text = type_name.strip()
    lowered = text.lower()
    if lowered.startswith("array<") and lowered.endswith(">"):
        element = delta_type_json(text[6:-1])
        if element is None:
            return None
        return {"type": "array", "elementType": element, "containsNull": True}
    if lowered.startswith("map<") and lowered.endswith(">"):
        parts = _split_top_level(text[4:-1])
        if len(parts) != 2:
            return None
        key, value = delta_type_json(parts[0]), delta_type_json(parts[1])
        if key is None or value is None:
            return None
        return {"type": "map", "keyType": key, "valueType": value, "valueContainsNull": True}
    if lowered.startswith("struct<") and lowered.endswith(">"):
        fields: list[dict[str, Any]] = []
        for part in _split_top_level(text[7:-1]):
            name, colon, kind = part.partition(":")
            field_type = delta_type_json(kind) if colon else None
            if not name.strip() or field_type is None:
                return None
            fields.append(
                {"name": name.strip(), "type": field_type, "nullable": True, "metadata": {}}
            )
        return {"type": "struct", "fields": fields} if fields else None
    return spark_to_delta(text)


def _split_top_level(text: str) -> list[str]:
    """`text` split at the commas outside <...> and (...)."""
    parts: list[str] = []
    depth = 0
    start = 0
    for i, char in enumerate(text):
        if char in "<(":
            depth += 1
        elif char in ">)":
            depth -= 1
        elif char == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [part.strip() for part in parts]
