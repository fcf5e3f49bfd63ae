"""Spark SQL types -> Delta Lake primitive type names, as the context store records them."""

from __future__ import annotations

import re

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
    normalized = spark_type.strip().lower()
    match = _DECIMAL.match(normalized)
    if match:
        return f"decimal({match.group(1)},{match.group(2)})"
    if normalized.startswith(("varchar(", "char(")):
        return "string"
    return _SPARK_TO_DELTA.get(normalized)
