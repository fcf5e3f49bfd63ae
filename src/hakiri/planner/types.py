"""Does a source column fit its target column? Shared by both destinations' type names.

Verdicts: 'same'; 'fits' (the target is at least as wide); 'widen' (the target
must be widened: int -> bigint, varchar(n) -> text, date -> timestamp; allowed and
applied); 'incompatible' (a different kind of value: apply refuses it).
"""

from __future__ import annotations

from hakiri.destinations.kinds import kind_of
from hakiri.destinations.postgres.types import postgres_to_spark, split_type

# family -> ordered names, narrowest first (PostgreSQL and Delta spellings alike)
_FAMILIES: dict[str, list[set[str]]] = {
    "number": [
        {"byte", "tinyint"},
        {"smallint", "short", "int2"},
        {"integer", "int", "int4"},
        {"bigint", "long", "int8"},
        {"numeric", "decimal"},
    ],
    "float": [{"real", "float", "float4"}, {"double precision", "double", "float8"}],
    "text": [{"character varying", "varchar"}, {"text", "string"}],
    "time": [
        {"date"},
        {"timestamp without time zone", "timestamp_ntz"},
        {"timestamp with time zone", "timestamp", "timestamptz"},
    ],
}
_ARROW_TO_SPARK = {
    "int8": "tinyint",
    "int16": "smallint",
    "int32": "int",
    "int64": "bigint",
    "uint8": "smallint",
    "uint16": "int",
    "uint32": "bigint",
    "float": "float",
    "halffloat": "float",
    "double": "double",
    "bool": "boolean",
    "string": "string",
    "large_string": "string",
    "string_view": "string",
    "date32[day]": "date",
    "date32": "date",
    "date64": "date",
    "binary": "binary",
    "large_binary": "binary",
}


def _rank(type_name: str) -> tuple[str, int, list[int]] | None:
    base, args = split_type(type_name)
    for family, ranks in _FAMILIES.items():
        for rank, names in enumerate(ranks):
            if base in names:
                return family, rank, args
    return None


def compare_types(source: str, target: str) -> str:
    """Verdict for loading values of type `source` into a column of type `target`."""
    if split_type(source) == split_type(target):
        return "same"
    src, tgt = _rank(source), _rank(target)
    if tgt is not None and tgt[0] == "text" and tgt[1] == len(_FAMILIES["text"]) - 1:
        return "fits"  # anything loads into an unbounded text column
    if src is None or tgt is None or src[0] != tgt[0]:
        return "incompatible"
    if src[1] != tgt[1]:
        return "fits" if src[1] < tgt[1] else "widen"
    # Same type with parameters: varchar(n) vs varchar(m), numeric(p,s) vs numeric(q,t).
    if src[2] and tgt[2] and any(s > t for s, t in zip(src[2], tgt[2], strict=False)):
        return "widen"
    return "fits"


def source_type_as_spark(vocabulary: str, type_name: str | None) -> str | None:
    """A source's own type name in Spark SQL terms, by the vocabulary its kind speaks
    (`SourceKind.types`): "postgres" (its type names), else Spark's or Arrow's."""
    if type_name is None:
        return None
    lowered = type_name.strip().lower()
    if vocabulary == "postgres":
        return postgres_to_spark(lowered)
    if lowered.startswith("timestamp["):
        return "timestamp" if "tz=" in lowered else "timestamp_ntz"
    if lowered.startswith("decimal128(") or lowered.startswith("decimal("):
        _, args = split_type(lowered.replace("decimal128", "decimal"))
        return f"decimal({args[0]},{args[1]})" if len(args) == 2 else None
    return _ARROW_TO_SPARK.get(lowered, lowered)


def destination_type(spark_type: str, destination_kind: str) -> str | None:
    """The type a column of `spark_type` gets in a destination of that kind."""
    return kind_of(destination_kind).column_type(spark_type)


def target_type_as_spark(destination_kind: str, type_name: str) -> str | None:
    """A target column's type ('bigint', 'numeric(12,2)'; Delta's 'long', 'array<long>') in Spark
    SQL terms; None when Spark has no equivalent (e.g. PostgreSQL's uuid or a domain)."""
    return kind_of(destination_kind).type_as_spark(type_name)
