"""Spark SQL types -> PostgreSQL column types, for targets hakiri creates (documented in docs/types.md)."""

from __future__ import annotations

import re

_SPARK_TO_POSTGRES = {
    "string": "text",
    "varchar": "text",
    "char": "text",
    "tinyint": "smallint",
    "byte": "smallint",
    "smallint": "smallint",
    "short": "smallint",
    "int": "integer",
    "integer": "integer",
    "bigint": "bigint",
    "long": "bigint",
    "float": "real",
    "real": "real",
    "double": "double precision",
    "boolean": "boolean",
    "bool": "boolean",
    "date": "date",
    "timestamp": "timestamp with time zone",  # Spark's TIMESTAMP is an instant
    "timestamp_ltz": "timestamp with time zone",
    "timestamp_ntz": "timestamp without time zone",
    "binary": "bytea",
    "void": "text",  # a column that is NULL in every row (e.g. lit(None)) has no type of its own
}
_DECIMAL = re.compile(r"^decimal\s*\(\s*(\d+)\s*,\s*(\d+)\s*\)$")


def spark_to_postgres(spark_type: str) -> str | None:
    """'bigint' -> 'bigint', 'decimal(12,2)' -> 'numeric(12,2)'; None for types we do not map (arrays, structs)."""
    normalized = spark_type.strip().lower()
    match = _DECIMAL.match(normalized)
    if match:
        return f"numeric({match.group(1)},{match.group(2)})"
    if normalized.startswith(("varchar(", "char(", "string collate ")):
        return "text"
    return _SPARK_TO_POSTGRES.get(normalized)
