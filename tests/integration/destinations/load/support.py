"""Helpers for the PostgreSQL load tests: hand-made staging tables, requests, and looks at the result.

Most tests need no JVM: a staging table is plain SQL plus a `StagedBatch` that
describes it, exactly what `PostgresDestination.stage` would have produced.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from typing import Any

import psycopg
from psycopg import sql

from hakiri.destinations.base import LoadRequest, StagedBatch, TargetColumn
from hakiri.destinations.postgres import PostgresDestination
from hakiri.destinations.postgres.inspect import inspect_postgres_target
from hakiri.destinations.postgres.staging import STAGING_PREFIX
from hakiri.spec.load import LoadMode, LoadSpec

PROJECT = "shop"


def pipeline_of(schema: str) -> str:
    """Each test has its own schema, hence its own pipeline id: the shared ledger never mixes tests."""
    return f"pipe_{schema}"


def destination(url: str, schema: str, **options: Any) -> PostgresDestination:
    # Short lock waits keep the lock tests quick; everything else uses the defaults.
    options.setdefault("lock_timeout", "300ms")
    options.setdefault("retry_backoff_seconds", 0.05)
    return PostgresDestination(url, schema, **options)


def request(
    schema: str,
    table: str,
    mode: str | LoadMode = LoadMode.APPEND,
    *,
    batch: str = "batch-1",
    run: str = "run-1",
    post_hook: Any = None,
    **load: Any,
) -> LoadRequest:
    return LoadRequest(
        project=PROJECT,
        pipeline_id=pipeline_of(schema),
        run_id=run,
        batch_id=batch,
        target_schema=schema,
        target_table=table,
        load=LoadSpec(mode=LoadMode(mode), **load),
        post_hook=post_hook,
    )


def stage_rows(
    conn: psycopg.Connection,
    schema: str,
    columns: Sequence[tuple[str, str]],
    rows: Sequence[Sequence[Any]],
    *,
    batch: str = "batch-1",
) -> StagedBatch:
    """A staging table made with SQL, filled with `rows`; what `stage()` would return for it."""
    name = STAGING_PREFIX + uuid.uuid4().hex[:16]
    table = sql.Identifier(schema, name)
    conn.execute(
        sql.SQL("CREATE UNLOGGED TABLE {} ({})").format(
            table,
            sql.SQL(", ").join(
                sql.SQL("{} {}").format(sql.Identifier(c), sql.SQL(t)) for c, t in columns
            ),
        )
    )
    if rows:
        insert = sql.SQL("INSERT INTO {} VALUES ({})").format(
            table, sql.SQL(", ").join(sql.Placeholder() * len(columns))
        )
        with conn.cursor() as cur:
            cur.executemany(insert, [tuple(r) for r in rows])
    return StagedBatch(
        batch_id=batch,
        staging_schema=schema,
        staging_table=name,
        rows=len(rows),
        columns=tuple(TargetColumn(c, t) for c, t in columns),
    )


def create_table(conn: psycopg.Connection, schema: str, table: str, body: str) -> sql.Composed:
    """CREATE TABLE schema.table (<body>); `body` is fixed test DDL, names are quoted."""
    name = sql.Identifier(schema, table)
    conn.execute(sql.SQL("CREATE TABLE {} (" + body + ")").format(name))
    return name


def insert(
    conn: psycopg.Connection, schema: str, table: str, rows: Sequence[Sequence[Any]]
) -> None:
    if not rows:
        return
    with conn.cursor() as cur:
        cur.executemany(
            sql.SQL("INSERT INTO {} VALUES ({})").format(
                sql.Identifier(schema, table), sql.SQL(", ").join(sql.Placeholder() * len(rows[0]))
            ),
            [tuple(r) for r in rows],
        )


def rows_of(conn: psycopg.Connection, schema: str, table: str) -> list[tuple[Any, ...]]:
    """Every row, sorted (as text) so tests do not depend on physical order."""
    found = conn.execute(
        sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table))
    ).fetchall()
    return sorted(found, key=lambda r: tuple("" if v is None else str(v) for v in r))


def columns_of(url: str, schema: str, table: str) -> list[tuple[str, str, bool]]:
    seen = inspect_postgres_target(url, schema, table)
    return [(c.name, c.type, c.nullable) for c in seen.columns]


def primary_key_of(url: str, schema: str, table: str) -> tuple[str, ...]:
    return inspect_postgres_target(url, schema, table).primary_key


def exists(conn: psycopg.Connection, schema: str, table: str) -> bool:
    row = conn.execute(
        "SELECT 1 FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
        " WHERE n.nspname = %s AND c.relname = %s",
        (schema, table),
    ).fetchone()
    return row is not None


def tables_in(conn: psycopg.Connection, schema: str) -> list[str]:
    return [
        r[0]
        for r in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind = 'r' ORDER BY 1",
            (schema,),
        )
    ]


def ledger_batches(conn: psycopg.Connection, schema: str) -> list[tuple[str, int]]:
    if not exists(conn, "_hakiri", "load_ledger"):
        return []
    return [
        (r[0], r[1])
        for r in conn.execute(
            "SELECT batch_id, rows FROM _hakiri.load_ledger WHERE project = %s AND pipeline_id = %s"
            " ORDER BY 1",
            (PROJECT, pipeline_of(schema)),
        )
    ]


def no_checkpoint(name: str) -> None:
    del name


@contextmanager
def temp_role(conn: psycopg.Connection, *, login: bool = False) -> Iterator[str]:
    """A role of its own for one test (roles are cluster-wide), dropped with what it owns afterwards."""
    name = f"r_{uuid.uuid4().hex[:10]}"
    conn.execute(
        sql.SQL("CREATE ROLE {} {}").format(
            sql.Identifier(name), sql.SQL("LOGIN") if login else sql.SQL("NOLOGIN")
        )
    )
    try:
        yield name
    finally:
        conn.execute(sql.SQL("DROP OWNED BY {} CASCADE").format(sql.Identifier(name)))
        conn.execute(sql.SQL("DROP ROLE {}").format(sql.Identifier(name)))


def url_as(url: str, user: str) -> str:
    """The same server and database, as another user (the suite's server trusts loopback)."""
    scheme, _, rest = url.partition("://")
    _, _, hostpart = rest.rpartition("@")
    return f"{scheme}://{user}@{hostpart}"
