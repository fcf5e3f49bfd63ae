"""scd2, upsert's delete detection and replace_window in PostgreSQL, inside the commit
transaction: the queries of `destinations/history/` (where each mode's semantics are
written, once) rendered for PostgreSQL, and the writes they decide.

scd2 materializes its steps as TEMP tables (so the planner sees their sizes): `_h_new` (the
staged versions with their hashes), `_h_keys` (the affected keys), `_h_result` (their history
computed again); then the stale rows are deleted and the new ones inserted. Every write
happens in the one transaction the client runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import sqlglot
from psycopg import sql
from sqlglot import exp

from hakiri.destinations.base import ChangeCount, LoadRequest
from hakiri.destinations.delete_guard import check_deletes
from hakiri.destinations.history.changes import (
    DOOMED,
    batch_rows,
    change_columns,
    count_changes_query,
    matched_rows,
    target_rows,
)
from hakiri.destinations.history.deletes import (
    absent_rows,
    batch_time_of,
    check_deleted_at,
    deletes_verb,
    live_rows,
    planned_doomed,
    planned_live,
    snapshot_key,
)
from hakiri.destinations.history.keys import check_key_columns, check_null_keys, null_keys
from hakiri.destinations.history.render import (
    count_rows,
    keys_equal,
    render,
    select_rows,
    table,
    timestamp,
)
from hakiri.destinations.history.scd2 import (
    affected_keys,
    check_duplicate_versions,
    closing,
    duplicate_versions,
    history,
    history_columns,
    new_versions,
    staged_versions,
    stale_versions,
)
from hakiri.destinations.history.views import TempViews
from hakiri.destinations.history.window import (
    check_empty_window,
    check_window_column,
    in_batch_values,
    range_predicate,
)
from hakiri.destinations.postgres.load_modes import LoadContext, insert_from_staging, is_text_type

__all__ = ["count_changes", "count_deletes", "detect_deletes", "load_replace_window", "load_scd2"]

_NEW, _KEYS, _RESULT = table("_h_new"), table("_h_keys"), table("_h_result")


def _sql(expression: exp.Expr) -> sql.SQL:
    return sql.SQL(render(expression, "postgres"))  # type: ignore[arg-type]


def _count(conn: Any, query: exp.Query) -> int:
    row = conn.execute(_sql(query)).fetchone()
    return int(row[0]) if row else 0


def _staging(ctx: LoadContext) -> exp.Table:
    """The staging table, read back from the identifier psycopg quotes."""
    return sqlglot.parse_one(ctx.staging_table.as_string(ctx.conn), into=exp.Table, read="postgres")


def _target(ctx: LoadContext) -> exp.Table:
    return table(ctx.schema, ctx.table)


def _check_key(ctx: LoadContext, key: Sequence[str], what: str) -> None:
    staged = [c.name for c in ctx.staged_columns]
    target = [c.name for c in ctx.target_columns]
    check_key_columns(key, staged, target, ctx.qualified, what)
    check_null_keys(key, _count(ctx.conn, null_keys(key, _staging(ctx))), ctx.qualified, what)


def _guard(ctx: LoadContext, live: exp.Expr, absent: exp.Expr, staged: int, verb: str) -> int:
    """The delete guard on the target rows `live` (in scope) and those of them `absent` from
    the snapshot; how many are absent, when the guard lets the load through."""
    scoped = _count(ctx.conn, count_rows(_target(ctx), live))
    doomed = _count(ctx.conn, count_rows(_target(ctx), absent))
    check_deletes(
        ctx.request.load,
        staged=staged,
        doomed=doomed,
        scoped=scoped,
        qualified=ctx.qualified,
        verb=verb,
    )
    return doomed


def _staged_rows(ctx: LoadContext) -> int:
    return _count(ctx.conn, count_rows(_staging(ctx), exp.true()))


def _temp_table(ctx: LoadContext, name: exp.Table, query: exp.Query) -> None:
    ctx.conn.execute(
        sql.SQL("CREATE TEMP TABLE {} ON COMMIT DROP AS ").format(_ident(name)) + _sql(query)
    )
    ctx.conn.execute(sql.SQL("ANALYZE {}").format(_ident(name)))


def _ident(name: exp.Table) -> sql.Identifier:
    return sql.Identifier(name.name)


# ---------------------------------------------------------------- scd2


def load_scd2(ctx: LoadContext) -> tuple[int, int]:
    """The staged versions into the history; (history rows written, versions closed)."""
    load = ctx.request.load
    _check_key(ctx, load.key_columns, "key")
    ctx.columns()  # refuses a target that shares no column with the staged rows
    cols = history_columns(
        load,
        [c.name for c in ctx.staged_columns],
        [c.name for c in ctx.target_columns],
        ctx.qualified,
        types={c.name: c.type for c in ctx.target_columns},
    )
    staging, target = _staging(ctx), _target(ctx)
    found = ctx.conn.execute(_sql(duplicate_versions(cols, staging))).fetchone()
    check_duplicate_versions(cols, found, ctx.qualified)
    closed = 0
    if load.detects_deletes:
        at = batch_time_of(ctx.request)
        live, absent = closing(cols, load, staging, at, "postgres")
        if _guard(ctx, live, absent, _staged_rows(ctx), "close"):
            closed = ctx.conn.execute(
                sql.SQL("UPDATE {} AS t SET {} = {}, {} = FALSE WHERE {}").format(
                    ctx.target,
                    sql.Identifier(cols.valid_to),
                    _sql(timestamp(at, "postgres")),
                    sql.Identifier(cols.is_current),
                    _sql(absent),
                )
            ).rowcount
    _temp_table(ctx, _NEW, staged_versions(cols, staging, "postgres"))
    _temp_table(ctx, _KEYS, affected_keys(cols, _NEW, target, "postgres"))
    _temp_table(ctx, _RESULT, history(cols, _NEW, "postgres", target, _KEYS))
    ctx.conn.execute(
        sql.SQL("DELETE FROM {} AS t USING ({}) AS d WHERE {}").format(
            ctx.target,
            _sql(stale_versions(cols, target, _KEYS, _RESULT, "postgres")),
            _sql(keys_equal([*cols.key, cols.valid_from], "t", "d")),
        )
    )
    written = ctx.conn.execute(
        sql.SQL("INSERT INTO {} ({}) ").format(
            ctx.target, sql.SQL(", ").join(map(sql.Identifier, cols.everything))
        )
        + _sql(new_versions(cols, target, _KEYS, _RESULT, "postgres"))
    ).rowcount
    return written, closed


# ---------------------------------------------------------------- upsert's deletes


def detect_deletes(ctx: LoadContext) -> int:
    """upsert with `deletes`: the target rows (in scope, not already soft-deleted) whose key the
    snapshot lacks are deleted ('hard') or get deleted_at = the batch's time ('soft'), after
    the guard; the rows affected. Runs before the upsert, which then clears deleted_at of
    the keys it loads."""
    load = ctx.request.load
    key = list(load.upsert_key or ())
    _check_key(ctx, key, "upsert_key")
    check_deleted_at(load, [c.name for c in ctx.target_columns], ctx.qualified)
    live = live_rows(load)
    absent = absent_rows(live, key, _staging(ctx))
    if not _guard(ctx, live, absent, _staged_rows(ctx), deletes_verb(load)):
        return 0
    if load.deletes == "hard":
        statement = sql.SQL("DELETE FROM {} AS t WHERE {}").format(ctx.target, _sql(absent))
    else:
        statement = sql.SQL("UPDATE {} AS t SET {} = {} WHERE {}").format(
            ctx.target,
            sql.Identifier(load.deleted_at_column),
            _sql(timestamp(batch_time_of(ctx.request), "postgres")),
            _sql(absent),
        )
    return ctx.conn.execute(statement).rowcount


# ---------------------------------------------------------------- replace_window


def load_replace_window(ctx: LoadContext) -> tuple[int, int]:
    """Delete the batch's window from the target, insert the staged rows; (inserted, deleted)."""
    load = ctx.request.load
    name = load.window_column or ""
    staged = [c.name for c in ctx.staged_columns]
    pg_type = check_window_column(name, staged, ctx.column_type(name), ctx.qualified)
    window = ctx.request.window
    if window is None:
        condition = in_batch_values(name, _staging(ctx))
    else:
        condition = range_predicate(window, name, pg_type)
        check_empty_window(
            load,
            window,
            _staged_rows(ctx),
            lambda: _count(ctx.conn, count_rows(_target(ctx), condition)),
            ctx.qualified,
        )
    deleted = ctx.conn.execute(
        sql.SQL("DELETE FROM {} AS t WHERE {}").format(ctx.target, _sql(condition))
    ).rowcount
    return insert_from_staging(ctx), deleted


# ---------------------------------------------------------------- plan's count


def count_deletes(
    url: str, schema: str, frame: Any, request: LoadRequest
) -> tuple[int, int] | None:
    """For `plan`, before any load: (rows the snapshot `frame` would delete or close, live rows
    in scope) of the target, the guard's two numbers; None when there is no target yet. The
    target's live keys are read by the engine (`pg_reader`: COPY in a task, on every engine) and
    compared there: only counts return."""
    from hakiri.destinations.postgres.inspect import observe_targets
    from hakiri.destinations.postgres.sql_client import connect
    from hakiri.guards.spark_types import quoted_name
    from hakiri.spark.pg_reader import read_query

    load = request.load
    key = snapshot_key(load)
    target = table(schema, request.target_table)
    conn = connect(url)  # one read-only session: the target's columns, its live rows' count
    try:
        conn.read_only = True
        [seen] = observe_targets(conn, [(schema, request.target_table)])
        live = planned_live(load, seen.column_names) if seen.exists else None
        if live is None:
            return None
        scoped = _count(conn, count_rows(target, live))
    finally:
        conn.close()
    doomed = planned_doomed(load, live, request.batch_time, "postgres")
    text = render(select_rows(key, target, doomed), "postgres")
    types = dict(frame.dtypes)
    keys = read_query(frame.sparkSession, url, text, [(k, types[k]) for k in key])
    with TempViews(frame.sparkSession) as views:
        targets = views.add(keys, "target_keys")
        snapshot = views.add(frame.select(*map(quoted_name, key)).distinct(), "snapshot")
        gone = views.count(count_rows(targets, absent_rows(exp.true(), key, snapshot)))
    return gone, scoped


def count_changes(url: str, schema: str, frame: Any, request: LoadRequest) -> ChangeCount | None:
    """For `plan`, before any load: what the batch `frame` would insert, update, leave unchanged
    and delete in the target (`history.changes`); None when there is no target yet or no key
    to match on. The matched target rows' key and compared columns are read by the engine
    (`pg_reader`, in the batch's types) and joined with the batch there: only counts return."""
    from hakiri.destinations.postgres.inspect import observe_targets
    from hakiri.destinations.postgres.sql_client import connect
    from hakiri.spark.pg_reader import as_text, read_query

    load = request.load
    target = table(schema, request.target_table)
    conn = connect(url)  # one read-only session: the target's columns, its live rows' count
    try:
        conn.read_only = True
        [seen] = observe_targets(conn, [(schema, request.target_table)])
        if not seen.exists:
            return None
        kinds = {c.name: c.type for c in seen.columns}
        cols = change_columns(load, frame.columns, kinds)
        matched = matched_rows(load, kinds)
        if cols is None or matched is None:
            return None
        doomed, scoped = None, None
        live = planned_live(load, kinds) if load.detects_deletes else None
        if live is not None:
            doomed = planned_doomed(load, live, request.batch_time, "postgres")
            scoped = _count(conn, count_rows(target, live))
        rows = _sql(target_rows(cols, target, matched, doomed))
        # Each value as text the engine reads back exactly (timestamps in UTC ISO form).
        names = (*cols.key, *cols.compared)
        query = sql.SQL("SELECT {}, {} FROM ({}) AS r").format(
            sql.SQL(", ").join(as_text(n, kinds[n]) for n in names),
            sql.Identifier(DOOMED),
            rows,
        )
        text = query.as_string(conn)
    finally:
        conn.close()
    types = dict(frame.dtypes)
    blank = (
        [n for n in names if types[n] == "string" and is_text_type(kinds[n])]
        if load.strategy.empty_strings_as_null
        else []
    )
    read = read_query(
        frame.sparkSession, url, text, [*((n, types[n]) for n in names), (DOOMED, "int")]
    )
    with TempViews(frame.sparkSession) as views:
        batch = views.add(frame, "batch")
        counted = views.define(batch_rows(cols, batch, blank), "batch_rows")
        insert, update, unchanged, gone = views.counts(
            count_changes_query(cols, counted, views.add(read, "target_rows"))
        )
    return ChangeCount(insert, update, unchanged, gone if live is not None else None, scoped)
