"""PostgreSQL source tables seen by `plan`: columns and estimated rows, never a count."""

from __future__ import annotations

import datetime as dt
import socket

import psycopg
import pytest
from psycopg import sql

from hakiri.errors import SourceUnreachable
from hakiri.sources.base import SourceColumn
from hakiri.sources.postgres.inspect import (
    SourceTableRequest,
    inspect_postgres_table,
    inspect_postgres_tables,
)

ROWS = 10_000
START = dt.datetime(2026, 1, 1, tzinfo=dt.UTC)


@pytest.fixture
def events(pg_conn: psycopg.Connection, pg_schema: str) -> str:
    """10,000 analyzed rows: id 1..10000, one a minute from 2026-01-01 00:01 UTC."""
    name = sql.Identifier(pg_schema, "events")
    pg_conn.execute(
        sql.SQL(
            "CREATE TABLE {} (id bigint PRIMARY KEY, gone int, kind varchar(20), amount numeric(12,2),"
            " at timestamptz NOT NULL)"
        ).format(name)
    )
    pg_conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN gone").format(name))
    pg_conn.execute(
        sql.SQL(
            "INSERT INTO {} SELECT g, 'k' || g %% 7, g / 100.0, %s::timestamptz + g * interval '1 minute'"
            " FROM generate_series(1, %s) g"
        ).format(name),
        [START, ROWS],
    )
    pg_conn.execute(sql.SQL("ANALYZE {}").format(name))
    return "events"


def _within_estimate_band(estimate: int | None, truth: int) -> bool:
    return estimate is not None and truth * 0.5 <= estimate <= truth * 2


def test_columns_in_table_order_with_their_types(pg_url: str, pg_schema: str, events: str) -> None:
    seen = inspect_postgres_table(pg_url, pg_schema, events)

    assert seen.table == "events" and seen.files == () and seen.notes == ()
    assert seen.columns == (
        SourceColumn("id", "bigint"),
        SourceColumn("kind", "character varying(20)"),
        SourceColumn("amount", "numeric(12,2)"),
        SourceColumn("at", "timestamp with time zone"),
    )


def test_without_a_cursor_the_estimate_is_every_row(
    pg_url: str, pg_schema: str, events: str
) -> None:
    assert inspect_postgres_table(pg_url, pg_schema, events).estimated_rows == ROWS
    # A cursor column with no value yet: the first run reads everything.
    assert inspect_postgres_table(pg_url, pg_schema, events, "id", None).estimated_rows == ROWS


@pytest.mark.parametrize(
    ("column", "value"),
    [
        ("id", 7_000),
        ("id", "7000"),
        ("at", (START + dt.timedelta(minutes=7_000)).isoformat()),
        ("at", START + dt.timedelta(minutes=7_000)),
    ],
)
def test_rows_past_the_cursor_are_estimated(
    pg_url: str, pg_schema: str, events: str, column: str, value: object
) -> None:
    seen = inspect_postgres_table(pg_url, pg_schema, events, column, value)

    assert _within_estimate_band(seen.estimated_rows, ROWS - 7_000), seen.estimated_rows


def test_a_never_analyzed_table_falls_back_to_the_planner_guess(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    name = sql.Identifier(pg_schema, "fresh")
    pg_conn.execute(sql.SQL("CREATE TABLE {} (id bigint)").format(name))
    pg_conn.execute(sql.SQL("INSERT INTO {} SELECT generate_series(1, %s)").format(name), [ROWS])

    seen = inspect_postgres_table(pg_url, pg_schema, "fresh")

    assert _within_estimate_band(seen.estimated_rows, ROWS), seen.estimated_rows


def test_quoted_names_work_for_tables_and_cursor_columns(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    table = 'Order Lines "x"'
    name = sql.Identifier(pg_schema, table)
    pg_conn.execute(sql.SQL('CREATE TABLE {} ("Prix €" numeric(12,2), "N°" bigint)').format(name))
    pg_conn.execute(
        sql.SQL("INSERT INTO {} SELECT g, g FROM generate_series(1, 1000) g").format(name)
    )
    pg_conn.execute(sql.SQL("ANALYZE {}").format(name))

    seen = inspect_postgres_table(pg_url, pg_schema, table, "N°", 900)

    assert [c.name for c in seen.columns or ()] == ["Prix €", "N°"]
    assert _within_estimate_band(seen.estimated_rows, 100), seen.estimated_rows


def test_many_tables_over_one_connection(pg_url: str, pg_schema: str, events: str) -> None:
    seen = inspect_postgres_tables(
        pg_url,
        [SourceTableRequest(pg_schema, events), (pg_schema, events, "id", 9_000)],
    )

    assert seen[0].estimated_rows == ROWS
    assert _within_estimate_band(seen[1].estimated_rows, 1_000)


def test_a_missing_table_is_named_with_the_masked_url(pg_url: str, pg_schema: str) -> None:
    # Trust authentication ignores the password, so the URL still connects.
    url = pg_url.replace("postgres@", "postgres:s3cr3t-pw@")

    with pytest.raises(SourceUnreachable) as caught:
        inspect_postgres_table(url, pg_schema, "nope")

    reason = caught.value.reason
    assert (
        reason
        == f"source table {pg_schema}.nope does not exist ({url.replace('s3cr3t-pw', '***')})"
    )
    assert caught.value.hint


def test_a_missing_cursor_column_is_named(pg_url: str, pg_schema: str, events: str) -> None:
    with pytest.raises(
        SourceUnreachable,
        match=f"cursor column updated_at does not exist in source table {pg_schema}.events",
    ):
        inspect_postgres_table(pg_url, pg_schema, events, "updated_at", 1)


def test_a_cursor_value_of_the_wrong_type_is_one_line(
    pg_url: str, pg_schema: str, events: str
) -> None:
    with pytest.raises(SourceUnreachable) as caught:
        inspect_postgres_table(pg_url, pg_schema, events, "at", "not a time")

    assert caught.value.reason.startswith("cannot inspect source tables on PostgreSQL at ")
    assert "\n" not in caught.value.reason


def test_an_unreachable_server_is_one_line_without_the_password() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    url = f"postgresql://loader:s3cr3t-pw@127.0.0.1:{port}/warehouse"

    with pytest.raises(SourceUnreachable) as caught:
        inspect_postgres_table(url, "public", "orders")

    reason = caught.value.reason
    assert "s3cr3t-pw" not in reason and "\n" not in reason
    assert reason.startswith(
        f"cannot connect to PostgreSQL at postgresql://loader:***@127.0.0.1:{port}/warehouse: "
    )
    assert caught.value.hint


def test_every_engine_reads_each_column_type_back_exactly(
    spark, pg_conn: psycopg.Connection, pg_url: str, pg_schema: str
) -> None:
    """The table source's read (COPY in an engine task): each type as Spark's JDBC reader typed
    it, values exact, NULL apart from '', and partitions that cover every row once."""
    from decimal import Decimal

    from hakiri.sources.postgres.reader import PartitionSplit, read_table
    from hakiri.spec.pipeline import PostgresSourceConfig

    name = sql.Identifier(pg_schema, "kinds")
    pg_conn.execute(
        sql.SQL(
            "CREATE TABLE {} (id int, big bigint, amount numeric(12,2), ratio double precision,"
            " ok boolean, day date, at timestamptz, local timestamp, note text, raw bytea,"
            " tags text[], counts int[])"
        ).format(name)
    )
    pg_conn.execute(
        sql.SQL(
            "INSERT INTO {} VALUES"
            " (1, 9007199254740993, 12345678.90, 0.1, true, '0001-01-01',"
            "  '2024-03-04 05:06:07.891234+00', '2024-03-04 05:06:07', 'a,\"b\"\nc', '\\x00ff',"
            "  ARRAY['x', NULL], ARRAY[1, 2]),"
            " (2, NULL, NULL, 'NaN', NULL, NULL, NULL, NULL, '', NULL, NULL, NULL),"
            " (3, -1, -0.01, '-Infinity', false, '9999-12-31', '1970-01-01 00:00:00+00',"
            "  '1970-01-01 00:00:00', NULL, '\\x', ARRAY[]::text[], ARRAY[3])"
        ).format(name)
    )
    config = PostgresSourceConfig.model_validate({"connection": "wh", "schema": pg_schema})
    split = PartitionSplit("id", "1", "3", 2)
    frame = read_table(spark, pg_url, config, "kinds", None, split)

    assert dict(frame.dtypes) == {
        "id": "int",
        "big": "bigint",
        "amount": "decimal(12,2)",
        "ratio": "double",
        "ok": "boolean",
        "day": "date",
        "at": "timestamp",
        "local": "timestamp",
        "note": "string",
        "raw": "binary",
        "tags": "array<string>",
        "counts": "array<int>",
    }
    rows = {r["id"]: r for r in frame.collect()}  # three rows: a sample, not a dataset
    assert sorted(rows) == [1, 2, 3]
    one, two, three = rows[1], rows[2], rows[3]
    assert one["big"] == 9007199254740993 and one["amount"] == Decimal("12345678.90")
    assert one["ratio"] == 0.1 and one["ok"] is True and one["day"] == dt.date(1, 1, 1)
    assert one["at"].astimezone(dt.UTC) == dt.datetime(2024, 3, 4, 5, 6, 7, 891234, tzinfo=dt.UTC)
    assert one["note"] == 'a,"b"\nc' and bytes(one["raw"]) == b"\x00\xff"
    assert one["tags"] == ["x", None] and one["counts"] == [1, 2]
    assert two["big"] is None and two["amount"] is None and two["ratio"] != two["ratio"]
    assert two["note"] == "" and two["raw"] is None and two["tags"] is None
    assert three["ratio"] == float("-inf") and three["day"] == dt.date(9999, 12, 31)
    assert bytes(three["raw"]) == b"" and three["tags"] == [] and three["note"] is None


def test_a_count_within_its_budget_is_exact_and_a_slow_one_is_said_to_be_rough(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str, events: str
) -> None:
    seen = inspect_postgres_table(pg_url, pg_schema, events, "id", 9_000)
    assert (seen.estimated_rows, seen.estimate_source) == (ROWS - 9_000, "counted")
    # A relation whose count takes longer than plan's budget (200 ms): the planner's guess.
    slowly = sql.Identifier(pg_schema, "slowly")
    pg_conn.execute(
        sql.SQL(
            "CREATE FUNCTION {}(int) RETURNS int VOLATILE LANGUAGE sql AS "
            "'SELECT $1 FROM pg_sleep(0.05)'"
        ).format(slowly)
    )
    pg_conn.execute(
        sql.SQL(
            "CREATE VIEW {} AS SELECT g AS id FROM generate_series(1, 20) g WHERE {}(g) > 0"
        ).format(sql.Identifier(pg_schema, "slow"), slowly)
    )
    slow = inspect_postgres_table(pg_url, pg_schema, "slow")
    assert slow.estimate_source == "rough: PostgreSQL's planner statistics"
    assert slow.estimated_rows is not None
