"""Names with spaces, quotes, upper case and non-ASCII characters, for schema, table, columns and key."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from hakiri.spec.load import LoadMode
from tests.integration.destinations.load.support import (
    columns_of,
    destination,
    no_checkpoint,
    primary_key_of,
    request,
    rows_of,
    stage_rows,
    tables_in,
)

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL, over rows staged by SQL")

KEY = 'Id "x"'
NAME = "Nämé Ünïcode"
PRICE = "Price €"
TABLE = 'Order Items "2024" Ü'


@pytest.fixture
def odd_schema(pg_conn: psycopg.Connection, pg_schema: str) -> Iterator[str]:
    name = f'Sales "EU" ü {pg_schema}'
    pg_conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        pg_conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def test_odd_names_load_through_upsert_and_blue_green(
    pg_url: str, pg_conn: psycopg.Connection, odd_schema: str
) -> None:
    columns = [(KEY, "bigint"), (NAME, "text"), (PRICE, "integer")]
    dest = destination(pg_url, odd_schema)

    first = stage_rows(pg_conn, odd_schema, columns, [(1, "a", 10), (2, "", 20)])
    result = dest.commit(
        first, request(odd_schema, TABLE, LoadMode.UPSERT, upsert_key=[KEY]), no_checkpoint
    )
    assert result.created_target
    assert columns_of(pg_url, odd_schema, TABLE) == [
        (KEY, "bigint", False),
        (NAME, "text", True),
        (PRICE, "integer", True),
    ]
    assert primary_key_of(pg_url, odd_schema, TABLE) == (KEY,)

    second = stage_rows(pg_conn, odd_schema, columns, [(2, "b", 21), (3, "c", 30)], batch="batch-2")
    dest.commit(
        second,
        request(odd_schema, TABLE, LoadMode.UPSERT, upsert_key=[KEY], batch="batch-2"),
        no_checkpoint,
    )
    assert rows_of(pg_conn, odd_schema, TABLE) == [(1, "a", 10), (2, "b", 21), (3, "c", 30)]

    view = 'Öffentliche "Sicht"'
    pg_conn.execute(
        sql.SQL("CREATE VIEW {} AS SELECT {} FROM {}").format(
            sql.Identifier(odd_schema, view),
            sql.Identifier(NAME),
            sql.Identifier(odd_schema, TABLE),
        )
    )
    third = stage_rows(pg_conn, odd_schema, columns, [(9, "z", 90)], batch="batch-3")
    dest.commit(
        third, request(odd_schema, TABLE, LoadMode.BLUE_GREEN, batch="batch-3"), no_checkpoint
    )

    assert rows_of(pg_conn, odd_schema, TABLE) == [(9, "z", 90)]
    assert rows_of(pg_conn, odd_schema, view) == [("z",)]
    assert primary_key_of(pg_url, odd_schema, TABLE) == (KEY,)
    assert tables_in(pg_conn, odd_schema) == [TABLE]


def test_a_long_non_ascii_target_gets_a_short_enough_new_table(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    table = "Ä" * 31  # 62 bytes: `<t>_new` would be 66
    dest = destination(pg_url, pg_schema)
    dest.commit(
        stage_rows(pg_conn, pg_schema, [("v", "text")], [("a",)]),
        request(pg_schema, table, LoadMode.BLUE_GREEN),
        no_checkpoint,
    )

    dest.commit(
        stage_rows(pg_conn, pg_schema, [("v", "text")], [("b",)], batch="batch-2"),
        request(pg_schema, table, LoadMode.BLUE_GREEN, batch="batch-2"),
        no_checkpoint,
    )

    assert rows_of(pg_conn, pg_schema, table) == [("b",)]
    assert tables_in(pg_conn, pg_schema) == [table]
