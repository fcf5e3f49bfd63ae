"""scd2, upsert's delete detection and replace_window in the context store: the queries of
`destinations/history/` (where each mode's semantics are written, once) rendered for Spark
SQL and run over temporary views of the staged Parquet and the Delta table, then ONE Delta
MERGE per batch with the batch's transaction identity.

The MERGE's source rows carry an action: `delete` (a history row that changes, a value of
the window), `close` (a current version whose key left the snapshot) and `insert`. Nothing
is collected to the driver: only counts (the delete guard's) and the MERGE's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sqlglot import exp

from hakiri.destinations.base import ChangeCount, LoadRequest
from hakiri.destinations.context.commit import delta_uri
from hakiri.destinations.context.merge import DeltaMerge
from hakiri.destinations.context.staging import read_parquet
from hakiri.destinations.context.txn import txn_session
from hakiri.destinations.context.writes import write_frame
from hakiri.destinations.delete_guard import check_deletes
from hakiri.destinations.history.changes import (
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
    column,
    count_rows,
    keys_equal,
    render,
    select_rows,
    timestamp,
)
from hakiri.destinations.history.scd2 import (
    HASH,
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
    batch_values,
    check_empty_window,
    check_window_column,
    range_predicate,
    same_value,
)
from hakiri.errors import LoadError
from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = [
    "count_changes",
    "count_deletes",
    "merge_replace_window",
    "merge_scd2",
    "merge_upsert_with_deletes",
]

_ACTION = "_hakiri_action"


def _spark(expression: exp.Expr) -> str:
    return render(expression, "spark")


def _action(query: exp.Select, action: str) -> exp.Select:
    """The query's rows as MERGE source rows doing `action`."""
    return query.select(exp.Literal.string(action).as_(_ACTION, quoted=True))


def _action_is(*actions: str) -> exp.Expr:
    return exp.column(_ACTION, table="s", quoted=True).isin(*map(exp.Literal.string, actions))


def _inserts(names: Sequence[str]) -> dict[str, str]:
    return {quoted_name(n): _spark(column(n, "s")) for n in names}


def _table(session: SparkSession, location: Path) -> DataFrame:
    return session.read.format("delta").load(delta_uri(location))


# ---------------------------------------------------------------- scd2


def merge_scd2(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    request: LoadRequest,
    metadata: dict[str, str],
    table_exists: bool,
) -> tuple[int, int]:
    """The staged versions into the history at `location` (created when missing); (history
    rows written, versions closed)."""
    from hakiri.spark.errors import spark_errors

    load = request.load
    key = load.key_columns
    name = str(location)
    session = txn_session(spark, request, metadata)
    staged_frame = read_parquet(session, files)
    with (
        spark_errors(f"placing the versions in the history at {location}", fallback=LoadError),
        TempViews(session) as views,
    ):
        table = _table(session, location) if table_exists else None
        columns = None if table is None else table.columns
        staged = views.add(staged_frame, "staged")
        check_key_columns(key, staged_frame.columns, columns, name, "key")
        check_null_keys(key, views.count(null_keys(key, staged)), name, "key")
        cols = history_columns(load, staged_frame.columns, columns, name)
        found = views.query(duplicate_versions(cols, staged)).collect()  # one row, if any
        check_duplicate_versions(cols, found[0] if found else None, name)
        new = views.define(staged_versions(cols, staged, "spark"), "new")
        if table is None:
            write_frame(
                views.query(history(cols, new, "spark")).drop(HASH),
                location,
                overwrite=False,
                request=request,
                metadata=metadata,
            )
            # The table is this commit's rows: counted from the files' footers.
            return _table(session, location).count(), 0

        target = views.add(table, "target")
        keys = views.define(affected_keys(cols, new, target, "spark"), "keys")
        result = views.define(history(cols, new, "spark", target, keys), "result")
        actions = [
            _action(new_versions(cols, target, keys, result, "spark"), "insert"),
            _action(stale_versions(cols, target, keys, result, "spark"), "delete"),
        ]
        closed = 0
        if load.detects_deletes:
            at = batch_time_of(request)
            live, absent = closing(cols, load, staged, at, "spark")
            closed = views.count(count_rows(target, absent))
            check_deletes(
                load,
                staged=views.count(count_rows(staged, exp.true())),
                doomed=closed,
                scoped=views.count(count_rows(target, live)),
                qualified=name,
                verb="close",
            )
            actions.append(_action(select_rows([*key, cols.valid_from], target, absent), "close"))
        source = views.query(actions[0])
        for query in actions[1:]:
            source = source.unionByName(views.query(query), allowMissingColumns=True)
        version = keys_equal([*key, cols.valid_from], "t", "s")
        merge = DeltaMerge(
            session, location, source, _spark(exp.and_(version, _action_is("delete", "close")))
        ).when_matched_delete(condition=_spark(_action_is("delete")))
        if load.detects_deletes:
            merge.when_matched_update(
                {
                    quoted_name(cols.valid_to): _spark(timestamp(at, "spark")),
                    quoted_name(cols.is_current): "FALSE",
                },
                condition=_spark(_action_is("close")),
            )
        merge.when_not_matched_insert(
            _inserts(cols.everything), condition=_spark(_action_is("insert"))
        )
        metrics = merge.execute()
    return metrics.get("num_inserted_rows", 0), closed if metrics else 0


# ---------------------------------------------------------------- upsert's deletes


def merge_upsert_with_deletes(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    key: Sequence[str],
    request: LoadRequest,
    metadata: dict[str, str],
) -> tuple[int, int]:
    """MERGE on the key: matched rows updated, new ones inserted, and the target rows in scope
    (not already soft-deleted) whose key the snapshot lacks deleted or marked deleted, after
    the guard; (rows inserted or updated, rows deleted or marked)."""
    from hakiri.spark.errors import spark_errors

    load = request.load
    name = str(location)
    session = txn_session(spark, request, metadata)
    staged_frame = read_parquet(session, files)
    names = staged_frame.columns
    with (
        spark_errors(f"merging into the Delta table at {location}", fallback=LoadError),
        TempViews(session) as views,
    ):
        table = _table(session, location)
        check_deleted_at(load, table.columns, name)
        staged, target = views.add(staged_frame, "staged"), views.add(table, "target")
        live = live_rows(load)
        doomed = views.count(count_rows(target, absent_rows(live, key, staged)))
        check_deletes(
            load,
            staged=views.count(count_rows(staged, exp.true())),
            doomed=doomed,
            scoped=views.count(count_rows(target, live)),
            qualified=name,
            verb=deletes_verb(load),
        )
        merge = DeltaMerge(session, location, staged_frame, _spark(keys_equal(key, "t", "s")))
        updated = [n for n in names if n not in key]
        if updated:
            merge.when_matched_update(_inserts(updated))
        merge.when_not_matched_insert(_inserts(names))
        if load.deletes == "hard":
            merge.when_not_matched_by_source_delete(condition=_spark(live))
        else:
            merge.when_not_matched_by_source_update(
                {
                    quoted_name(load.deleted_at_column): _spark(
                        timestamp(batch_time_of(request), "spark")
                    )
                },
                condition=_spark(live),
            )
        metrics = merge.execute()
    if not metrics:
        return 0, 0
    written = metrics.get("num_inserted_rows", 0) + metrics.get("num_updated_rows", 0)
    if load.deletes == "hard":
        return written, metrics.get("num_deleted_rows", 0)
    # Delta counts the rows marked deleted among the updated ones.
    return written - doomed, doomed


# ---------------------------------------------------------------- replace_window


def merge_replace_window(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    request: LoadRequest,
    metadata: dict[str, str],
) -> tuple[int, int]:
    """Delete the batch's window, insert the staged rows, as one MERGE; (inserted, deleted)."""
    from hakiri.spark.errors import spark_errors

    load = request.load
    name = load.window_column or ""
    session = txn_session(spark, request, metadata)
    staged_frame = read_parquet(session, files)
    names = staged_frame.columns
    with (
        spark_errors(f"replacing a window of the Delta table at {location}", fallback=LoadError),
        TempViews(session) as views,
    ):
        table = _table(session, location)
        kind = table.schema[name].dataType.simpleString() if name in table.columns else None
        kind = check_window_column(name, names, kind, str(location))
        staged = views.add(staged_frame, "staged")
        window = request.window
        if window is None:  # the values the batch has: each is a delete row of the MERGE
            source = views.query(
                _action(exp.select(exp.Star()).from_(staged), "insert")
            ).unionByName(
                views.query(_action(batch_values(name, staged), "delete")),
                allowMissingColumns=True,
            )
            merge = (
                DeltaMerge(
                    session,
                    location,
                    source,
                    _spark(exp.and_(same_value(name, "t", "s"), _action_is("delete"))),
                )
                .when_matched_delete()
                .when_not_matched_insert(_inserts(names), condition=_spark(_action_is("insert")))
            )
        else:
            inside = range_predicate(window, name, kind)
            target = views.add(table, "target")
            check_empty_window(
                load,
                window,
                staged_frame.limit(1).count(),
                lambda: views.count(count_rows(target, inside)),
                str(location),
            )
            merge = (
                DeltaMerge(session, location, staged_frame, "FALSE")
                .when_not_matched_insert(_inserts(names))
                .when_not_matched_by_source_delete(condition=_spark(inside))
            )
        metrics = merge.execute()
    return metrics.get("num_inserted_rows", 0), metrics.get("num_deleted_rows", 0)


# ---------------------------------------------------------------- plan's count


def count_deletes(
    spark: SparkSession, location: Path, frame: DataFrame, request: LoadRequest
) -> tuple[int, int] | None:
    """For `plan`: (rows the snapshot `frame` would delete or close, live rows in scope) of the
    Delta table at `location`; None when it does not exist yet."""
    from hakiri.destinations.context.inspect import is_delta_table

    if not is_delta_table(location):
        return None
    load = request.load
    key = snapshot_key(load)
    table = spark.read.format("delta").load(delta_uri(location))
    live = planned_live(load, table.columns)
    if live is None:
        return None
    doomed = planned_doomed(load, live, request.batch_time, "spark")
    with TempViews(spark) as views:
        target = views.add(table, "target")
        snapshot = views.add(frame.select(*map(quoted_name, key)).distinct(), "snapshot")
        gone = views.count(count_rows(target, absent_rows(doomed, key, snapshot)))
        return gone, views.count(count_rows(target, live))


def count_changes(
    spark: SparkSession, location: Path, frame: DataFrame, request: LoadRequest
) -> ChangeCount | None:
    """For `plan`: what the batch `frame` would insert, update, leave unchanged and delete in
    the Delta table at `location` (`history.changes`); None when it does not exist yet or has
    no key to match on."""
    from hakiri.destinations.context.inspect import is_delta_table

    if not is_delta_table(location):
        return None
    load = request.load
    table = spark.read.format("delta").load(delta_uri(location))
    cols = change_columns(load, frame.columns, table.columns)
    matched = matched_rows(load, table.columns)
    if cols is None or matched is None:
        return None
    live = planned_live(load, table.columns) if load.detects_deletes else None
    doomed = None if live is None else planned_doomed(load, live, request.batch_time, "spark")
    with TempViews(spark) as views:
        target = views.add(table, "target")
        rows = views.define(target_rows(cols, target, matched, doomed), "target_rows")
        batch = views.define(batch_rows(cols, views.add(frame, "batch")), "batch_rows")
        insert, update, unchanged, gone = views.counts(count_changes_query(cols, batch, rows))
        if live is None:
            return ChangeCount(insert, update, unchanged)
        return ChangeCount(insert, update, unchanged, gone, views.count(count_rows(target, live)))
