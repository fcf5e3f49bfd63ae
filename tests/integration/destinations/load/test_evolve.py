"""Schema evolution on a live target: the columns it reports, and changes applied whole or not at all."""

from __future__ import annotations

import psycopg
import pytest
from psycopg import sql

from hakiri.destinations.base import ColumnRetype, SchemaChange, TargetColumn
from hakiri.errors import LoadError
from tests.integration.destinations.load.support import (
    columns_of,
    create_table,
    destination,
    insert,
    request,
    rows_of,
)

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL, over rows staged by SQL")


def test_target_columns_of_a_missing_table_is_none(pg_url: str, pg_schema: str) -> None:
    assert destination(pg_url, pg_schema).target_columns(request(pg_schema, "nope")) is None


def test_target_columns_are_spelled_as_format_type_spells_them(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(
        pg_conn,
        pg_schema,
        "t",
        "id int NOT NULL, name varchar(20), at timestamp, price numeric(12,2), score float8",
    )

    found = destination(pg_url, pg_schema).target_columns(request(pg_schema, "t"))

    assert found == (
        TargetColumn("id", "integer", False),
        TargetColumn("name", "character varying(20)", True),
        TargetColumn("at", "timestamp without time zone", True),
        TargetColumn("price", "numeric(12,2)", True),
        TargetColumn("score", "double precision", True),
    )


def test_an_added_column_is_null_in_existing_rows(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer")
    insert(pg_conn, pg_schema, "t", [(1,), (2,)])

    destination(pg_url, pg_schema).evolve(
        request(pg_schema, "t"),
        SchemaChange(add=(TargetColumn("note", "text"), TargetColumn("n", "bigint", False))),
    )

    assert columns_of(pg_url, pg_schema, "t") == [
        ("id", "integer", True),
        ("note", "text", True),
        ("n", "bigint", True),  # nullable whatever was asked: existing rows have no value
    ]
    assert rows_of(pg_conn, pg_schema, "t") == [(1, None, None), (2, None, None)]


@pytest.mark.parametrize(
    ("old", "new", "value"),
    [
        ("integer", "bigint", 2_000_000_000),
        ("character varying(10)", "text", "ten chars!"),
        ("real", "double precision", 1.5),
        ("date", "timestamp without time zone", "2024-02-29"),
    ],
    ids=["int-bigint", "varchar-text", "real-double", "date-timestamp"],
)
def test_widening_keeps_the_values(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str, old: str, new: str, value: object
) -> None:
    create_table(pg_conn, pg_schema, "t", f"id integer, v {old}")
    insert(pg_conn, pg_schema, "t", [(1, value), (2, None)])
    before = pg_conn.execute(
        sql.SQL("SELECT v::text FROM {} WHERE id = 1").format(sql.Identifier(pg_schema, "t"))
    ).fetchone()

    destination(pg_url, pg_schema).evolve(
        request(pg_schema, "t"), SchemaChange(widen=(ColumnRetype("v", old, new),))
    )

    assert columns_of(pg_url, pg_schema, "t")[1] == ("v", new, True)
    after = pg_conn.execute(
        sql.SQL("SELECT v::text FROM {} WHERE id = 1").format(sql.Identifier(pg_schema, "t"))
    ).fetchone()
    assert before is not None and after is not None
    if new.startswith("timestamp"):
        assert after[0] == f"{before[0]} 00:00:00"
    else:
        assert after == before


def test_a_rename_keeps_the_values_and_is_skipped_once_done(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, nm text")
    insert(pg_conn, pg_schema, "t", [(1, "a")])
    dest = destination(pg_url, pg_schema)
    change = SchemaChange(rename=(("nm", "name"),), add=(TargetColumn("extra", "text"),))

    dest.evolve(request(pg_schema, "t"), change)
    dest.evolve(request(pg_schema, "t"), change)  # another process got there first: nothing to do

    assert [c[0] for c in columns_of(pg_url, pg_schema, "t")] == ["id", "name", "extra"]
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a", None)]


def test_a_retype_converts_the_values(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, code text")
    insert(pg_conn, pg_schema, "t", [(1, "42"), (2, " 7 "), (3, None)])

    destination(pg_url, pg_schema).evolve(
        request(pg_schema, "t"), SchemaChange(retype=(ColumnRetype("code", "text", "integer"),))
    )

    assert columns_of(pg_url, pg_schema, "t")[1] == ("code", "integer", True)
    assert rows_of(pg_conn, pg_schema, "t") == [(1, 42), (2, 7), (3, None)]


def test_a_value_that_cannot_convert_fails_the_whole_change(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, old_name text, small integer, code text")
    insert(pg_conn, pg_schema, "t", [(1, "x", 5, "42"), (2, "y", 6, "abc")])
    before = columns_of(pg_url, pg_schema, "t")
    change = SchemaChange(
        rename=(("old_name", "new_name"),),
        add=(TargetColumn("extra", "text"),),
        widen=(ColumnRetype("small", "integer", "bigint"),),
        retype=(ColumnRetype("code", "text", "integer"),),
    )

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).evolve(request(pg_schema, "t"), change)

    reason = caught.value.reason
    assert "\n" not in reason
    assert f'column "code" of {pg_schema}.t from text to integer' in reason
    assert 'invalid input syntax for type integer: "abc"' in reason
    assert '"code"' in (caught.value.hint or "")
    assert columns_of(pg_url, pg_schema, "t") == before  # no rename, no add, no widen either
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "x", 5, "42"), (2, "y", 6, "abc")]


def test_a_retype_without_a_cast_says_so(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, d date")

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).evolve(
            request(pg_schema, "t"), SchemaChange(retype=(ColumnRetype("d", "date", "integer"),))
        )

    assert "cannot cast type date to integer" in caught.value.reason
    assert "no cast from date to integer" in (caught.value.hint or "")
    assert columns_of(pg_url, pg_schema, "t")[1] == ("d", "date", True)


def test_a_view_on_the_column_blocks_a_widen_with_a_clear_error(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, amount integer")
    pg_conn.execute(
        sql.SQL("CREATE VIEW {} AS SELECT amount FROM {}").format(
            sql.Identifier(pg_schema, "Big Amounts"), sql.Identifier(pg_schema, "t")
        )
    )
    change = SchemaChange(
        add=(TargetColumn("extra", "text"),),
        widen=(ColumnRetype("amount", "integer", "bigint"),),
    )

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).evolve(request(pg_schema, "t"), change)

    reason, hint = caught.value.reason, caught.value.hint or ""
    assert "\n" not in reason
    assert f'column "amount" of {pg_schema}.t' in reason
    assert f"read by {pg_schema}.Big Amounts" in reason
    assert f"drop {pg_schema}.Big Amounts" in hint and "re-create" in hint
    assert [c[0] for c in columns_of(pg_url, pg_schema, "t")] == ["id", "amount"]


def test_odd_identifiers_evolve(pg_url: str, pg_conn: psycopg.Connection, pg_schema: str) -> None:
    table = 'Order Items "2024"'
    create_table(pg_conn, pg_schema, table, '"Id ""x""" integer, "Old Name" text, "Qty" smallint')
    insert(pg_conn, pg_schema, table, [(1, "a", 3)])

    destination(pg_url, pg_schema).evolve(
        request(pg_schema, table),
        SchemaChange(
            rename=(("Old Name", 'New "Name"'),),
            add=(TargetColumn("Price €", "numeric(12,2)"),),
            widen=(ColumnRetype("Qty", "smallint", "integer"),),
            retype=(ColumnRetype('Id "x"', "integer", "text"),),
        ),
    )

    assert columns_of(pg_url, pg_schema, table) == [
        ('Id "x"', "text", True),
        ('New "Name"', "text", True),
        ("Qty", "integer", True),
        ("Price €", "numeric(12,2)", True),
    ]
    assert rows_of(pg_conn, pg_schema, table) == [("1", "a", 3, None)]


def test_adding_a_column_that_already_exists_with_that_type_is_skipped(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, name character varying(20), n bigint")
    insert(pg_conn, pg_schema, "t", [(1, "a", 5)])

    destination(pg_url, pg_schema).evolve(
        request(pg_schema, "t"),
        SchemaChange(
            add=(TargetColumn("name", "varchar(20)"), TargetColumn("extra", "text")),
            widen=(ColumnRetype("n", "integer", "bigint"),),  # widened already
        ),
    )

    assert columns_of(pg_url, pg_schema, "t") == [
        ("id", "integer", True),
        ("name", "character varying(20)", True),
        ("n", "bigint", True),
        ("extra", "text", True),
    ]
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a", 5, None)]


def test_adding_a_column_that_exists_with_another_type_fails(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer, name varchar(20)")

    with pytest.raises(
        LoadError, match=r'cannot add column "name" text .* as character varying\(20\)'
    ):
        destination(pg_url, pg_schema).evolve(
            request(pg_schema, "t"),
            SchemaChange(add=(TargetColumn("extra", "text"), TargetColumn("name", "text"))),
        )

    assert [c[0] for c in columns_of(pg_url, pg_schema, "t")] == ["id", "name"]


def test_evolving_a_missing_target_says_so(pg_url: str, pg_schema: str) -> None:
    with pytest.raises(LoadError, match="does not exist"):
        destination(pg_url, pg_schema).evolve(
            request(pg_schema, "nope"), SchemaChange(add=(TargetColumn("x", "text"),))
        )


def test_a_busy_target_times_out_and_is_left_alone(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer")
    with psycopg.connect(pg_url) as holder:
        holder.execute(sql.SQL("LOCK TABLE {}").format(sql.Identifier(pg_schema, "t")))
        with pytest.raises(LoadError, match=r"busy.*gave up after 2 attempts"):
            destination(pg_url, pg_schema, commit_attempts=2).evolve(
                request(pg_schema, "t"), SchemaChange(add=(TargetColumn("x", "text"),))
            )
        holder.rollback()

    assert [c[0] for c in columns_of(pg_url, pg_schema, "t")] == ["id"]
