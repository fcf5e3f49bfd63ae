"""blue_green: the swap keeps views, grants, comments and foreign keys, and is all-or-nothing."""

from __future__ import annotations

import threading
from typing import Any

import psycopg
import pytest
from psycopg import sql

from hakiri.errors import LoadError
from hakiri.spec.load import LoadMode
from tests.integration.destinations.load.support import (
    create_table,
    destination,
    exists,
    insert,
    ledger_batches,
    no_checkpoint,
    request,
    rows_of,
    stage_rows,
    tables_in,
    temp_role,
)

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL, over rows staged by SQL")

COLUMNS = [("id", "bigint"), ("name", "text")]


def _target_with_dependents(conn: psycopg.Connection, schema: str, role: str) -> None:
    """customers(id serial PK, name) with a view, a grant, a comment, an index and an FK from orders."""
    create_table(conn, schema, "customers", "id serial PRIMARY KEY, name text NOT NULL, tier text")
    conn.execute(
        sql.SQL("CREATE INDEX customers_by_name ON {} (name)").format(
            sql.Identifier(schema, "customers")
        )
    )
    insert(conn, schema, "customers", [(1, "ann", "gold"), (2, "bob", None)])
    conn.execute(
        sql.SQL(
            "CREATE VIEW {} WITH (security_barrier) AS SELECT id, upper(name) AS shout FROM {}"
        ).format(sql.Identifier(schema, "customer_names"), sql.Identifier(schema, "customers"))
    )
    conn.execute(
        sql.SQL("GRANT SELECT, UPDATE ON {} TO {}").format(
            sql.Identifier(schema, "customers"), sql.Identifier(role)
        )
    )
    conn.execute(
        sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
            sql.Identifier(schema), sql.Identifier(role)
        )
    )
    conn.execute(
        sql.SQL("COMMENT ON TABLE {} IS 'one row per customer'").format(
            sql.Identifier(schema, "customers")
        )
    )
    create_table(
        conn,
        schema,
        "orders",
        f'id bigint PRIMARY KEY, customer_id integer CONSTRAINT orders_customer_fk REFERENCES "{schema}".customers (id)',
    )
    insert(conn, schema, "orders", [(100, 1)])


def _privilege(conn: psycopg.Connection, role: str, schema: str, table: str, what: str) -> bool:
    row = conn.execute(
        "SELECT has_table_privilege(%s, %s, %s)",
        (role, sql.Identifier(schema, table).as_string(conn), what),
    ).fetchone()
    return bool(row and row[0])


def test_blue_green_swaps_in_the_new_rows_and_keeps_what_depends_on_the_table(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    with temp_role(pg_conn) as role:
        _target_with_dependents(pg_conn, pg_schema, role)
        staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "ann"), (3, "cy")])
        hooked: list[Any] = []

        def post_hook(conn: psycopg.Connection) -> None:
            # Runs inside the swap transaction, before the rename: it sees `_new` loaded.
            hooked.append(conn.execute(
                sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(pg_schema, "customers_new"))
            ).fetchone())  # fmt: skip

        result = destination(pg_url, pg_schema).commit(
            staged,
            request(pg_schema, "customers", LoadMode.BLUE_GREEN, post_hook=post_hook),
            no_checkpoint,
        )

        assert result.rows_loaded == 2 and hooked == [(2,)]
        assert rows_of(pg_conn, pg_schema, "customers") == [(1, "ann", None), (3, "cy", None)]
        # the view reads the new table
        shout = pg_conn.execute(
            sql.SQL("SELECT shout FROM {} ORDER BY id").format(
                sql.Identifier(pg_schema, "customer_names")
            )
        ).fetchall()
        assert shout == [("ANN",), ("CY",)]
        options = pg_conn.execute(
            "SELECT reloptions FROM pg_class WHERE oid = %s::regclass",
            (sql.Identifier(pg_schema, "customer_names").as_string(pg_conn),),
        ).fetchone()
        assert options == (["security_barrier=true"],)
        # grants, comment
        assert _privilege(pg_conn, role, pg_schema, "customers", "SELECT")
        assert _privilege(pg_conn, role, pg_schema, "customers", "UPDATE")
        assert not _privilege(pg_conn, role, pg_schema, "customers", "DELETE")
        comment = pg_conn.execute(
            "SELECT obj_description(%s::regclass, 'pg_class')",
            (sql.Identifier(pg_schema, "customers").as_string(pg_conn),),
        ).fetchone()
        assert comment == ("one row per customer",)
        # the foreign key from orders now points at the new table, and still enforces
        fk = pg_conn.execute(
            "SELECT confrelid = %s::regclass FROM pg_constraint WHERE conname = 'orders_customer_fk'",
            (sql.Identifier(pg_schema, "customers").as_string(pg_conn),),
        ).fetchone()
        assert fk == (True,)
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            insert(pg_conn, pg_schema, "orders", [(101, 2)])  # bob is gone
        # index names as before, no leftovers, the serial column's sequence survived the swap
        indexes = pg_conn.execute(
            "SELECT indexname FROM pg_indexes WHERE schemaname = %s AND tablename = 'customers' ORDER BY 1",
            (pg_schema,),
        ).fetchall()
        assert indexes == [("customers_by_name",), ("customers_pkey",)]
        assert tables_in(pg_conn, pg_schema) == ["customers", "orders"]
        sequence = pg_conn.execute(
            "SELECT pg_get_serial_sequence(%s, 'id')",
            (sql.Identifier(pg_schema, "customers").as_string(pg_conn),),
        ).fetchone()
        assert sequence == (f"{pg_schema}.customers_id_seq",)
        assert ledger_batches(pg_conn, pg_schema) == [("batch-1", 2)]


def test_blue_green_leaves_the_original_untouched_when_loading_new_fails(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    with temp_role(pg_conn) as role:
        _target_with_dependents(pg_conn, pg_schema, role)
        before = rows_of(pg_conn, pg_schema, "customers")
        staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "ann"), (5, None)])  # NOT NULL name

        with pytest.raises(LoadError) as caught:
            destination(pg_url, pg_schema).commit(
                staged, request(pg_schema, "customers", LoadMode.BLUE_GREEN), no_checkpoint
            )

        assert "violated" in caught.value.reason and "\n" not in caught.value.reason
        assert rows_of(pg_conn, pg_schema, "customers") == before
        assert tables_in(pg_conn, pg_schema) == ["customers", "orders"]  # no _new, no staging
        assert _privilege(pg_conn, role, pg_schema, "customers", "SELECT")
        assert ledger_batches(pg_conn, pg_schema) == []


def test_blue_green_rolls_back_when_the_new_rows_break_a_foreign_key_that_references_the_table(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    with temp_role(pg_conn) as role:
        _target_with_dependents(pg_conn, pg_schema, role)
        staged = stage_rows(
            pg_conn, pg_schema, COLUMNS, [(2, "bob")]
        )  # orders still needs customer 1

        with pytest.raises(LoadError) as caught:
            destination(pg_url, pg_schema).commit(
                staged, request(pg_schema, "customers", LoadMode.BLUE_GREEN), no_checkpoint
            )

        assert "orders_customer_fk" in caught.value.reason
        assert rows_of(pg_conn, pg_schema, "customers") == [(1, "ann", "gold"), (2, "bob", None)]
        assert exists(pg_conn, pg_schema, "customer_names")


def test_blue_green_refuses_a_table_read_by_a_materialized_view(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    insert(pg_conn, pg_schema, "t", [(1, "a")])
    pg_conn.execute(
        sql.SQL("CREATE MATERIALIZED VIEW {} AS SELECT count(*) AS n FROM {}").format(
            sql.Identifier(pg_schema, "t_stats"), sql.Identifier(pg_schema, "t")
        )
    )
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(2, "b")])

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(
            staged, request(pg_schema, "t", LoadMode.BLUE_GREEN), no_checkpoint
        )

    assert f"materialized view(s) {pg_schema}.t_stats" in caught.value.reason
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a")]


def test_blue_green_creates_a_missing_target_directly(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "a")])

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "fresh", LoadMode.BLUE_GREEN), no_checkpoint
    )

    assert result.created_target and result.rows_loaded == 1
    assert tables_in(pg_conn, pg_schema) == ["fresh"]


def _hold_lock(url: str, schema: str, table: str) -> psycopg.Connection:
    """Another session reading the table in an open transaction (ACCESS SHARE until it ends)."""
    other = psycopg.connect(url)
    other.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(schema, table))).fetchall()
    return other


def test_a_busy_target_is_retried_then_reported_and_left_untouched(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    insert(pg_conn, pg_schema, "t", [(1, "a")])
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(2, "b")])
    reader = _hold_lock(pg_url, pg_schema, "t")
    try:
        with pytest.raises(LoadError) as caught:
            destination(pg_url, pg_schema, commit_attempts=2).commit(
                staged, request(pg_schema, "t", LoadMode.BLUE_GREEN), no_checkpoint
            )
    finally:
        reader.close()

    assert "busy" in caught.value.reason and "gave up after 2 attempts" in caught.value.reason
    assert "pg_stat_activity" in (caught.value.hint or "")
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a")]
    assert tables_in(pg_conn, pg_schema) == ["t"]


def test_a_lock_released_between_attempts_lets_the_retry_succeed(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    insert(pg_conn, pg_schema, "t", [(1, "a")])
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(2, "b")])
    reader = _hold_lock(pg_url, pg_schema, "t")
    release = threading.Timer(0.5, reader.close)
    release.start()
    try:
        result = destination(
            pg_url, pg_schema, commit_attempts=5, retry_backoff_seconds=0.2
        ).commit(staged, request(pg_schema, "t", LoadMode.BLUE_GREEN), no_checkpoint)
    finally:
        release.join()

    assert result.rows_loaded == 1
    assert rows_of(pg_conn, pg_schema, "t") == [(2, "b")]


def test_blue_green_keeps_triggers_column_grants_and_the_tables_own_foreign_keys(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    s = sql.Identifier(pg_schema)
    create_table(pg_conn, pg_schema, "regions", "code text PRIMARY KEY")
    insert(pg_conn, pg_schema, "regions", [("eu",), ("us",)])
    create_table(
        pg_conn,
        pg_schema,
        "t",
        f'id bigint PRIMARY KEY, region text REFERENCES "{pg_schema}".regions (code),'
        f' parent bigint CONSTRAINT t_parent_fk REFERENCES "{pg_schema}".t (id), name text',
    )
    pg_conn.execute(
        sql.SQL(
            "CREATE FUNCTION {}.shout() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN NEW.name := upper(NEW.name); RETURN NEW; END $$"
        ).format(s)
    )
    pg_conn.execute(
        sql.SQL(
            "CREATE TRIGGER t_shout BEFORE INSERT ON {} FOR EACH ROW EXECUTE FUNCTION {}.shout()"
        ).format(sql.Identifier(pg_schema, "t"), s)
    )
    with temp_role(pg_conn) as role:
        pg_conn.execute(
            sql.SQL("GRANT SELECT (id, name) ON {} TO {}").format(
                sql.Identifier(pg_schema, "t"), sql.Identifier(role)
            )
        )
        staged = stage_rows(
            pg_conn,
            pg_schema,
            [("id", "bigint"), ("region", "text"), ("parent", "bigint"), ("name", "text")],
            [(1, "eu", None, "a"), (2, "us", 1, "b")],
        )

        destination(pg_url, pg_schema).commit(
            staged, request(pg_schema, "t", LoadMode.BLUE_GREEN), no_checkpoint
        )

        # loaded before the trigger was re-created: the rows are as staged
        assert rows_of(pg_conn, pg_schema, "t") == [(1, "eu", None, "a"), (2, "us", 1, "b")]
        insert(pg_conn, pg_schema, "t", [(3, "eu", 2, "c")])
        assert (3, "eu", 2, "C") in rows_of(pg_conn, pg_schema, "t")  # the trigger fires again
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            insert(pg_conn, pg_schema, "t", [(4, "mars", None, "d")])
        with pytest.raises(psycopg.errors.ForeignKeyViolation):
            insert(pg_conn, pg_schema, "t", [(5, "eu", 99, "e")])
        granted = pg_conn.execute(
            "SELECT has_column_privilege(%s, %s, 'name', 'SELECT'),"
            " has_column_privilege(%s, %s, 'region', 'SELECT')",
            (role, f'"{pg_schema}".t', role, f'"{pg_schema}".t'),
        ).fetchone()
        assert granted == (True, False)


def test_blue_green_replaces_a_leftover_new_table_it_made_but_not_a_users(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    create_table(pg_conn, pg_schema, "t_new", "whatever integer")
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "a")])

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(
            staged, request(pg_schema, "t", LoadMode.BLUE_GREEN), no_checkpoint
        )
    assert "a table hakiri did not create has that name" in caught.value.reason

    pg_conn.execute(
        sql.SQL("COMMENT ON TABLE {} IS {}").format(
            sql.Identifier(pg_schema, "t_new"),
            sql.Literal('hakiri {"kind": "blue_green_new", "run": "crashed"}'),
        )
    )
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "a")])
    destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "t", LoadMode.BLUE_GREEN), no_checkpoint
    )
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a")]
    assert tables_in(pg_conn, pg_schema) == ["t"]
