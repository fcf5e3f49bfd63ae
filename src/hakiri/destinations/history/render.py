"""The few pieces of SQL the history modes build everything from, as sqlglot expressions, and
the one place they become text (`render`) for PostgreSQL or Spark SQL.

Every identifier is quoted: hakiri creates columns with their names' exact case, and a name
may be a keyword or hold a space, a quote or a backtick. Where the two dialects truly differ
(a row's hash, a timestamp literal) the difference is one small function here.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Literal

import sqlglot
from sqlglot import exp

from hakiri.guards.expressions import filter_for
from hakiri.spec.load import LoadSpec

__all__ = [
    "Dialect",
    "all_of",
    "cast",
    "column",
    "count_rows",
    "delete_scope",
    "keys_equal",
    "null_safe_equal",
    "render",
    "row_hash",
    "select_rows",
    "table",
    "timestamp",
]

Dialect = Literal["postgres", "spark"]


def render(expression: exp.Expr, dialect: Dialect) -> str:
    return expression.sql(dialect=dialect, identify=True)


def table(*parts: str, alias: str | None = None) -> exp.Table:
    """A table by its name's parts (`schema, name` or a view's one name)."""
    *prefix, name = parts
    return exp.table_(
        name,
        db=prefix[-1] if prefix else None,
        catalog=prefix[-2] if len(prefix) > 1 else None,
        quoted=True,
        alias=alias,
    )


def column(name: str, alias: str | None = None) -> exp.Column:
    return exp.column(name, table=alias, quoted=True)


def cast(value: exp.Expr, type_name: str) -> exp.Cast:
    """CAST to a type named as the destination names it (PostgreSQL's format_type, Spark's
    simpleString), written as it is."""
    return exp.Cast(this=value, to=exp.DataType(this=exp.DataType.Type.USERDEFINED, kind=type_name))


def all_of(conditions: Iterable[exp.Expr]) -> exp.Expr:
    """The conditions ANDed; TRUE for none."""
    listed = list(conditions)
    return exp.and_(*listed) if listed else exp.true()


def keys_equal(key: Sequence[str], left: str, right: str) -> exp.Expr:
    return all_of(exp.EQ(this=column(k, left), expression=column(k, right)) for k in key)


def null_safe_equal(left: exp.Expr, right: exp.Expr) -> exp.Expr:
    """`left IS NOT DISTINCT FROM right`, parenthesized: delta-rs's parser would read an AND
    after it as part of its right side."""
    return exp.paren(exp.NullSafeEQ(this=left, expression=right))


def count_rows(source: exp.Table, where: exp.Expr, alias: str = "t") -> exp.Select:
    return (
        exp.select(exp.Count(this=exp.Star()).as_("n", quoted=True))
        .from_(source.as_(alias, quoted=True))
        .where(where)
    )


def select_rows(names: Iterable[str], source: exp.Table, where: exp.Expr) -> exp.Select:
    """The named columns of `source`'s rows (alias t) where `where` holds."""
    return (
        exp.select(*(column(n, "t") for n in names))
        .from_(source.as_("t", quoted=True))
        .where(where)
    )


def delete_scope(load: LoadSpec, alias: str) -> exp.Expr:
    """`delete_scope` over the target's rows (aliased; NULL counts as outside), or TRUE."""
    if load.delete_scope is None:
        return exp.true()
    scope = sqlglot.parse_one(
        filter_for(load.delete_scope, dialect="spark", alias=alias), read="spark"
    )
    return exp.Coalesce(this=exp.paren(scope), expressions=[exp.false()])


def row_hash(
    columns: Sequence[str],
    alias: str,
    dialect: Dialect,
    types: Mapping[str, str] | None = None,
) -> exp.Expr:
    """A NULL-safe hash of the values of `columns` (cast to `types` first, when given, so the
    staged rows hash as the target's do): PostgreSQL hashes the row's text, which works for
    json too; Spark the row as JSON."""
    cells: list[exp.Expr] = [
        cast(column(c, alias), types[c]) if types else column(c, alias) for c in columns
    ]
    if dialect == "postgres":
        row = exp.Anonymous(this="ROW", expressions=cells)
        return exp.func("md5", cast(row, "text"), dialect="postgres")
    if not cells:
        return exp.Literal.string("")
    struct = exp.Struct(expressions=cells)
    return exp.SHA2(this=exp.func("to_json", struct), length=exp.Literal.number(256))


def timestamp(value: datetime, dialect: Dialect) -> exp.Expr:
    """A point in time: timestamptz in PostgreSQL; in Spark a TIMESTAMP of its UTC wall time
    (the session's time zone is UTC)."""
    if dialect == "postgres":
        return cast(exp.Literal.string(value.isoformat(sep=" ")), "timestamptz")
    utc = value.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
    return cast(exp.Literal.string(utc), "timestamp")
