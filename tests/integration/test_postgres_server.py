"""The suite's own PostgreSQL really runs and behaves like the servers we load into."""

from __future__ import annotations

import re

import psycopg
from psycopg import sql


def test_server_is_a_supported_postgresql(pg_conn: psycopg.Connection) -> None:
    row = pg_conn.execute("SHOW server_version").fetchone()
    assert row is not None

    match = re.match(r"(\d+)", row[0])
    assert match, row[0]
    assert int(match.group(1)) >= 13


def test_quoted_mixed_case_table_round_trip(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    table = sql.Identifier(pg_schema, "Orders Läuft")
    pg_conn.execute(
        sql.SQL(
            'CREATE TABLE {} ("OrderId" bigint PRIMARY KEY, "Customer Name" text NOT NULL)'
        ).format(table)
    )
    rows = [(1, "Ada"), (2, "Grace Hopper"), (3, "Zoë 'quoted' \"name\"")]
    with pg_conn.cursor() as cur:
        cur.executemany(
            sql.SQL('INSERT INTO {} ("OrderId", "Customer Name") VALUES (%s, %s)').format(table),
            rows,
        )

    got = pg_conn.execute(
        sql.SQL('SELECT "OrderId", "Customer Name" FROM {} ORDER BY 1').format(table)
    ).fetchall()

    assert got == rows
    # The name kept its case: the unquoted (folded) spelling does not exist.
    exists = pg_conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s AND table_name = %s",
        (pg_schema, "orders läuft"),
    ).fetchone()
    assert exists == (0,)


def test_each_test_gets_its_own_empty_schema(pg_conn: psycopg.Connection, pg_schema: str) -> None:
    count = pg_conn.execute(
        "SELECT count(*) FROM information_schema.tables WHERE table_schema = %s", (pg_schema,)
    ).fetchone()

    assert count == (0,)
