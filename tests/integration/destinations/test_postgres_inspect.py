"""PostgreSQL targets seen by `plan`, against the suite's real server."""

from __future__ import annotations

import socket

import psycopg
import pytest
from psycopg import sql

from hakiri import pgpool
from hakiri.destinations.base import TargetColumn
from hakiri.destinations.postgres import inspect_postgres_target, inspect_postgres_targets
from hakiri.errors import DestinationUnreachable

pytestmark = pytest.mark.engine_free("PostgreSQL's catalog, read by SQL")


def _create(conn: psycopg.Connection, schema: str, table: str, body: str) -> sql.Composed:
    name = sql.Identifier(schema, table)
    conn.execute(sql.SQL("CREATE TABLE {} (" + body + ")").format(name))
    return name


def test_a_missing_table_and_a_missing_schema_do_not_exist(pg_url: str, pg_schema: str) -> None:
    missing, no_schema = inspect_postgres_targets(
        pg_url, [(pg_schema, "orders"), ("no_such_schema", "orders")]
    )

    assert (missing.exists, missing.schema, missing.table) == (False, pg_schema, "orders")
    assert missing.columns == () and missing.row_estimate is None
    assert no_schema.exists is False and no_schema.schema == "no_such_schema"


def test_columns_types_and_nullability_in_table_order(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    name = _create(
        pg_conn,
        pg_schema,
        "orders",
        "id bigint NOT NULL, dropped text, code varchar(20), amount numeric(12,2) NOT NULL,"
        " at timestamptz, local_at timestamp, payload jsonb, tags text[]",
    )
    pg_conn.execute(sql.SQL("ALTER TABLE {} DROP COLUMN dropped").format(name))

    seen = inspect_postgres_target(pg_url, pg_schema, "orders")

    assert seen.exists is True
    assert seen.columns == (
        TargetColumn("id", "bigint", nullable=False),
        TargetColumn("code", "character varying(20)", nullable=True),
        TargetColumn("amount", "numeric(12,2)", nullable=False),
        TargetColumn("at", "timestamp with time zone", nullable=True),
        TargetColumn("local_at", "timestamp without time zone", nullable=True),
        TargetColumn("payload", "jsonb", nullable=True),
        TargetColumn("tags", "text[]", nullable=True),
    )
    assert seen.primary_key == () and seen.dependent_views == ()


def test_a_composite_primary_key_is_reported_in_key_order(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    _create(pg_conn, pg_schema, "lines", "a int, b int, c int, PRIMARY KEY (c, a)")

    assert inspect_postgres_target(pg_url, pg_schema, "lines").primary_key == ("c", "a")


def test_views_and_materialized_views_reading_the_table_are_listed(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    orders = _create(pg_conn, pg_schema, "orders", "id bigint, amount numeric")
    _create(pg_conn, pg_schema, "other", "id bigint")

    def view(kind: str, name: str, query: str) -> None:
        pg_conn.execute(
            sql.SQL("CREATE " + kind + " {view} AS " + query).format(
                view=sql.Identifier(pg_schema, name), t=orders
            )
        )

    view("VIEW", "v_totals", "SELECT sum(amount) FROM {t}")
    view("MATERIALIZED VIEW", "m_daily", "SELECT id FROM {t}")
    view("VIEW", "a_self_join", "SELECT a.id FROM {t} a JOIN {t} b USING (id)")
    # A view of a view reads the table only indirectly: dropping the view would not touch it.
    pg_conn.execute(
        sql.SQL("CREATE VIEW {} AS SELECT * FROM {}").format(
            sql.Identifier(pg_schema, "v_of_v"), sql.Identifier(pg_schema, "v_totals")
        )
    )

    seen = inspect_postgres_target(pg_url, pg_schema, "orders")

    assert seen.dependent_views == (
        f"{pg_schema}.a_self_join",
        f"{pg_schema}.m_daily",
        f"{pg_schema}.v_totals",
    )
    assert inspect_postgres_target(pg_url, pg_schema, "other").dependent_views == ()


def test_quoted_upper_case_and_non_ascii_names(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    table = 'Order Lines "x"'
    name = _create(
        pg_conn,
        pg_schema,
        table,
        '"Prix €" numeric(12,2) NOT NULL, "Qty" int, "ligne n°" int, PRIMARY KEY ("ligne n°", "Prix €")',
    )
    pg_conn.execute(
        sql.SQL('CREATE VIEW {} AS SELECT "Prix €" FROM {}').format(
            sql.Identifier(pg_schema, 'Vue "été"'), name
        )
    )
    # The folded spelling is a different table and must not be confused with it.
    _create(pg_conn, pg_schema, 'order lines "x"', "other int")

    seen = inspect_postgres_target(pg_url, pg_schema, table)

    assert seen.exists is True and seen.table == table
    assert seen.column_names == ["Prix €", "Qty", "ligne n°"]
    assert seen.columns[0] == TargetColumn("Prix €", "numeric(12,2)", nullable=False)
    assert seen.primary_key == ("ligne n°", "Prix €")
    assert seen.dependent_views == (f'{pg_schema}.Vue "été"',)
    assert inspect_postgres_target(pg_url, pg_schema, 'ORDER LINES "X"').exists is False


def test_row_estimate_comes_from_statistics(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    name = _create(pg_conn, pg_schema, "orders", "id bigint")
    pg_conn.execute(sql.SQL("INSERT INTO {} SELECT generate_series(1, 1234)").format(name))

    before = inspect_postgres_target(pg_url, pg_schema, "orders").row_estimate
    pg_conn.execute(sql.SQL("ANALYZE {}").format(name))
    after = inspect_postgres_target(pg_url, pg_schema, "orders").row_estimate

    # Never analyzed: PostgreSQL 14+ says "unknown" (-1); autovacuum may have been quicker.
    assert before in (None, 1234) if pg_conn.info.server_version >= 140000 else True
    assert after == 1234


def test_many_targets_come_back_in_the_order_asked(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    _create(pg_conn, pg_schema, "a", "id int PRIMARY KEY")
    _create(pg_conn, pg_schema, "b", "x text, y text")

    seen = inspect_postgres_targets(
        pg_url, [(pg_schema, "b"), (pg_schema, "nope"), (pg_schema, "a"), (pg_schema, "b")]
    )

    assert [(s.table, s.exists) for s in seen] == [
        ("b", True),
        ("nope", False),
        ("a", True),
        ("b", True),
    ]
    assert [s.column_names for s in seen] == [["x", "y"], [], ["id"], ["x", "y"]]
    assert seen[2].primary_key == ("id",)
    assert inspect_postgres_targets(pg_url, []) == []


def test_inspection_is_read_only_and_closes_its_connection(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _create(pg_conn, pg_schema, "orders", "id int")
    opened: list[psycopg.Connection] = []
    connect = pgpool.connect  # every PostgreSQL connection of hakiri's comes from here

    def recording_connect(*args: object, **kwargs: object) -> psycopg.Connection:
        conn = connect(*args, **kwargs)  # type: ignore[arg-type]
        opened.append(conn)
        return conn

    monkeypatch.setattr(pgpool, "connect", recording_connect)

    inspect_postgres_targets(pg_url, [(pg_schema, "orders"), (pg_schema, "other")])

    [conn] = opened
    assert conn.read_only is True
    assert conn.closed


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.mark.parametrize("form", ["url", "keywords"])
def test_an_unreachable_server_is_one_line_without_the_password(form: str) -> None:
    port = _free_port()  # nothing listens on it once the probe socket is closed
    url = (
        f"postgresql://loader:s3cr3t-pw@127.0.0.1:{port}/warehouse"
        if form == "url"
        else f"host=127.0.0.1 port={port} dbname=warehouse user=loader password=s3cr3t-pw"
    )

    with pytest.raises(DestinationUnreachable) as caught:
        inspect_postgres_targets(url, [("public", "orders")])

    reason = caught.value.reason
    assert "s3cr3t-pw" not in reason and "s3cr3t-pw" not in str(caught.value)
    assert "\n" not in reason
    assert reason.startswith("cannot connect to PostgreSQL at ")
    assert "***" in reason and "Connection refused" in reason
    assert caught.value.hint == "check the connection's url/host and that the server is up"
