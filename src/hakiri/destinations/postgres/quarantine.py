"""The quarantine (dead-letter) table: rows that broke a warn or skip rule, kept as JSONB.

Written inside the load's commit transaction, from a staging table of violations
(rule_id, on_fail, dropped, row), so a load that rolls back leaves no orphan
quarantine rows. One record per (row, rule it broke); `dropped` says whether the
row was kept out of the target (it broke a skip rule) or loaded anyway (warn
only). `replayed_by` is set, in the replay's own load transaction, on the
records of rows that `hakiri replay` loaded.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.base import LoadRequest, QuarantinedRow, QuarantineTable, TargetColumn
from hakiri.destinations.postgres.names import check_identifier, derived_name

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "QUARANTINE_COLUMNS",
    "QUARANTINE_STAGED",
    "ensure_quarantine_table",
    "insert_quarantined",
    "mark_replayed",
    "quarantine_location",
    "read_quarantined",
    "replay_query",
]

# The staged violations: what `hakiri.quality.rules` produces, in this order.
QUARANTINE_COLUMNS = ("rule_id", "on_fail", "dropped", "row")
# Their staging table, as the COPY writer fills it in the rows' own pass.
QUARANTINE_STAGED = (
    TargetColumn("rule_id", "text", True),
    TargetColumn("on_fail", "text", True),
    TargetColumn("dropped", "boolean", True),
    TargetColumn("row", "text", True),
)


def quarantine_location(target: QuarantineTable, default_schema: str) -> tuple[str, str]:
    """(schema, table) of a quarantine table; a name PostgreSQL would truncate is refused."""
    check_identifier(target.table, "quarantine table")
    return target.schema or default_schema, target.table


def ensure_quarantine_table(conn: psycopg.Connection[Any], schema: str, name: str) -> None:
    """CREATE TABLE / INDEX IF NOT EXISTS, serialized so two loads creating it at once don't collide."""
    table = sql.Identifier(schema, name)
    conn.execute(
        "SELECT pg_advisory_xact_lock(hashtextextended(%s, 0))", (f"hakiri-dlq:{schema}.{name}",)
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE IF NOT EXISTS {} ("
            " id bigserial PRIMARY KEY,"
            " pipeline_id text NOT NULL,"
            " run_id text NOT NULL,"
            " node_id text NOT NULL,"
            " rule_id text NOT NULL,"
            " on_fail text NOT NULL,"
            " dropped boolean NOT NULL,"
            " row jsonb NOT NULL,"
            " batch_id text NOT NULL,"
            " replayed_by text,"
            " created_at timestamptz NOT NULL DEFAULT now())"
        ).format(table)
    )
    conn.execute(
        sql.SQL("CREATE INDEX IF NOT EXISTS {} ON {} (pipeline_id, run_id)").format(
            sql.Identifier(derived_name(name, "_pipeline_run_idx")), table
        )
    )


def insert_quarantined(
    conn: psycopg.Connection[Any],
    location: tuple[str, str],
    staging: sql.Identifier,
    request: LoadRequest,
    node_id: str,
) -> int:
    """Copy the staged violations into the quarantine table; the number of records."""
    ensure_quarantine_table(conn, *location)
    table = sql.Identifier(*location)
    return conn.execute(
        sql.SQL(
            "INSERT INTO {} (pipeline_id, run_id, node_id, rule_id, on_fail, dropped, row, batch_id)"
            " SELECT {}, {}, {}, rule_id, on_fail, dropped, row::jsonb, {} FROM {}"
        ).format(
            table,
            sql.Literal(request.pipeline_id),
            sql.Literal(request.run_id),
            sql.Literal(node_id),
            sql.Literal(request.batch_id),
            staging,
        )
    ).rowcount


def read_quarantined(
    conn: psycopg.Connection[Any],
    table: sql.Identifier,
    pipeline_id: str,
    *,
    run_id: str | None = None,
    limit: int = 50,
) -> list[QuarantinedRow]:
    """Newest first; a small page (the driver holds samples only)."""
    where = sql.SQL("pipeline_id = {}").format(sql.Literal(pipeline_id))
    if run_id is not None:
        where = sql.SQL("{} AND run_id = {}").format(where, sql.Literal(run_id))
    rows = conn.execute(
        sql.SQL(
            "SELECT id, pipeline_id, run_id, node_id, rule_id, on_fail, dropped, row, created_at,"
            " replayed_by FROM {} WHERE {} ORDER BY id DESC LIMIT {}"
        ).format(table, where, sql.Literal(limit))
    ).fetchall()
    return [QuarantinedRow(*row) for row in rows]


def mark_replayed(
    conn: psycopg.Connection[Any],
    table: sql.Identifier,
    staging: sql.Identifier,
    row_column: str,
    request: LoadRequest,
    replay_of: str,
) -> int:
    """Set replayed_by on the dropped records of the rows a replay staged (in its transaction)."""
    return conn.execute(
        sql.SQL(
            "UPDATE {} q SET replayed_by = {} WHERE q.pipeline_id = {} AND q.run_id = {}"
            " AND q.dropped AND q.replayed_by IS NULL"
            " AND q.row IN (SELECT s.{}::jsonb FROM {} s)"
        ).format(
            table,
            sql.Literal(request.run_id),
            sql.Literal(request.pipeline_id),
            sql.Literal(replay_of),
            sql.Identifier(row_column),
            staging,
        )
    ).rowcount


def replay_query(
    table: sql.Identifier,
    target: sql.Identifier,
    pipeline_id: str,
    run_id: str,
    row_column: str,
) -> sql.Composed:
    """SELECT the dropped, not yet replayed rows of a run, each converted to the target's row
    type by PostgreSQL (jsonb_populate_record), with the quarantined JSON beside them."""
    return sql.SQL(
        "SELECT (jsonb_populate_record(NULL::{target}, q.row)).*, q.row::text AS {column}"
        " FROM (SELECT DISTINCT row FROM {table} WHERE pipeline_id = {pipeline}"
        " AND run_id = {run} AND dropped AND replayed_by IS NULL) q"
    ).format(
        target=target,
        column=sql.Identifier(row_column),
        table=table,
        pipeline=sql.Literal(pipeline_id),
        run=sql.Literal(run_id),
    )
