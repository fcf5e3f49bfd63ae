"""One canonical text per value, the same in PostgreSQL and in the engine.

A diff compares a row held by PostgreSQL with a row held by the engine (a source read
through transforms, a Delta target) by hashing the same text in both systems, so each
type gets a spelling both can produce:

    integers        decimal digits                      42
    boolean         t | f
    decimal         digits, trailing zeros dropped      12.5 (for 12.50)
    float, double   rounded to 6 decimals, then as a decimal; NaN, Infinity, -Infinity
    date            YYYY-MM-DD
    timestamp       microseconds since 1970-01-01 UTC   (a timestamp without time zone is
                    read as UTC, as hakiri's sessions do)
    binary          the bytes in lower-case hex
    text            itself
    json, arrays    their JSON text as the system writes it (equal when both sides are one
                    system; across systems only when both write the same JSON)

A row's text is its compared columns in name order, each written `<length>:<text>` (or `-`
for NULL) and joined by `|`, so no two rows share a text by accident; its hash is the md5
of that text. A key's text is built the same way from the key columns.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from typing import TYPE_CHECKING

from psycopg import sql

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "KEY_HASH",
    "ROW_HASH",
    "key_hash",
    "key_text_name",
    "pg_hashed",
    "pg_join",
    "pg_texts",
    "pg_where",
    "spark_hashes",
    "spark_texts",
]

KEY_HASH = "_hakiri_diff_kh"
ROW_HASH = "_hakiri_diff_rh"
_FLOAT_DECIMALS = 6


def key_text_name(position: int) -> str:
    return f"_hakiri_diff_k{position}"


# -- the engine -----------------------------------------------------------------------------


def spark_texts(frame: DataFrame, columns: Sequence[str]) -> dict[str, Column]:
    """Each of `columns` of `frame` as its canonical text."""
    from pyspark.sql import functions as F

    types = {f.name: f.dataType for f in frame.schema.fields}
    return {name: _spark_text(F.col(_quoted(name)), types[name]) for name in columns}


def spark_hashes(frame: DataFrame, columns: Sequence[str], key: Sequence[str]) -> list[Column]:
    """The key's canonical texts, the key hash and the row hash, as columns of `frame`."""
    from pyspark.sql import functions as F

    text = spark_texts(frame, columns)
    return [
        *[text[k].alias(key_text_name(i)) for i, k in enumerate(key)],
        F.md5(_spark_join([text[k] for k in key])).alias(KEY_HASH),
        F.md5(_spark_join([text[c] for c in sorted(columns)])).alias(ROW_HASH),
    ]


def _spark_join(texts: list[Column]) -> Column:
    from pyspark.sql import functions as F

    framed = [
        F.when(t.isNull(), F.lit("-")).otherwise(
            F.concat(F.length(t).cast("string"), F.lit(":"), t)
        )
        for t in texts
    ]
    return F.concat_ws("|", *framed)


def _spark_text(column: Column, kind: object) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(kind, T.BooleanType):
        return F.when(column, F.lit("t")).when(~column, F.lit("f"))
    if isinstance(kind, T.DecimalType):
        return _spark_trimmed(column.cast("string"))
    if isinstance(kind, (T.FloatType, T.DoubleType)):
        number = column.cast("double")
        rounded = F.round(number, _FLOAT_DECIMALS).try_cast(f"decimal(38,{_FLOAT_DECIMALS})")
        return (
            F.when(F.isnan(number), F.lit("NaN"))
            .when(number == F.lit(float("inf")), F.lit("Infinity"))
            .when(number == F.lit(float("-inf")), F.lit("-Infinity"))
            .otherwise(F.coalesce(_spark_trimmed(rounded.cast("string")), number.cast("string")))
        )
    if isinstance(kind, T.DateType):
        return F.date_format(column, "yyyy-MM-dd")
    if isinstance(kind, T.TimestampType):
        return F.unix_micros(column).cast("string")
    if isinstance(kind, T.TimestampNTZType):
        return F.unix_micros(column.cast("timestamp")).cast("string")
    if isinstance(kind, T.BinaryType):
        return F.lower(F.hex(column))
    if isinstance(kind, (T.ArrayType, T.MapType, T.StructType)):
        return F.to_json(column)
    return column.cast("string")


def _spark_trimmed(text: Column) -> Column:
    """A plain decimal's text without trailing zeros (and without a bare trailing point)."""
    from pyspark.sql import functions as F

    no_zeros = F.regexp_replace(text, r"(\.[0-9]*?)0+$", "$1")
    return F.regexp_replace(no_zeros, r"\.$", "")


def _quoted(name: str) -> str:
    return "`" + name.replace("`", "``") + "`"


# -- PostgreSQL -----------------------------------------------------------------------------

_INTEGERS = frozenset({"smallint", "integer", "bigint", "oid"})
_FLOATS = frozenset({"real", "double precision"})
_TIMESTAMPS = frozenset({"timestamp with time zone", "timestamp without time zone"})


def pg_texts(types: dict[str, str], columns: Sequence[str]) -> dict[str, sql.Composable]:
    """Each of `columns` as its canonical text, for a relation whose columns have the
    `information_schema` data types in `types`."""
    return {name: _pg_text(sql.Identifier(name), types[name]) for name in columns}


def pg_hashed(
    types: dict[str, str],
    columns: Sequence[str],
    key: Sequence[str],
    relation: sql.Composable,
    where: Sequence[sql.Composable] = (),
    *,
    native: bool = False,
) -> sql.Composed:
    """A query of the key's texts, the key hash and the row hash of each row of `relation`.

    `native`: both sides are PostgreSQL with the same column types, so each side's own text
    of a row (`ROW(...)::text`) is the same on both, and its 64-bit `hashtextextended`
    stands in for the md5 of the canonical text at a fraction of the cost. Otherwise each
    column's canonical text is computed once, in a subquery that `OFFSET 0` keeps
    PostgreSQL from merging into the outer one (merged, it would be computed per use)."""
    filters = pg_where(where)
    if native:
        return sql.SQL(
            "SELECT {keys}, {kh} AS {kh_name}, {rh} AS {rh_name} FROM {rel}{where}"
        ).format(
            keys=sql.SQL(", ").join(
                sql.SQL("{}::text AS {}").format(
                    sql.Identifier(k), sql.Identifier(key_text_name(i))
                )
                for i, k in enumerate(key)
            ),
            kh=_pg_hex_hash([sql.Identifier(k) for k in key]),
            kh_name=sql.Identifier(KEY_HASH),
            rh=_pg_hex_hash([sql.Identifier(c) for c in sorted(columns)]),
            rh_name=sql.Identifier(ROW_HASH),
            rel=relation,
            where=filters,
        )
    text = pg_texts(types, columns)
    alias = {name: sql.Identifier(f"_hakiri_diff_c{i}") for i, name in enumerate(columns)}
    inner = sql.SQL(", ").join(sql.SQL("{} AS {}").format(text[c], alias[c]) for c in columns)
    keys = [
        sql.SQL("{} AS {}").format(alias[k], sql.Identifier(key_text_name(i)))
        for i, k in enumerate(key)
    ]
    outer = sql.SQL(", ").join(
        [
            *keys,
            sql.SQL("md5({}) AS {}").format(
                pg_join([alias[k] for k in key]), sql.Identifier(KEY_HASH)
            ),
            sql.SQL("md5({}) AS {}").format(
                pg_join([alias[c] for c in sorted(columns)]), sql.Identifier(ROW_HASH)
            ),
        ]
    )
    return sql.SQL("SELECT {} FROM (SELECT {} FROM {}{} OFFSET 0) AS c").format(
        outer, inner, relation, filters
    )


def pg_where(conditions: Sequence[sql.Composable]) -> sql.Composable:
    """` WHERE (a) AND (b)`, or nothing without a condition."""
    if not conditions:
        return sql.SQL("")
    return sql.SQL(" WHERE ") + sql.SQL(" AND ").join(sql.SQL("({})").format(c) for c in conditions)


def _pg_hex_hash(columns: list[sql.Composable]) -> sql.Composable:
    """16 hex digits of PostgreSQL's 64-bit hash of the columns' row text."""
    return sql.SQL("lpad(to_hex(hashtextextended(ROW({})::text, 0)), 16, '0')").format(
        sql.SQL(", ").join(columns)
    )


def key_hash(texts: Sequence[str | None]) -> str:
    """The key hash of a key's canonical texts, as both systems compute it."""
    framed = ["-" if t is None else f"{len(t)}:{t}" for t in texts]
    return hashlib.md5("|".join(framed).encode()).hexdigest()


def pg_join(texts: list[sql.Composable]) -> sql.Composable:
    framed = [
        sql.SQL("CASE WHEN {t} IS NULL THEN '-' ELSE length({t})::text || ':' || {t} END").format(
            t=t
        )
        for t in texts
    ]
    return sql.SQL("concat_ws('|', {})").format(sql.SQL(", ").join(framed))


def _pg_text(column: sql.Composable, kind: str) -> sql.Composable:
    if kind in _INTEGERS:
        return sql.SQL("{}::text").format(column)
    if kind == "boolean":
        return sql.SQL("CASE WHEN {c} THEN 't' WHEN NOT {c} THEN 'f' END").format(c=column)
    if kind == "numeric":
        return sql.SQL("trim_scale({})::text").format(column)
    if kind in _FLOATS:
        return sql.SQL(
            "CASE WHEN {c} = 'NaN' THEN 'NaN' WHEN {c} = 'Infinity' THEN 'Infinity' "
            "WHEN {c} = '-Infinity' THEN '-Infinity' "
            "ELSE trim_scale(round({c}::numeric, {d}))::text END"
        ).format(c=column, d=sql.Literal(_FLOAT_DECIMALS))
    if kind == "date":
        return sql.SQL("to_char({}, 'YYYY-MM-DD')").format(column)
    if kind in _TIMESTAMPS:
        return sql.SQL("(extract(epoch FROM {}) * 1000000)::bigint::text").format(column)
    if kind == "bytea":
        return sql.SQL("encode({}, 'hex')").format(column)
    if kind == "ARRAY":
        return sql.SQL("to_json({})::text").format(column)
    return sql.SQL("{}::text").format(column)
