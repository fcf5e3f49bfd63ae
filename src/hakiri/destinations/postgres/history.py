"""The three modes that remove rows a snapshot no longer has, in SQL, inside the commit
transaction: scd2 (history), upsert's delete detection, replace_window.

scd2. Every staged row is a version: the key, the columns, `valid_from` (its change
time, else the batch's time; see `spark/load_shape.py`). In order:

1. closing: the current versions (in `delete_scope`) whose key the snapshot lacks and
   that started at or before the batch's time get `valid_to` = the batch's time
   (deletes = 'close'); the delete guard counts them first;
2. affected keys: those with a staged version that is not simply their current one
   again (same tracked values, starting no earlier). For the 95% of a snapshot that
   did not change, nothing else happens;
3. for the affected keys only, the history is computed again from its events: every
   version already there, every gap (a version closed with no successor at its end),
   and the staged versions; one event per key and time (the staged one wins), and an
   event that changes nothing (the same values again, a gap after a gap) is dropped.
   A version ends where the next event starts; the last one is current;
4. rows of the affected keys that differ from the result are deleted and the result's
   missing rows inserted: an unchanged history row is never rewritten.

So a late row lands at its place by change time, a key that comes back opens a new
version, and a batch loaded twice changes nothing.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from psycopg import sql

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.delete_guard import check_deletes
from hakiri.destinations.postgres.load_modes import LoadContext, insert_from_staging
from hakiri.errors import EmptySource, LoadError
from hakiri.guards.expressions import filter_for
from hakiri.spec.load import LoadMode

if TYPE_CHECKING:
    from hakiri.destinations.base import TargetColumn

__all__ = ["detect_deletes", "load_replace_window", "load_scd2"]

_TRUE = sql.SQL("TRUE")


def _scope(ctx: LoadContext, alias: str) -> sql.Composable:
    """`delete_scope` on the target (aliased), or TRUE."""
    scope = ctx.request.load.delete_scope
    if scope is None:
        return _TRUE
    return sql.SQL("coalesce(({}), false)").format(
        sql.SQL(filter_for(scope, dialect="postgres", alias=alias))
    )


def _count(ctx: LoadContext, query: sql.Composable) -> int:
    return _count_of(ctx.conn, query)


def _count_of(conn: Any, query: sql.Composable) -> int:
    row = conn.execute(query).fetchone()
    return int(row[0]) if row else 0


def _key_match(key: Sequence[str], left: str, right: str) -> sql.Composable:
    return sql.SQL(" AND ").join(
        sql.SQL("{} = {}").format(sql.Identifier(left, k), sql.Identifier(right, k)) for k in key
    )


def _names(columns: Sequence[str], alias: str | None = None) -> sql.Composable:
    if alias is None:
        return sql.SQL(", ").join(map(sql.Identifier, columns))
    return sql.SQL(", ").join(sql.Identifier(alias, c) for c in columns)


def _check_key(ctx: LoadContext, key: Sequence[str], what: str) -> None:
    staged = {c.name for c in ctx.staged_columns}
    target = {c.name for c in ctx.target_columns}
    for column in key:
        if column not in staged or column not in target:
            where = "staged rows" if column not in staged else "target"
            raise LoadError(
                f"{what} column {column!r} is not in the {where} of {ctx.qualified}",
                "fix the key in [pipeline.load], or select that column in the transforms",
            )
    nulls = _count(
        ctx,
        sql.SQL("SELECT count(*) FROM {} WHERE {}").format(
            ctx.staging_table,
            sql.SQL(" OR ").join(sql.SQL("{} IS NULL").format(sql.Identifier(k)) for k in key),
        ),
    )
    if nulls:
        raise LoadError(
            f"{what} {list(key)} is NULL in {nulls:,} staged rows for {ctx.qualified}",
            "filter those rows out or fill the key in a transform: a NULL key is no record",
        )


def _guard(
    ctx: LoadContext, live: sql.Composable, absent: sql.Composable, staged: int, verb: str
) -> int:
    """The delete guard on the target rows `live` (in scope) and those of them `absent` from
    the snapshot; how many are absent, when the guard lets the load through."""
    count = sql.SQL("SELECT count(*) FROM {} t WHERE {}")
    scoped = _count(ctx, count.format(ctx.target, live))
    doomed = _count(ctx, count.format(ctx.target, absent))
    check_deletes(
        ctx.request.load,
        staged=staged,
        doomed=doomed,
        scoped=scoped,
        qualified=ctx.qualified,
        verb=verb,
    )
    return doomed


# ---------------------------------------------------------------- scd2


def load_scd2(ctx: LoadContext) -> tuple[int, int]:
    """The staged versions into the history; (history rows written, versions closed)."""
    load = ctx.request.load
    key = load.key_columns
    _check_key(ctx, key, "key")
    vf, vt, cur = load.valid_from_column, load.valid_to_column, load.is_current_column
    validity = {vf, vt, cur}
    columns = [c for c in ctx.columns() if c.name not in validity]
    missing = [v for v in (vf, vt, cur) if ctx.column_type(v) is None]
    if missing:
        raise LoadError(
            f"the history {ctx.qualified} has no column {missing[0]!r}",
            "load scd2 into a new table (hakiri creates it), or add the validity columns",
        )
    tracked = list(load.track) if load.track else [c.name for c in columns if c.name not in key]
    unknown = [t for t in tracked if t not in {c.name for c in columns}]
    if unknown:
        raise LoadError(
            f"track names {unknown[0]!r}, which is not a column of {ctx.qualified}",
            "fix `track`, or leave it out to track every non-key column",
        )
    staged = _count(ctx, sql.SQL("SELECT count(*) FROM {}").format(ctx.staging_table))
    _check_unique_versions(ctx, key, vf)
    batch_time = sql.Literal(ctx.request.batch_time)
    closed = 0
    if load.detects_deletes:
        closed = _close_absent(ctx, key, vf, vt, cur, staged, batch_time)
    _stage_versions(ctx, key, columns, tracked, vf)
    _affected_keys(ctx, key, tracked, vf, cur)
    written = _rewrite_history(ctx, key, columns, tracked, vf, vt, cur)
    return written, closed


def _hash(
    columns: Sequence[str], alias: str, types: dict[str, str] | None = None
) -> sql.Composable:
    """md5 of the tracked values as one row's text: NULL-safe, and works for json too."""
    cells = [
        sql.SQL("CAST({} AS {})").format(sql.Identifier(alias, c), sql.SQL(types[c]))
        if types
        else sql.Identifier(alias, c)
        for c in columns
    ]
    return sql.SQL("md5(ROW({})::text)").format(sql.SQL(", ").join(cells))


def _check_unique_versions(ctx: LoadContext, key: Sequence[str], vf: str) -> None:
    found = ctx.conn.execute(
        sql.SQL("SELECT {}, count(*) FROM {} GROUP BY {}, {} HAVING count(*) > 1 LIMIT 1").format(
            sql.SQL(", ").join(sql.SQL("{}::text").format(sql.Identifier(k)) for k in key),
            ctx.staging_table,
            _names(key),
            sql.Identifier(vf),
        )
    ).fetchone()
    if found:
        values = ", ".join(f"{k}={v}" for k, v in zip(key, found[:-1], strict=True))
        raise LoadError(
            f"the staged rows for {ctx.qualified} hold {found[-1]} versions of {values} that "
            "start at the same time",
            "deduplicate the rows in a transform, or declare `change_time_column` so each "
            "version has its own start",
        )


def _close_absent(
    ctx: LoadContext,
    key: Sequence[str],
    vf: str,
    vt: str,
    cur: str,
    staged: int,
    batch_time: sql.Composable,
) -> int:
    """deletes = 'close': end the current versions whose key left the snapshot."""
    live = sql.SQL("{} AND {}").format(sql.Identifier("t", cur), _scope(ctx, "t"))
    absent = sql.SQL("{} AND {} <= {} AND NOT EXISTS (SELECT 1 FROM {} s WHERE {})").format(
        live,
        sql.Identifier("t", vf),
        batch_time,
        ctx.staging_table,
        _key_match(key, "s", "t"),
    )
    doomed = _guard(ctx, live, absent, staged, "close")
    if not doomed:
        return 0
    return ctx.conn.execute(
        sql.SQL("UPDATE {} t SET {} = {}, {} = FALSE WHERE {}").format(
            ctx.target, sql.Identifier(vt), batch_time, sql.Identifier(cur), absent
        )
    ).rowcount


def _stage_versions(
    ctx: LoadContext,
    key: Sequence[str],
    columns: Sequence[TargetColumn],
    tracked: Sequence[str],
    vf: str,
) -> None:
    """_h_new: the staged versions in the target's types, with the hash of their tracked values."""
    types = {c.name: c.type for c in columns} | {vf: ctx.column_type(vf) or "timestamp"}
    names = [c.name for c in columns] + [vf]
    ctx.conn.execute(
        sql.SQL("CREATE TEMP TABLE _h_new ON COMMIT DROP AS SELECT {}, {} AS _h FROM {} s").format(
            sql.SQL(", ").join(
                sql.SQL("CAST({} AS {}) AS {}").format(
                    sql.Identifier("s", n), sql.SQL(types[n]), sql.Identifier(n)
                )
                for n in names
            ),
            _hash(tracked, "s", types),
            ctx.staging_table,
        )
    )
    ctx.conn.execute(sql.SQL("ANALYZE _h_new"))


def _affected_keys(
    ctx: LoadContext, key: Sequence[str], tracked: Sequence[str], vf: str, cur: str
) -> None:
    """_h_keys: the keys whose history this batch changes."""
    ctx.conn.execute(
        sql.SQL(
            "CREATE TEMP TABLE _h_keys ON COMMIT DROP AS SELECT DISTINCT {n_key} FROM _h_new n "
            "WHERE NOT EXISTS (SELECT 1 FROM {target} t WHERE {cur_col} AND {match} "
            "AND {t_vf} <= {n_vf} AND {t_hash} = n._h)"
        ).format(
            n_key=_names(key, "n"),
            target=ctx.target,
            cur_col=sql.Identifier("t", cur),
            match=_key_match(key, "t", "n"),
            t_vf=sql.Identifier("t", vf),
            n_vf=sql.Identifier("n", vf),
            t_hash=_hash(tracked, "t"),
        )
    )
    ctx.conn.execute(sql.SQL("ANALYZE _h_keys"))


def _rewrite_history(
    ctx: LoadContext,
    key: Sequence[str],
    columns: Sequence[TargetColumn],
    tracked: Sequence[str],
    vf: str,
    vt: str,
    cur: str,
) -> int:
    names = [c.name for c in columns]
    # A gap event: the key, every other column NULL (in the columns' order, for UNION ALL).
    gap = sql.SQL(", ").join(
        sql.Identifier(c.name)
        if c.name in key
        else sql.SQL("CAST(NULL AS {})").format(sql.SQL(c.type))
        for c in columns
    )
    ident = sql.Identifier
    query = sql.SQL(
        """
CREATE TEMP TABLE _h_result ON COMMIT DROP AS
WITH old AS (
  SELECT {t_names}, t.{vf} AS _at, t.{vt} AS _until, {t_hash} AS _h,
         lead(t.{vf}) OVER (PARTITION BY {t_key} ORDER BY t.{vf}) AS _next
  FROM {target} t JOIN _h_keys k ON {tk_match}
), events AS (
  SELECT {names}, _at, _h, 'v' AS _kind, 0 AS _src FROM old
  UNION ALL
  SELECT {gap}, _until, NULL, 'd', 0 FROM old
   WHERE _until IS NOT NULL AND (_next IS NULL OR _next <> _until)
  UNION ALL
  SELECT {n_names}, n.{vf}, n._h, 'v', 1 FROM _h_new n JOIN _h_keys k ON {nk_match}
), one AS (
  SELECT * FROM (
    SELECT e.*, row_number() OVER (PARTITION BY {key}, _at ORDER BY _src DESC) AS _rank
    FROM events e) x
  WHERE _rank = 1
), marked AS (
  SELECT *, lag(_kind) OVER w AS _prev_kind, lag(_h) OVER w AS _prev_h
  FROM one WINDOW w AS (PARTITION BY {key} ORDER BY _at)
), kept AS (
  SELECT * FROM marked
  WHERE NOT (_kind = 'v' AND coalesce(_prev_kind = 'v' AND _prev_h = _h, false))
    AND NOT (_kind = 'd' AND coalesce(_prev_kind = 'd', true))
), timed AS (
  SELECT *, lead(_at) OVER (PARTITION BY {key} ORDER BY _at) AS _end FROM kept
)
SELECT {names}, _at AS {vf}, _end AS {vt}, _end IS NULL AS {cur}, _h FROM timed
WHERE _kind = 'v'
"""
    ).format(
        t_names=_names(names, "t"),
        vf=ident(vf),
        vt=ident(vt),
        cur=ident(cur),
        t_hash=_hash(tracked, "t"),
        t_key=_names(key, "t"),
        target=ctx.target,
        tk_match=_key_match(key, "t", "k"),
        names=_names(names),
        key=_names(key),
        gap=gap,
        n_names=_names(names, "n"),
        nk_match=_key_match(key, "n", "k"),
    )
    ctx.conn.execute(query)
    same = sql.SQL(
        "{match} AND r.{vf} = t.{vf} AND r.{vt} IS NOT DISTINCT FROM t.{vt} AND r._h = {t_hash}"
    ).format(
        match=_key_match(key, "r", "t"),
        vf=ident(vf),
        vt=ident(vt),
        t_hash=_hash(tracked, "t"),
    )
    ctx.conn.execute(
        sql.SQL(
            "DELETE FROM {target} t USING _h_keys k WHERE {tk_match} "
            "AND NOT EXISTS (SELECT 1 FROM _h_result r WHERE {same})"
        ).format(target=ctx.target, tk_match=_key_match(key, "t", "k"), same=same)
    )
    everything = [*names, vf, vt, cur]
    return ctx.conn.execute(
        sql.SQL(
            "INSERT INTO {target} ({cols}) SELECT {r_cols} FROM _h_result r "
            "WHERE NOT EXISTS (SELECT 1 FROM {target} t WHERE {match} AND t.{vf} = r.{vf})"
        ).format(
            target=ctx.target,
            cols=_names(everything),
            r_cols=_names(everything, "r"),
            match=_key_match(key, "t", "r"),
            vf=ident(vf),
        )
    ).rowcount


# ---------------------------------------------------------------- upsert's deletes


def detect_deletes(ctx: LoadContext) -> int:
    """upsert with `deletes`: the target rows (in scope, not already soft-deleted) whose key the
    snapshot lacks are deleted ('hard') or get deleted_at = the batch's time ('soft'), after
    the guard; the rows affected. Runs before the upsert, which then clears deleted_at of
    the keys it loads."""
    load = ctx.request.load
    key = list(load.upsert_key or ())
    _check_key(ctx, key, "upsert_key")
    live = sql.SQL("TRUE")
    if load.deletes == "soft":
        if ctx.column_type(load.deleted_at_column) is None:
            raise LoadError(
                f"{ctx.qualified} has no column {load.deleted_at_column!r} to mark deletes in",
                "apply again: hakiri adds it with the staged rows (or add it yourself)",
            )
        live = sql.SQL("{} IS NULL").format(sql.Identifier("t", load.deleted_at_column))
    in_scope = sql.SQL("{} AND {}").format(_scope(ctx, "t"), live)
    absent = sql.SQL("{} AND NOT EXISTS (SELECT 1 FROM {} s WHERE {})").format(
        in_scope, ctx.staging_table, _key_match(key, "s", "t")
    )
    staged = _count(ctx, sql.SQL("SELECT count(*) FROM {}").format(ctx.staging_table))
    verb = "delete" if load.deletes == "hard" else "mark deleted"
    doomed = _guard(ctx, in_scope, absent, staged, verb)
    if not doomed:
        return 0
    if load.deletes == "hard":
        statement = sql.SQL("DELETE FROM {} t WHERE {}").format(ctx.target, absent)
    else:
        statement = sql.SQL("UPDATE {} t SET {} = {} WHERE {}").format(
            ctx.target,
            sql.Identifier(load.deleted_at_column),
            sql.Literal(ctx.request.batch_time),
            absent,
        )
    return ctx.conn.execute(statement).rowcount


# ---------------------------------------------------------------- replace_window


def load_replace_window(ctx: LoadContext) -> tuple[int, int]:
    """Delete the batch's window from the target, insert the staged rows; (inserted, deleted)."""
    load = ctx.request.load
    column = load.window_column or ""
    pg_type = ctx.column_type(column)
    if pg_type is None or column not in {c.name for c in ctx.staged_columns}:
        where = "target" if pg_type is None else "staged rows"
        raise LoadError(
            f"window_column {column!r} is not in the {where} of {ctx.qualified}",
            "fix `window_column`, or select that column in the transforms",
        )
    ident = sql.Identifier("t", column)
    window = ctx.request.window
    if window is None:  # the values the batch has (NULL is a value too)
        condition = sql.SQL(
            "EXISTS (SELECT 1 FROM {} s WHERE s.{} IS NOT DISTINCT FROM {})"
        ).format(ctx.staging_table, sql.Identifier(column), ident)
    else:
        parts: list[sql.Composable] = []
        for value, op in (
            (window.lo, ">=" if window.lo_inclusive else ">"),
            (window.hi, "<=" if window.hi_inclusive else "<"),
        ):
            if value is not None:
                parts.append(
                    sql.SQL("{} {} CAST({} AS {})").format(
                        ident, sql.SQL(op), sql.Literal(value), sql.SQL(pg_type)
                    )
                )
        condition = sql.SQL(" AND ").join(parts) if parts else _TRUE
        if window.nulls:
            condition = sql.SQL("(({}) OR {} IS NULL)").format(condition, ident)
        staged = _count(ctx, sql.SQL("SELECT count(*) FROM {}").format(ctx.staging_table))
        if staged == 0 and load.fail_on_empty_source:
            inside = _count(
                ctx, sql.SQL("SELECT count(*) FROM {} t WHERE {}").format(ctx.target, condition)
            )
            if inside:
                raise EmptySource(
                    f"the source has 0 rows in {window.describe()}; refusing to empty that "
                    f"window of {ctx.qualified} ({inside:,} rows)",
                    "if the window really is empty now, set `fail_on_empty_source = false` "
                    "in [pipeline.load]",
                )
    deleted = ctx.conn.execute(
        sql.SQL("DELETE FROM {} t WHERE {}").format(ctx.target, condition)
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
    from hakiri.spark.pg_reader import read_query

    load = request.load
    table = request.target_table
    key = load.key_columns if load.mode is LoadMode.SCD2 else list(load.upsert_key or ())
    conn = connect(url)  # one read-only session: the target's columns, its live rows' count
    try:
        conn.read_only = True
        [seen] = observe_targets(conn, [(schema, table)])
        if not seen.exists or (
            load.mode is LoadMode.SCD2 and load.is_current_column not in seen.column_names
        ):
            return None
        conditions = []
        if load.delete_scope is not None:
            conditions.append(sql.SQL(filter_for(load.delete_scope, dialect="postgres")))
        if load.mode is LoadMode.SCD2:
            conditions.append(sql.SQL("{}").format(sql.Identifier(load.is_current_column)))
        elif load.deletes == "soft" and load.deleted_at_column in seen.column_names:
            conditions.append(sql.SQL("{} IS NULL").format(sql.Identifier(load.deleted_at_column)))
        live = sql.SQL("SELECT {} FROM {} WHERE {}").format(
            _names(key),
            sql.Identifier(schema, table),
            sql.SQL(" AND ").join(conditions) if conditions else _TRUE,
        )
        doomed_query = live
        if load.mode is LoadMode.SCD2 and request.batch_time is not None:
            doomed_query = sql.SQL("{} AND {} <= {}").format(
                live, sql.Identifier(load.valid_from_column), sql.Literal(request.batch_time)
            )
        scoped = _count_of(conn, sql.SQL("SELECT count(*) FROM ({}) x").format(live))
        text = doomed_query.as_string(conn)
    finally:
        conn.close()
    types = dict(frame.dtypes)
    targets = read_query(frame.sparkSession, url, text, [(k, types[k]) for k in key])
    doomed = targets.join(frame.select(*key).distinct(), list(key), "left_anti").count()
    return doomed, scoped
