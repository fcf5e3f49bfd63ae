"""Driver errors reach the user as one line that names the table, with a hint saying what to do."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import psycopg
import pytest
from psycopg import sql

from hakiri.destinations.postgres.ledger import ensure_ledger_tables
from hakiri.errors import DestinationUnreachable, LoadError
from hakiri.quality.rules import RuleCheck
from tests.integration.destinations.load.support import (
    create_table,
    destination,
    no_checkpoint,
    request,
    rows_of,
    stage_rows,
    temp_role,
    url_as,
)

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL and errors, over rows staged by SQL")


@pytest.mark.parametrize(
    ("target_type", "staged_type", "value", "expected"),
    [
        ("integer", "text", "12", ', column amount: column "amount" is of type integer'),
        ("smallint", "bigint", 100_000, ": smallint out of range"),
        ("varchar(3)", "text", "abcdef", ": value too long for type character varying(3)"),
        ("boolean", "integer", 1, ', column amount: column "amount" is of type boolean'),
    ],
    ids=["text-into-integer", "out-of-range", "too-long", "integer-into-boolean"],
)
def test_a_type_clash_names_the_table_and_column_in_one_line(
    pg_url: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    target_type: str,
    staged_type: str,
    value: Any,
    expected: str,
) -> None:
    create_table(pg_conn, pg_schema, "t", f"id integer, amount {target_type}")
    staged = stage_rows(
        pg_conn, pg_schema, [("id", "integer"), ("amount", staged_type)], [(1, value)]
    )

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(staged, request(pg_schema, "t"), no_checkpoint)

    reason = caught.value.reason
    assert reason.startswith(f"type clash loading {pg_schema}.t") and expected in reason
    assert "\n" not in reason
    assert "cast" in (caught.value.hint or "") and "transform" in (caught.value.hint or "")
    assert rows_of(pg_conn, pg_schema, "t") == []


def _ledger_for(pg_conn: psycopg.Connection, role: str) -> None:
    """The ledger exists and the role may write it: the load itself is what lacks permission."""
    with pg_conn.transaction():
        ensure_ledger_tables(pg_conn)
    pg_conn.execute(sql.SQL("GRANT USAGE ON SCHEMA _hakiri TO {}").format(sql.Identifier(role)))
    pg_conn.execute(
        sql.SQL("GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA _hakiri TO {}").format(
            sql.Identifier(role)
        )
    )


def test_no_permission_on_the_schema_says_which_grant_is_missing(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer")
    staged = stage_rows(pg_conn, pg_schema, [("id", "integer")], [(1,)])
    with temp_role(pg_conn, login=True) as role:
        _ledger_for(pg_conn, role)

        with pytest.raises(LoadError) as caught:
            destination(url_as(pg_url, role), pg_schema).commit(
                staged, request(pg_schema, "t"), no_checkpoint
            )

    assert caught.value.reason == f"no permission to load on schema {pg_schema} (role {role})"
    assert caught.value.hint == f'GRANT USAGE, CREATE ON SCHEMA "{pg_schema}" TO "{role}";'


def test_no_permission_on_the_table_says_which_grant_is_missing(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id integer")
    staged = stage_rows(pg_conn, pg_schema, [("id", "integer")], [(1,)])
    with temp_role(pg_conn, login=True) as role:
        _ledger_for(pg_conn, role)
        pg_conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(pg_schema), sql.Identifier(role)
            )
        )

        with pytest.raises(LoadError) as caught:
            destination(url_as(pg_url, role), pg_schema).commit(
                staged, request(pg_schema, "t"), no_checkpoint
            )

    assert caught.value.reason.startswith("no permission to load table")
    assert f"(role {role})" in caught.value.reason and "\n" not in caught.value.reason
    assert (caught.value.hint or "").startswith("GRANT SELECT, INSERT")


def test_an_unreachable_server_is_one_line_with_the_password_masked(pg_schema: str) -> None:
    url = "postgresql://loader:s3cret@127.0.0.1:1/nowhere"
    dest = destination(url, pg_schema)

    with pytest.raises(DestinationUnreachable) as caught:
        dest.is_committed(request(pg_schema, "t"))

    assert caught.value.reason.startswith(
        "cannot connect to PostgreSQL at postgresql://loader:***@127.0.0.1:1/nowhere"
    )
    assert "s3cret" not in caught.value.reason and "\n" not in caught.value.reason
    assert "host" in (caught.value.hint or "")


def test_a_staging_table_that_is_gone_is_reported(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    staged = stage_rows(pg_conn, pg_schema, [("id", "integer")], [(1,)])
    pg_conn.execute(
        sql.SQL("DROP TABLE {}").format(sql.Identifier(pg_schema, staged.staging_table))
    )

    with pytest.raises(LoadError) as caught:
        destination(pg_url, pg_schema).commit(staged, request(pg_schema, "t"), no_checkpoint)

    assert "is gone" in caught.value.reason and "apply again" in (caught.value.hint or "")


def test_staging_without_permission_on_the_schema_names_the_grant(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    from pyspark.sql.types import LongType, StructField, StructType

    # Only the schema is read before the staging table is created: no JVM needed to get here.
    frame = SimpleNamespace(schema=StructType([StructField("id", LongType())]))
    with temp_role(pg_conn, login=True) as role:
        pg_conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(pg_schema), sql.Identifier(role)
            )
        )
        with pytest.raises(LoadError) as caught:
            destination(url_as(pg_url, role), pg_schema).stage(
                RuleCheck.unchecked(frame), request(pg_schema, "t")
            )

    assert caught.value.reason == (
        f"no permission to create a staging table on schema {pg_schema} (role {role})"
    )
    assert caught.value.hint == f'GRANT USAGE, CREATE ON SCHEMA "{pg_schema}" TO "{role}";'
