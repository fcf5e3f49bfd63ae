"""Inspect PostgreSQL source tables without a JVM: columns from pg_catalog, row counts from statistics.

One read-only transaction per call; nothing is counted (`count(*)` on a large table
is exactly what `plan` must not do), so every row figure is the planner's estimate.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any, NamedTuple

from hakiri.errors import SourceUnreachable
from hakiri.sources.base import SourceColumn, SourceObservation
from hakiri.sources.cursors.ranges import CursorBounds
from hakiri.spec.interpolate import first_line_without_password, mask_url

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "SourceTableRequest",
    "cursor_bounds",
    "inspect_postgres_table",
    "inspect_postgres_tables",
    "table_fingerprint",
]

CONNECT_TIMEOUT_SECONDS = 5
# A table locked by a running DDL or swap must not hang `plan`.
_TIMEOUTS = {"statement_timeout": "30s", "lock_timeout": "5s"}
_CONNECT_HINT = "check the source connection's url/host and that the server is up"
_ESTIMATE_DIRECTLY = frozenset("rmp")  # relkinds whose pg_class.reltuples is maintained by ANALYZE

_RELATION = """
SELECT c.oid, c.relkind, c.reltuples, c.relpages
FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
"""
_COLUMNS = """
SELECT a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod)
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = %s::oid AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attnum
"""


class SourceTableRequest(NamedTuple):
    """One table to inspect; a plain (schema, table[, cursor_column[, cursor_value]]) tuple works too."""

    schema: str
    table: str
    cursor_column: str | None = None
    cursor_value: object | None = None


def inspect_postgres_table(
    url: str,
    schema: str,
    table: str,
    cursor_column: str | None = None,
    cursor_value: object | None = None,
) -> SourceObservation:
    """Columns of `schema.table` and the estimated rows past `cursor_value` (all rows without one)."""
    return inspect_postgres_tables(
        url, [SourceTableRequest(schema, table, cursor_column, cursor_value)]
    )[0]


def inspect_postgres_tables(
    url: str, requests: Sequence[SourceTableRequest | tuple[Any, ...]]
) -> list[SourceObservation]:
    """`inspect_postgres_table` for many tables over one connection, in the order asked.

    The first table that cannot be inspected raises SourceUnreachable for the whole call.
    """
    import psycopg

    shown = mask_url(url)
    conn = _connect(url, shown)
    try:
        with conn.transaction():
            conn.execute(
                "SELECT pg_catalog.set_config(%s, %s, true), pg_catalog.set_config(%s, %s, true)",
                [item for pair in _TIMEOUTS.items() for item in pair],
            )
            return [_inspect(conn, shown, SourceTableRequest(*request)) for request in requests]
    except psycopg.Error as exc:
        raise SourceUnreachable(
            f"cannot inspect source tables on PostgreSQL at {shown}: {first_line_without_password(exc, url)}",
            "check that the connection's user may read the source tables' catalog and statistics",
        ) from None
    finally:
        conn.close()


def _connect(url: str, shown: str) -> psycopg.Connection[Any]:
    import psycopg

    from hakiri import pgpool

    try:
        conn = pgpool.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except psycopg.Error as exc:
        raise SourceUnreachable(
            f"cannot connect to PostgreSQL at {shown}: {first_line_without_password(exc, url)}",
            _CONNECT_HINT,
        ) from None
    # Every transaction of this session is READ ONLY: plan must not be able to write.
    conn.read_only = True
    return conn


def _inspect(
    conn: psycopg.Connection[Any], shown: str, request: SourceTableRequest
) -> SourceObservation:
    schema, table, cursor_column, cursor_value = request
    relation = conn.execute(_RELATION, (schema, table)).fetchone()
    if relation is None:
        raise SourceUnreachable(
            f"source table {schema}.{table} does not exist ({shown})",
            "check `schema` in the source config and the names in `tables` (names are case-sensitive)",
        )
    oid, relkind, reltuples, relpages = relation
    columns = tuple(SourceColumn(name, type_) for name, type_ in conn.execute(_COLUMNS, (oid,)))
    if cursor_column is not None and cursor_column not in {c.name for c in columns}:
        raise SourceUnreachable(
            f"cursor column {cursor_column} does not exist in source table {schema}.{table} ({shown})",
            "check `incremental` in the pipeline against the source table's columns (names are case-sensitive)",
        )
    past = cursor_column is not None and cursor_value is not None
    if past and not _any_past(conn, request):
        # EXPLAIN never estimates below one row; an index probe tells "nothing new" exactly.
        return SourceObservation(table, columns, estimated_rows=0, estimate_source="counted")
    counted = _count_within(conn, request, COUNT_BUDGET)
    if counted is not None:
        return SourceObservation(table, columns, estimated_rows=counted, estimate_source="counted")
    if past:
        estimate = _explain_rows(conn, request)
    elif (
        relkind in _ESTIMATE_DIRECTLY
        and reltuples >= 0
        and not _unknown_before_pg14(conn, reltuples, relpages)
    ):
        estimate = round(reltuples)
    else:
        # Never analyzed (or a view / foreign table): the planner's own guess is the best we have.
        estimate = _explain_rows(conn, SourceTableRequest(schema, table))
    return SourceObservation(
        table=table, columns=columns, estimated_rows=estimate, estimate_source=ROUGH_ESTIMATE
    )


# An exact count(*) gets this long (an index on the cursor makes a range count quick); past
# it, plan shows the planner's estimate and says it is rough.
COUNT_BUDGET = "200ms"
ROUGH_ESTIMATE = "rough: PostgreSQL's planner statistics"


def _count_within(
    conn: psycopg.Connection[Any], request: SourceTableRequest, budget: str
) -> int | None:
    """count(*) of the rows past the cursor (all rows without one), or None when it takes
    longer than `budget` (the statement is cancelled, the read-only transaction goes on)."""
    import psycopg
    from psycopg import sql

    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(request.schema, request.table))
    params: list[object] = []
    if request.cursor_column is not None and request.cursor_value is not None:
        query = sql.SQL("{} WHERE {} > %s").format(query, sql.Identifier(request.cursor_column))
        params.append(_cursor_param(request.cursor_value))
    try:
        with conn.transaction():  # a savepoint: a cancelled count leaves the rest usable
            conn.execute("SELECT pg_catalog.set_config('statement_timeout', %s, true)", (budget,))
            row = conn.execute(query, params).fetchone()
            conn.execute(
                "SELECT pg_catalog.set_config('statement_timeout', %s, true)",
                (_TIMEOUTS["statement_timeout"],),
            )
    except psycopg.errors.QueryCanceled:
        conn.execute(
            "SELECT pg_catalog.set_config('statement_timeout', %s, true)",
            (_TIMEOUTS["statement_timeout"],),
        )
        return None
    return int(row[0]) if row else None


def _unknown_before_pg14(conn: psycopg.Connection[Any], reltuples: float, relpages: int) -> bool:
    # Before PostgreSQL 14, a never-analyzed table reads reltuples = 0, not -1.
    return conn.info.server_version < 140000 and reltuples == 0 and relpages == 0


def _explain_rows(conn: psycopg.Connection[Any], request: SourceTableRequest) -> int:
    from psycopg import sql

    query = sql.SQL("EXPLAIN (FORMAT JSON) SELECT 1 FROM {}").format(
        sql.Identifier(request.schema, request.table)
    )
    params: list[object] = []
    if request.cursor_column is not None and request.cursor_value is not None:
        # An untyped parameter for strings: PostgreSQL reads it as the cursor column's type.
        query = sql.SQL("{} WHERE {} > %s").format(query, sql.Identifier(request.cursor_column))
        params.append(_cursor_param(request.cursor_value))
    row = conn.execute(query, params).fetchone()
    assert row is not None
    plan = row[0]
    if isinstance(plan, str):  # json arrives as text when no loader is registered
        import json

        plan = json.loads(plan)
    return round(plan[0]["Plan"]["Plan Rows"])


def _any_past(conn: psycopg.Connection[Any], request: SourceTableRequest) -> bool:
    from psycopg import sql

    query = sql.SQL("SELECT EXISTS (SELECT 1 FROM {} WHERE {} > %s)").format(
        sql.Identifier(request.schema, request.table), sql.Identifier(request.cursor_column or "")
    )
    row = conn.execute(query, [_cursor_param(request.cursor_value)]).fetchone()
    return bool(row and row[0])


def _cursor_param(value: object) -> object:
    if isinstance(value, str | int | float | Decimal | dt.date | dt.datetime | dt.time):
        return value
    return str(value)


def cursor_bounds(url: str, schema: str, table: str, column: str) -> CursorBounds:
    """MIN and MAX of the cursor column (an index on it makes this two index probes)."""
    from psycopg import sql

    def work(conn: psycopg.Connection[Any]) -> CursorBounds:
        oid = _relation_oid(conn, url, schema, table)
        types = dict(conn.execute(_COLUMNS, (oid,)).fetchall())
        if column not in types:
            raise SourceUnreachable(
                f"cursor column {column} does not exist in source table {schema}.{table} ({mask_url(url)})",
                "check `incremental` in the pipeline against the source table's columns (names are case-sensitive)",
            )
        query = sql.SQL("SELECT min({c}), max({c}) FROM {t}").format(
            c=sql.Identifier(column), t=sql.Identifier(schema, table)
        )
        row = conn.execute(query).fetchone()
        assert row is not None
        return CursorBounds(types[column], row[0], row[1])

    return _read_only(url, work, f"{schema}.{table}")


def table_fingerprint(url: str, schema: str, table: str) -> str:
    """A digest of every row (count and the sum of row hashes): equal when the table did not change.

    It reads the whole table, which a full-refresh load is about to do anyway.
    """
    from psycopg import sql

    def work(conn: psycopg.Connection[Any]) -> str:
        _relation_oid(conn, url, schema, table)
        query = sql.SQL(
            "SELECT count(*), coalesce(sum(hashtextextended(r::text, 0)), 0) FROM {} AS r"
        ).format(sql.Identifier(schema, table))
        row = conn.execute(query).fetchone()
        assert row is not None
        return f"{row[0]}:{row[1]}"

    return _read_only(url, work, f"{schema}.{table}")


def _relation_oid(conn: psycopg.Connection[Any], url: str, schema: str, table: str) -> int:
    relation = conn.execute(_RELATION, (schema, table)).fetchone()
    if relation is None:
        raise SourceUnreachable(
            f"source table {schema}.{table} does not exist ({mask_url(url)})",
            "check `schema` in the source config and the names in `tables` (names are case-sensitive)",
        )
    return int(relation[0])


def _read_only(url: str, work: Any, what: str) -> Any:
    import psycopg

    shown = mask_url(url)
    conn = _connect(url, shown)
    try:
        with conn.transaction():
            return work(conn)
    except psycopg.Error as exc:
        raise SourceUnreachable(
            f"cannot read source table {what} on PostgreSQL at {shown}: "
            f"{first_line_without_password(exc, url)}",
            "check that the connection's user may SELECT from the source table",
        ) from None
    finally:
        conn.close()
