"""PostgreSQL's side of the commit protocol: the empty-source guard, backups, and the ledger
across targets and databases. What every destination promises (the ledger, the checkpoints
around COMMIT, a failure before it) is tests/integration/destinations/test_conformance.py."""

from __future__ import annotations

import re
from collections.abc import Iterator

import psycopg
import pytest
from psycopg import sql

from hakiri.errors import EmptySource
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
)

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL, over rows staged by SQL")

COLUMNS = [("id", "bigint"), ("name", "text")]


@pytest.fixture
def statement_probe(pg_conn: psycopg.Connection, pg_schema: str) -> Iterator[sql.Composed]:
    """Table `t` (one row), and a sequence advanced by every TRUNCATE of `t` and every DDL statement.

    nextval() is not transactional, so the count survives the rollback of a refused
    load: it proves no destructive statement ran, not just that its effect was undone."""
    probe = sql.Identifier(pg_schema, "probe")
    function = sql.Identifier(pg_schema, "bump_probe")
    pg_conn.execute(sql.SQL("CREATE SEQUENCE {}").format(probe))
    pg_conn.execute(
        sql.SQL(
            "CREATE FUNCTION {}() RETURNS trigger LANGUAGE plpgsql AS $$"
            " BEGIN PERFORM nextval({}); RETURN NULL; END $$"
        ).format(function, sql.Literal(probe.as_string(pg_conn)))
    )
    ddl_function = sql.Identifier(pg_schema, "bump_probe_ddl")
    pg_conn.execute(
        sql.SQL(
            "CREATE FUNCTION {}() RETURNS event_trigger LANGUAGE plpgsql AS $$ BEGIN"
            # Dropping the batch's own staging table is cleanup, not a destructive statement.
            " IF tg_event = 'ddl_command_start' AND tg_tag <> 'DROP TABLE'"
            " OR tg_event = 'sql_drop' AND EXISTS (SELECT 1 FROM pg_event_trigger_dropped_objects()"
            "   WHERE object_type = 'table' AND object_name NOT LIKE '\\_hakiri\\_stg\\_%')"
            " THEN PERFORM nextval({}); END IF; END $$"
        ).format(ddl_function, sql.Literal(probe.as_string(pg_conn)))
    )
    triggers = [f"probe_{pg_schema}", f"probe_drop_{pg_schema}"]
    for trigger, event in zip(triggers, ["ddl_command_start", "sql_drop"], strict=True):
        pg_conn.execute(
            sql.SQL("CREATE EVENT TRIGGER {} ON {} EXECUTE FUNCTION {}()").format(
                sql.Identifier(trigger), sql.SQL(event), ddl_function
            )
        )
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    insert(pg_conn, pg_schema, "t", [(1, "a")])
    pg_conn.execute(
        sql.SQL(
            "CREATE TRIGGER probe_truncate BEFORE TRUNCATE ON {} FOR EACH STATEMENT EXECUTE FUNCTION {}()"
        ).format(sql.Identifier(pg_schema, "t"), function)
    )
    try:
        yield probe
    finally:
        for trigger in triggers:
            pg_conn.execute(sql.SQL("DROP EVENT TRIGGER {}").format(sql.Identifier(trigger)))


def _probe_count(conn: psycopg.Connection, probe: sql.Composed) -> int:
    row = conn.execute(sql.SQL("SELECT last_value, is_called FROM {}").format(probe)).fetchone()
    assert row is not None
    return int(row[0]) if row[1] else 0


# ---------------------------------------------------------------- empty-source guard


@pytest.mark.parametrize("mode", [LoadMode.TRUNCATE, LoadMode.BLUE_GREEN])
def test_an_empty_source_is_refused_before_any_destructive_statement(
    pg_url: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    statement_probe: sql.Composed,
    mode: LoadMode,
) -> None:
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [])
    before = _probe_count(pg_conn, statement_probe)

    with pytest.raises(EmptySource) as caught:
        destination(pg_url, pg_schema).commit(staged, request(pg_schema, "t", mode), no_checkpoint)

    assert "the source produced 0 rows" in caught.value.reason
    assert "fail_on_empty_source = false" in (caught.value.hint or "")
    assert _probe_count(pg_conn, statement_probe) == before  # no TRUNCATE, no CREATE/ALTER/DROP
    assert rows_of(pg_conn, pg_schema, "t") == [(1, "a")]
    assert ledger_batches(pg_conn, pg_schema) == []
    assert not exists(pg_conn, pg_schema, staged.staging_table)


@pytest.mark.parametrize("mode", [LoadMode.TRUNCATE, LoadMode.BLUE_GREEN])
def test_fail_on_empty_source_false_lets_the_target_be_emptied(
    pg_url: str,
    pg_conn: psycopg.Connection,
    pg_schema: str,
    statement_probe: sql.Composed,
    mode: LoadMode,
) -> None:
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [])
    before = _probe_count(pg_conn, statement_probe)

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "t", mode, fail_on_empty_source=False), no_checkpoint
    )

    assert result.rows_loaded == 0
    assert rows_of(pg_conn, pg_schema, "t") == []
    assert tables_in(pg_conn, pg_schema) == ["t"]
    assert (
        _probe_count(pg_conn, statement_probe) > before
    )  # the probe does see destructive statements


def test_an_empty_append_is_not_guarded(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [])

    result = destination(pg_url, pg_schema).commit(staged, request(pg_schema, "t"), no_checkpoint)

    assert result.rows_loaded == 0 and ledger_batches(pg_conn, pg_schema) == [("batch-1", 0)]


# ---------------------------------------------------------------- backup_before_load


@pytest.mark.parametrize("mode", [LoadMode.TRUNCATE, LoadMode.BLUE_GREEN, LoadMode.UPSERT])
def test_backup_before_load_snapshots_the_old_rows(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str, mode: LoadMode
) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint PRIMARY KEY, name text")
    insert(pg_conn, pg_schema, "t", [(1, "a"), (2, "b")])
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "A")])
    options = {"upsert_key": ["id"]} if mode is LoadMode.UPSERT else {}

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "t", mode, backup_before_load=True, **options), no_checkpoint
    )

    assert result.backup_table is not None
    assert re.fullmatch(r"t_backup_\d{14}", result.backup_table)
    assert rows_of(pg_conn, pg_schema, result.backup_table) == [(1, "a"), (2, "b")]
    assert (1, "A") in rows_of(pg_conn, pg_schema, "t")


def test_a_backup_of_a_long_table_name_is_shortened_to_63_bytes(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    table = "ü" * 30  # 60 bytes
    create_table(pg_conn, pg_schema, table, "id bigint, name text")
    insert(pg_conn, pg_schema, table, [(1, "a")])
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(2, "b")])

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, table, LoadMode.TRUNCATE, backup_before_load=True), no_checkpoint
    )

    assert result.backup_table is not None and len(result.backup_table.encode()) <= 63
    assert result.backup_table.startswith("ü") and "_backup_" in result.backup_table
    assert rows_of(pg_conn, pg_schema, result.backup_table) == [(1, "a")]


def test_no_backup_for_an_append(pg_url: str, pg_conn: psycopg.Connection, pg_schema: str) -> None:
    create_table(pg_conn, pg_schema, "t", "id bigint, name text")
    staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "a")])

    result = destination(pg_url, pg_schema).commit(
        staged, request(pg_schema, "t", backup_before_load=True), no_checkpoint
    )

    assert result.backup_table is None and tables_in(pg_conn, pg_schema) == ["t"]


# ---------------------------------------------------------------- ledger


def test_the_same_batch_into_another_target_is_loaded_there_too(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    # One pipeline, two targets (a dev and a prod table in one database): one ledger row each.
    dest = destination(pg_url, pg_schema)
    for table in ("dev_t", "prod_t"):
        staged = stage_rows(pg_conn, pg_schema, COLUMNS, [(1, "a")])
        result = dest.commit(staged, request(pg_schema, table), no_checkpoint)
        assert (result.rows_loaded, result.already_committed) == (1, False)
        assert dest.is_committed(request(pg_schema, table))

    assert (
        rows_of(pg_conn, pg_schema, "dev_t") == rows_of(pg_conn, pg_schema, "prod_t") == [(1, "a")]
    )
    assert not dest.is_committed(request(pg_schema, "other_t"))


def test_is_committed_is_false_before_the_ledger_exists(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    # A database of its own: the suite's database has a ledger once any test committed.
    database = f"db_{pg_schema}"
    pg_conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
    try:
        url = pg_url.rsplit("/", 1)[0] + "/" + database
        assert destination(url, "public").is_committed(request("public", "t")) is False
    finally:
        pg_conn.execute(sql.SQL("DROP DATABASE {}").format(sql.Identifier(database)))
