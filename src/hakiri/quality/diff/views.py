"""A table's rows as a diff sees them before the compared columns are known (`RowsView`):
in which system, with which columns, and how to make the side that sums them. Sources and
destinations build their own views; the PostgreSQL one is shared here."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from psycopg import sql

from hakiri.errors import HakiriError, SourceUnreachable
from hakiri.guards.spark_types import quoted_name
from hakiri.quality.diff.bisect import Key, key_order
from hakiri.quality.diff.sides import PostgresSide, SparkSide

__all__ = [
    "QUARANTINED_SHOWN",
    "DiffSide",
    "RowsView",
    "connect",
    "pg_filters",
    "postgres_view",
    "same_postgres_types",
    "spark_view",
]

QUARANTINED_SHOWN = 1_000  # quarantined keys listed (apart from the differences)

DiffSide = PostgresSide | SparkSide


@dataclass
class RowsView:
    """A table's rows in one system, before the compared columns are known."""

    system: str  # 'postgres' | 'engine'
    columns: dict[str, str]  # name -> type (information_schema's, or Spark's simple string)
    make: Callable[[list[str], list[str], bool], DiffSide]
    # (every row read, the rows the row rules kept): the keys between are quarantined
    ruled: tuple[Any, Any] | None = None
    release: Callable[[], None] | None = None
    # PostgreSQL: each column's type with its modifiers (numeric(12,2)), to tell when both
    # sides may hash their own text of a row
    exact: dict[str, str] | None = None

    def side(self, columns: list[str], key: list[str], native: bool) -> DiffSide:
        return self.make(columns, key, native)

    def quarantined_keys(self, key: list[str]) -> list[Key]:
        """Up to QUARANTINED_SHOWN keys the row rules keep out of the load."""
        if self.ruled is None:
            return []
        from pyspark.sql import functions as F

        raw, clean = self.ruled
        names = [F.col(quoted_name(k)).cast("string").alias(k) for k in key]
        skipped = raw.select(*names).join(clean.select(*names), key, "left_anti")
        rows = skipped.limit(QUARANTINED_SHOWN).collect()
        return sorted((tuple(r) for r in rows), key=key_order)


def spark_view(frame: Any, where: str | None) -> RowsView:
    """A DataFrame's rows, summed by the engine."""
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    return RowsView("engine", types, lambda columns, key, _: SparkSide(frame, columns, key, where))


@contextmanager
def connect(url: str, what: str, error: type[HakiriError] = SourceUnreachable) -> Iterator[Any]:
    """A psycopg connection for a diff (autocommit, UTC), or `error` in one line."""
    import psycopg

    from hakiri.spec.interpolate import mask_url

    try:
        conn = psycopg.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise error(
            f"cannot connect to {what} at {mask_url(url)}: {str(exc).strip().splitlines()[0]}",
            "check that the server is up and the connection's URL",
        ) from None
    with conn:
        conn.execute("SET TimeZone = 'UTC'")
        yield conn


def postgres_view(
    conn: Any,
    name: tuple[str, str],
    missing: HakiriError,
    filters_for: Callable[[dict[str, str]], list[sql.Composable]],
    alias: str | None = None,
) -> RowsView:
    """A PostgreSQL relation's rows, summed by its server; `missing` raised without it."""
    found = _pg_types(conn, *name)
    if found is None:
        raise missing
    types, exact = found
    filters = filters_for(types)
    relation: sql.Composable = sql.Identifier(*name)
    if alias is not None:
        relation = sql.SQL("{} AS {}").format(relation, sql.Identifier(alias))
    return RowsView(
        "postgres",
        types,
        lambda columns, key, native: PostgresSide(
            conn, relation, types, columns, key, filters, native=native, what=".".join(name)
        ),
        exact=exact,
    )


def _pg_types(conn: Any, schema: str, table: str) -> tuple[dict[str, str], dict[str, str]] | None:
    """Per column of `schema.table`, its information_schema data type (what the canonical
    text goes by) and its type with modifiers; None when the table does not exist."""
    rows = conn.execute(
        "SELECT a.attname, c.data_type, format_type(a.atttypid, a.atttypmod) "
        "FROM information_schema.columns c JOIN pg_attribute a "
        "ON a.attrelid = format('%%I.%%I', c.table_schema, c.table_name)::regclass "
        "AND a.attname = c.column_name "
        "WHERE c.table_schema = %s AND c.table_name = %s ORDER BY c.ordinal_position",
        (schema, table),
    ).fetchall()
    if not rows:
        return None
    return {name: kind for name, kind, _ in rows}, {name: exact for name, _, exact in rows}


def same_postgres_types(source: RowsView, target: RowsView, columns: Sequence[str]) -> bool:
    """Are both sides PostgreSQL, with the same type (and modifiers) for every column?"""
    if source.exact is None or target.exact is None:
        return False
    return all(source.exact[c] == target.exact[c] for c in columns)


def pg_filters(live: Any, where: str | None) -> list[sql.Composable]:
    """The live-rows condition (a sqlglot expression) and the user's `--where` (Spark SQL),
    in PostgreSQL's SQL."""
    import sqlglot

    filters: list[sql.Composable] = []
    if live is not None:
        filters.append(sql.SQL(live.sql(dialect="postgres")))
    if where:
        filters.append(sql.SQL(sqlglot.transpile(where, read="spark", write="postgres")[0]))
    return filters
