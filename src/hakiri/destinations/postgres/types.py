"""Spark SQL types <-> PostgreSQL column types: for targets hakiri creates (documented in
docs/types.md), and for reading a table's own types in Spark terms."""

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


_PG_TO_SPARK = {
    "smallint": "smallint",
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "text": "string",
    "date": "date",
    "timestamp with time zone": "timestamp",
    "timestamp without time zone": "timestamp_ntz",
    "bytea": "binary",
    "uuid": "string",
    "json": "string",
    "jsonb": "string",
}
_PARAMS = re.compile(r"^(?P<base>[a-z_ ]+?)\s*(\((?P<args>[^)]*)\))?$")


def split_type(type_name: str) -> tuple[str, list[int]]:
    """'numeric(12, 2)' -> ('numeric', [12, 2]); a name without parameters -> (name, [])."""
    match = _PARAMS.match(type_name.strip().lower())
    if not match:
        return type_name.strip().lower(), []
    args = [int(a) for a in (match.group("args") or "").split(",") if a.strip().isdigit()]
    return match.group("base").strip(), args


def postgres_to_spark(type_name: str) -> str | None:
    """'numeric(12,2)' -> 'decimal(12,2)', 'character varying(20)' -> 'string'; None for types
    Spark has no name for (a domain, an enum)."""
    base, args = split_type(type_name)
    if base == "numeric" and len(args) == 2:
        return f"decimal({args[0]},{args[1]})"
    if base in ("character varying", "character"):
        return "string"
    return _PG_TO_SPARK.get(base)
