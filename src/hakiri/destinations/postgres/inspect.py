"""Inspect PostgreSQL target tables: existence, columns, primary key, dependent views, row estimate.

Read-only: one READ ONLY transaction over one connection, whatever the number of
tables; each question is one catalog query for all the tables at once, so plan
latency does not grow with round trips. Names are passed as values, never spliced
into SQL, so any spelling (spaces, quotes, upper case, non-ASCII) is looked up as is.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

from hakiri.destinations.base import TargetColumn, TargetObservation
from hakiri.errors import DestinationUnreachable
from hakiri.spec.interpolate import first_line_without_password, mask_url

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "count_postgres_rows",
    "inspect_postgres_target",
    "inspect_postgres_targets",
    "observe_targets",
]

CONNECT_TIMEOUT_SECONDS = 5
T = TypeVar("T")
# A target locked by a running load (blue_green swap, DDL) must not hang `plan`.
_TIMEOUTS = ("statement_timeout", "30s", "lock_timeout", "5s")

# (position in the request, oid or NULL, reltuples) for every requested (schema, table).
_RELATIONS = """
SELECT t.ord, c.oid, c.reltuples
FROM unnest(%s::text[], %s::text[]) WITH ORDINALITY AS t(nsp, rel, ord)
LEFT JOIN pg_catalog.pg_namespace n ON n.nspname = t.nsp
LEFT JOIN pg_catalog.pg_class c
  ON c.relnamespace = n.oid AND c.relname = t.rel AND c.relkind IN ('r', 'p', 'v', 'm', 'f')
ORDER BY t.ord
"""
_MISSING_SCHEMAS = """
SELECT s.nsp FROM unnest(%s::text[]) AS s(nsp)
WHERE NOT EXISTS (SELECT 1 FROM pg_catalog.pg_namespace n WHERE n.nspname = s.nsp)
"""
_MAY_CREATE_SCHEMA = "SELECT pg_catalog.has_database_privilege(current_database(), 'CREATE')"
_COLUMNS = """
SELECT a.attrelid, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), NOT a.attnotnull
FROM pg_catalog.pg_attribute a
WHERE a.attrelid = ANY(%s::oid[]) AND a.attnum > 0 AND NOT a.attisdropped
ORDER BY a.attrelid, a.attnum
"""
_PRIMARY_KEYS = """
SELECT con.conrelid, a.attname
FROM pg_catalog.pg_constraint con
CROSS JOIN LATERAL unnest(con.conkey) WITH ORDINALITY AS k(attnum, ord)
JOIN pg_catalog.pg_attribute a ON a.attrelid = con.conrelid AND a.attnum = k.attnum
WHERE con.conrelid = ANY(%s::oid[]) AND con.contype = 'p'
ORDER BY con.conrelid, k.ord
"""
# A view's query is a rewrite rule; the rule depends on every relation the query reads.
_DEPENDENT_VIEWS = """
SELECT DISTINCT d.refobjid, vn.nspname, v.relname
FROM pg_catalog.pg_depend d
JOIN pg_catalog.pg_rewrite r ON r.oid = d.objid
JOIN pg_catalog.pg_class v ON v.oid = r.ev_class
JOIN pg_catalog.pg_namespace vn ON vn.oid = v.relnamespace
WHERE d.classid = 'pg_catalog.pg_rewrite'::regclass
  AND d.refclassid = 'pg_catalog.pg_class'::regclass
  AND d.refobjid = ANY(%s::oid[])
  AND v.oid <> d.refobjid
  AND v.relkind IN ('v', 'm')
"""


def inspect_postgres_target(url: str, schema: str, table: str) -> TargetObservation:
    """What `schema.table` looks like now (exists=False when there is no such table)."""
    return inspect_postgres_targets(url, [(schema, table)])[0]


def inspect_postgres_targets(
    url: str, tables: Sequence[tuple[str, str]]
) -> list[TargetObservation]:
    """`inspect_postgres_target` for many (schema, table) pairs over one connection, in the order asked."""
    if not tables:
        return []
    return _read_only(
        url,
        lambda conn: _inspect(conn, tables),
        "cannot inspect target tables",
        "check that the connection's user may read the catalog (pg_catalog) of the target database",
    )


def count_postgres_rows(url: str, tables: Sequence[tuple[str, str]]) -> list[int | None]:
    """count(*) of each existing (schema, table), None for one that does not exist; one READ
    ONLY transaction. A full count, not the planner's estimate: drift compares it exactly."""
    from psycopg import sql

    def count(conn: psycopg.Connection[Any]) -> list[int | None]:
        schemas = [schema for schema, _ in tables]
        names = [table for _, table in tables]
        found = conn.execute(_RELATIONS, (schemas, names)).fetchall()
        counts: list[int | None] = []
        for (schema, table), (_, oid, _) in zip(tables, found, strict=True):
            if oid is None:
                counts.append(None)
                continue
            query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(schema, table))
            [(rows,)] = conn.execute(query).fetchall()
            counts.append(int(rows))
        return counts

    return _read_only(
        url,
        count,
        "cannot count the rows of target tables",
        "check that the connection's user may read the target tables",
    )


def _read_only(url: str, work: Callable[[psycopg.Connection[Any]], T], failed: str, hint: str) -> T:
    """`work` in one READ ONLY transaction with plan's timeouts (plan must not be able to
    write, nor hang on a locked target); a failure is DestinationUnreachable in one line."""
    import psycopg

    from hakiri import pgpool

    shown = mask_url(url)
    try:
        conn = pgpool.connect(url, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except psycopg.Error as exc:
        raise DestinationUnreachable(
            f"cannot connect to PostgreSQL at {shown}: {first_line_without_password(exc, url)}",
            "check the connection's url/host and that the server is up",
        ) from None
    try:
        conn.read_only = True
        with conn.transaction():
            conn.execute(
                "SELECT pg_catalog.set_config(%s, %s, true), pg_catalog.set_config(%s, %s, true)",
                _TIMEOUTS,
            )
            return work(conn)
    except psycopg.Error as exc:
        raise DestinationUnreachable(
            f"{failed} on PostgreSQL at {shown}: {first_line_without_password(exc, url)}", hint
        ) from None
    finally:
        conn.close()


def _inspect(
    conn: psycopg.Connection[Any], tables: Sequence[tuple[str, str]]
) -> list[TargetObservation]:
    schemas = [schema for schema, _ in tables]
    names = [table for _, table in tables]
    relations = conn.execute(_RELATIONS, (schemas, names)).fetchall()
    oids = sorted({oid for _, oid, _ in relations if oid is not None})

    columns: dict[int, list[TargetColumn]] = defaultdict(list)
    keys: dict[int, list[str]] = defaultdict(list)
    views: dict[int, set[str]] = defaultdict(set)
    if oids:
        for oid, name, type_, nullable in conn.execute(_COLUMNS, (oids,)):
            columns[oid].append(TargetColumn(name, type_, nullable))
        for oid, name in conn.execute(_PRIMARY_KEYS, (oids,)):
            keys[oid].append(name)
        for oid, view_schema, view in conn.execute(_DEPENDENT_VIEWS, (oids,)):
            views[oid].add(f"{view_schema}.{view}")

    missing = {row[0] for row in conn.execute(_MISSING_SCHEMAS, (sorted(set(schemas)),))}
    may_create = True
    if missing:
        row = conn.execute(_MAY_CREATE_SCHEMA).fetchone()
        may_create = bool(row and row[0])
    observations = []
    for (schema, table), (_, oid, reltuples) in zip(tables, relations, strict=True):
        if oid is None:
            observations.append(
                TargetObservation(
                    table=table,
                    schema=schema,
                    exists=False,
                    schema_missing=schema in missing,
                    may_create_schema=may_create,
                )
            )
            continue
        observations.append(
            TargetObservation(
                table=table,
                schema=schema,
                exists=True,
                columns=tuple(columns[oid]),
                primary_key=tuple(keys[oid]),
                dependent_views=tuple(sorted(views[oid])),
                # -1: never vacuumed or analyzed, so PostgreSQL does not know either.
                row_estimate=round(reltuples) if reltuples >= 0 else None,
                identity=f"oid:{oid}",
            )
        )
    return observations


def observe_targets(
    conn: psycopg.Connection[Any], tables: Sequence[tuple[str, str]]
) -> list[TargetObservation]:
    """`inspect_postgres_targets` on a connection the caller owns (and in its transaction)."""
    return _inspect(conn, tables)
