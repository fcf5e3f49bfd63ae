"""gc drops what crashed runs left behind, and nothing else."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import psycopg
import pytest
from psycopg import sql

from hakiri.destinations.base import KeptLeftover, TargetColumn
from hakiri.destinations.postgres import gc
from hakiri.destinations.postgres.names import MARKER_PREFIX
from hakiri.destinations.postgres.staging import create_staging_table, staging_name
from tests.integration.destinations.load.support import create_table, request, tables_in

pytestmark = pytest.mark.engine_free("PostgreSQL's own SQL, over tables made by SQL")


def _staging(conn: psycopg.Connection, schema: str, run: str) -> str:
    req = request(schema, "orders", run=run)
    name = staging_name(req)
    with conn.transaction():
        create_staging_table(conn, schema, name, [TargetColumn("id", "bigint")], req)
    return name


def _mark(
    conn: psycopg.Connection, schema: str, table: str, kind: str, run: str, age: timedelta
) -> None:
    created = (datetime.now(UTC) - age).isoformat(timespec="seconds")
    comment = MARKER_PREFIX + json.dumps({"kind": kind, "run": run, "created_at": created})
    conn.execute(
        sql.SQL("COMMENT ON TABLE {} IS {}").format(
            sql.Identifier(schema, table), sql.Literal(comment)
        )
    )


def test_gc_drops_orphaned_staging_and_new_tables_but_not_a_live_runs(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    orphan = _staging(pg_conn, pg_schema, run="dead-run")
    live = _staging(pg_conn, pg_schema, run="live-run")
    create_table(pg_conn, pg_schema, "orders", "id bigint")
    create_table(pg_conn, pg_schema, "orders_new", "id bigint")
    _mark(pg_conn, pg_schema, "orders_new", "blue_green_new", "dead-run", timedelta(hours=2))
    create_table(pg_conn, pg_schema, "users_new", "id bigint")  # the user's own table: no marker
    create_table(pg_conn, pg_schema, "orders_backup_20240101000000", "id bigint")
    _mark(
        pg_conn, pg_schema, "orders_backup_20240101000000", "backup", "dead-run", timedelta(days=9)
    )

    found = gc(pg_url, [pg_schema], live_runs={"live-run"}, older_than_seconds=0)

    assert sorted(found.dropped) == sorted([f"{pg_schema}.{orphan}", f"{pg_schema}.orders_new"])
    assert found.kept == [KeptLeftover(f"{pg_schema}.{live}", "running")]
    assert tables_in(pg_conn, pg_schema) == sorted(
        [live, "orders", "orders_backup_20240101000000", "users_new"]
    )


def test_gc_keeps_tables_younger_than_the_threshold(
    pg_url: str, pg_conn: psycopg.Connection, pg_schema: str
) -> None:
    young = _staging(pg_conn, pg_schema, run="dead-run")
    old = _staging(pg_conn, pg_schema, run="dead-run")
    _mark(pg_conn, pg_schema, old, "staging", "dead-run", timedelta(hours=2))

    found = gc(pg_url, [pg_schema], live_runs=set(), older_than_seconds=3600)

    assert found.dropped == [f"{pg_schema}.{old}"]
    assert found.kept == [KeptLeftover(f"{pg_schema}.{young}", "young")]
    assert tables_in(pg_conn, pg_schema) == [young]


def test_gc_skips_a_table_in_use(pg_url: str, pg_conn: psycopg.Connection, pg_schema: str) -> None:
    orphan = _staging(pg_conn, pg_schema, run="dead-run")
    with psycopg.connect(pg_url) as reader:
        reader.execute(
            sql.SQL("SELECT * FROM {}").format(sql.Identifier(pg_schema, orphan))
        ).fetchall()

        found = gc(pg_url, [pg_schema], live_runs=set(), older_than_seconds=0)

    assert found.dropped == [] and tables_in(pg_conn, pg_schema) == [orphan]
    assert found.kept == [KeptLeftover(f"{pg_schema}.{orphan}", "locked")]
