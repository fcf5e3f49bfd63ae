"""cdc_mirror in PostgreSQL: a batch's net changes applied by key, in its one transaction.

The staging table holds one row per changed key (`sources.cdc.changes`), with the op and
the columns the WAL left out (a TOASTed value an update did not touch). Three statements,
in an order that needs no conflict handling: delete the keys that are gone (for a
snapshot batch, every key it lacks), update the keys the target has (an unchanged column
keeps its value), insert the others."""

from __future__ import annotations

from collections.abc import Sequence

from psycopg import sql

from hakiri.destinations.postgres.load_modes import LoadContext
from hakiri.errors import LoadError
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN, is_snapshot

__all__ = ["load_mirror"]


def load_mirror(ctx: LoadContext, key: Sequence[str]) -> tuple[int, int]:
    """(rows inserted or updated, rows deleted)."""
    columns = [c.name for c in ctx.columns()]
    missing = [k for k in key if k not in columns]
    if missing:
        raise LoadError(
            f"cdc_mirror into {ctx.qualified}: the key {', '.join(missing)} is not a column of "
            "both the changes and the target",
            "set upsert_key to the source table's primary key",
        )
    op, unchanged = sql.Identifier(OP_COLUMN), sql.Identifier(UNCHANGED_COLUMN)
    same_key = sql.SQL(" AND ").join(
        sql.SQL("t.{0} = s.{0}").format(sql.Identifier(k)) for k in key
    )
    deleted = ctx.conn.execute(
        sql.SQL("DELETE FROM {} AS t USING {} AS s WHERE s.{} = 'd' AND {}").format(
            ctx.target, ctx.staging_table, op, same_key
        )
    ).rowcount
    if is_snapshot(ctx.request.batch_id):  # the whole table: a key it lacks is gone
        deleted += ctx.conn.execute(
            sql.SQL("DELETE FROM {} AS t WHERE NOT EXISTS (SELECT 1 FROM {} AS s WHERE {})").format(
                ctx.target, ctx.staging_table, same_key
            )
        ).rowcount
    values = [c for c in columns if c not in key]
    updated = 0
    if values:
        assignments = sql.SQL(", ").join(
            sql.SQL(
                "{0} = CASE WHEN s.{1} IS NOT NULL AND s.{1}::jsonb ? {2} THEN t.{0} ELSE s.{0} END"
            ).format(sql.Identifier(c), unchanged, sql.Literal(c))
            for c in values
        )
        updated = ctx.conn.execute(
            sql.SQL("UPDATE {} AS t SET {} FROM {} AS s WHERE s.{} = 'u' AND {}").format(
                ctx.target, assignments, ctx.staging_table, op, same_key
            )
        ).rowcount
    names = sql.SQL(", ").join(sql.Identifier(c) for c in columns)
    inserted = ctx.conn.execute(
        sql.SQL(
            "INSERT INTO {target} ({names}) SELECT {names} FROM {staging} AS s "
            "WHERE s.{op} = 'u' AND NOT EXISTS (SELECT 1 FROM {target} AS t WHERE {same_key})"
        ).format(
            target=ctx.target,
            names=names,
            staging=ctx.staging_table,
            op=op,
            same_key=same_key,
        )
    ).rowcount
    return updated + inserted, deleted
