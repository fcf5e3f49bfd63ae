"""The destination's own bookkeeping, in schema `_hakiri`: the load ledger and the watermarks.

Both live in the target database so they commit in the same transaction as the
rows they describe: a batch id in `load_ledger` means its rows are in the target,
and a mark in `pipeline_watermarks` means every row up to it was loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.base import LoadRequest

if TYPE_CHECKING:
    import psycopg

__all__ = ["LEDGER_SCHEMA", "LoadLedger", "WatermarkStore", "ensure_ledger_tables"]

LEDGER_SCHEMA = "_hakiri"
_LEDGER = sql.Identifier(LEDGER_SCHEMA, "load_ledger")
_WATERMARKS = sql.Identifier(LEDGER_SCHEMA, "pipeline_watermarks")
# Serializes the first creation of the ledger by concurrent loads (CREATE … IF NOT EXISTS
# races on the catalog's unique indexes); taken only while the tables are missing.
_CREATE_LOCK_KEY = "hakiri:_hakiri ledger"

_CREATE = [
    sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(LEDGER_SCHEMA)),
    sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} ("
        " project text NOT NULL, pipeline_id text NOT NULL, batch_id text NOT NULL,"
        " target_schema text NOT NULL, target_table text NOT NULL,"
        " rows bigint NOT NULL DEFAULT 0, run_id text NOT NULL,"
        " committed_at timestamptz NOT NULL DEFAULT now(),"
        # The target is part of the key: the same pipeline loading into another schema or
        # table (dev and prod schemas in one database) must not find its batches "done".
        " PRIMARY KEY (project, pipeline_id, target_schema, target_table, batch_id))"
    ).format(_LEDGER),
    sql.SQL(
        "CREATE TABLE IF NOT EXISTS {} ("
        " project text NOT NULL, pipeline_id text NOT NULL,"
        " target_schema text NOT NULL, target_table text NOT NULL,"
        " watermark_value text, watermark_type text NOT NULL,"
        " updated_at timestamptz NOT NULL DEFAULT now(),"
        " PRIMARY KEY (project, pipeline_id, target_schema, target_table))"
    ).format(_WATERMARKS),
]


def _tables_exist(conn: psycopg.Connection[Any]) -> bool:
    row = conn.execute(
        "SELECT to_regclass(%s) IS NOT NULL AND to_regclass(%s) IS NOT NULL",
        (_LEDGER.as_string(conn), _WATERMARKS.as_string(conn)),
    ).fetchone()
    return bool(row and row[0])


def ensure_ledger_tables(conn: psycopg.Connection[Any]) -> None:
    """Create `_hakiri.load_ledger` and `_hakiri.pipeline_watermarks` unless they exist (in the caller's transaction).

    Existence is checked first so a role without CREATE on the database can load
    once an administrator has created the schema."""
    if _tables_exist(conn):
        return
    conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (_CREATE_LOCK_KEY,))
    for statement in _CREATE:
        conn.execute(statement)


_KEY = sql.SQL(
    "project = %s AND pipeline_id = %s AND target_schema = %s AND target_table = %s AND batch_id = %s"
)


def _key(request: LoadRequest, schema: str) -> tuple[str, ...]:
    return (request.project, request.pipeline_id, schema, request.target_table, request.batch_id)


class LoadLedger:
    """Which batches are in the target: one row per (project, pipeline, target, batch), written with the rows."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def claim(self, request: LoadRequest, schema: str) -> bool:
        """Insert this batch's ledger row; False if it is already there (committed earlier).

        Claiming first, inside the load's transaction, makes a concurrent commit of the
        same batch wait here and then find it committed, instead of loading it twice."""
        row = self.conn.execute(
            sql.SQL(
                "INSERT INTO {} (project, pipeline_id, batch_id, target_schema, target_table, run_id)"
                " VALUES (%s, %s, %s, %s, %s, %s) ON CONFLICT DO NOTHING RETURNING 1"
            ).format(_LEDGER),
            (
                request.project,
                request.pipeline_id,
                request.batch_id,
                schema,
                request.target_table,
                request.run_id,
            ),
        ).fetchone()
        return row is not None

    def record_rows(self, request: LoadRequest, schema: str, rows: int) -> None:
        self.conn.execute(
            sql.SQL("UPDATE {} SET rows = %s, committed_at = now() WHERE {}").format(_LEDGER, _KEY),
            (rows, *_key(request, schema)),
        )

    def forget(self, request: LoadRequest, schema: str) -> None:
        """Delete every ledger row and the watermark of the request's target (not only its
        batch): the caller found the table gone. Nothing to do before the ledger exists."""
        if not _tables_exist(self.conn):
            return
        target = (request.project, request.pipeline_id, schema, request.target_table)
        for table in (_LEDGER, _WATERMARKS):
            self.conn.execute(
                sql.SQL(
                    "DELETE FROM {} WHERE project = %s AND pipeline_id = %s"
                    " AND target_schema = %s AND target_table = %s"
                ).format(table),
                target,
            )

    def contains(self, request: LoadRequest, schema: str) -> bool:
        """Is the batch in the ledger? False when the ledger does not exist yet."""
        exists = self.conn.execute(
            "SELECT to_regclass(%s) IS NOT NULL", (_LEDGER.as_string(self.conn),)
        ).fetchone()
        if not (exists and exists[0]):
            return False
        row = self.conn.execute(
            sql.SQL("SELECT 1 FROM {} WHERE {}").format(_LEDGER, _KEY), _key(request, schema)
        ).fetchone()
        return row is not None


class WatermarkStore:
    """High-water marks of incremental_watermark loads, keyed (project, pipeline, schema, table)."""

    def __init__(self, conn: psycopg.Connection[Any]) -> None:
        self.conn = conn

    def read(self, request: LoadRequest, schema: str) -> str | None:
        row = self.conn.execute(
            sql.SQL(
                "SELECT watermark_value FROM {} WHERE project = %s AND pipeline_id = %s"
                " AND target_schema = %s AND target_table = %s FOR UPDATE"
            ).format(_WATERMARKS),
            (request.project, request.pipeline_id, schema, request.target_table),
        ).fetchone()
        return row[0] if row else None

    def write(self, request: LoadRequest, schema: str, value: str | None, type_: str) -> None:
        self.conn.execute(
            sql.SQL(
                "INSERT INTO {} (project, pipeline_id, target_schema, target_table,"
                " watermark_value, watermark_type) VALUES (%s, %s, %s, %s, %s, %s)"
                " ON CONFLICT (project, pipeline_id, target_schema, target_table) DO UPDATE"
                " SET watermark_value = EXCLUDED.watermark_value,"
                " watermark_type = EXCLUDED.watermark_type, updated_at = now()"
            ).format(_WATERMARKS),
            (request.project, request.pipeline_id, schema, request.target_table, value, type_),
        )
