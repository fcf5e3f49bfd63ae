"""scd2, upsert's delete detection and replace_window in the context store: each ONE Delta
MERGE, executed by Spark, with the batch's transaction identity.

The semantics are PostgreSQL's (`destinations/postgres/history.py` explains scd2 step by
step); here each step is a DataFrame, and the writes of a batch are one MERGE whose source
rows carry an action: `delete` (a history row that changes), `close` (a current version
whose key left the snapshot) and `insert` (a version the history lacks). Nothing is
collected to the driver: only counts (the delete guard's) and the MERGE's metrics.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.context.commit import delta_uri
from hakiri.destinations.context.merge import DeltaMerge
from hakiri.destinations.context.staging import read_parquet
from hakiri.destinations.context.txn import txn_session
from hakiri.destinations.context.writes import write_frame
from hakiri.destinations.delete_guard import check_deletes
from hakiri.errors import EmptySource, LoadError
from hakiri.guards.expressions import filter_for
from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession

__all__ = ["count_deletes", "merge_replace_window", "merge_scd2", "merge_upsert_with_deletes"]

_ACTION = "_hakiri_action"


def _scope(request: LoadRequest) -> Column:
    """`delete_scope` as a Column over the target's rows (TRUE without one)."""
    from pyspark.sql import functions as F

    return F.expr(_scope_sql(request, None))


def _batch_time(request: LoadRequest) -> Column:
    from pyspark.sql import functions as F

    return F.lit(_batch_time_text(request)).cast("timestamp")


def _batch_time_sql(request: LoadRequest) -> str:
    return f"CAST('{_batch_time_text(request)}' AS TIMESTAMP)"


def _batch_time_text(request: LoadRequest) -> str:
    if request.batch_time is None:
        raise LoadError(
            f"batch {request.batch_id} has no batch time", "apply again to re-read the batch"
        )
    return request.batch_time.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")


def _keys_equal(key: Sequence[str], left: str, right: str) -> Column:
    from pyspark.sql import functions as F

    condition = F.lit(True)
    for k in key:
        condition = condition & (
            F.col(f"{left}.{quoted_name(k)}") == F.col(f"{right}.{quoted_name(k)}")
        )
    return condition


def _condition(key: Sequence[str], left: str, right: str) -> str:
    return " AND ".join(f"{left}.{quoted_name(k)} = {right}.{quoted_name(k)}" for k in key)


def _check_key(frame: DataFrame, key: Sequence[str], location: Path, what: str) -> None:
    from pyspark.sql import functions as F

    missing = [k for k in key if k not in frame.columns]
    if missing:
        raise LoadError(
            f"{what} column {missing[0]!r} is not among the staged columns for {location}",
            "fix the key in [pipeline.load], or select that column in the transforms",
        )
    any_null = F.lit(False)
    for k in key:
        any_null = any_null | F.col(quoted_name(k)).isNull()
    nulls = frame.where(any_null).count()
    if nulls:
        raise LoadError(
            f"{what} {list(key)} is NULL in {nulls:,} staged rows for {location}",
            "filter those rows out or fill the key in a transform: a NULL key is no record",
        )


def _hash(columns: Sequence[str]) -> Column:
    from pyspark.sql import functions as F

    if not columns:
        return F.lit("")
    return F.sha2(F.to_json(F.struct(*[F.col(quoted_name(c)) for c in columns])), 256)


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
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    load = request.load
    key = load.key_columns
    vf, vt, cur = load.valid_from_column, load.valid_to_column, load.is_current_column
    session = txn_session(spark, request, metadata)
    staged = read_parquet(session, files)
    with spark_errors(f"placing the versions in the history at {location}", fallback=LoadError):
        _check_key(staged, key, location, "key")
        columns = [c for c in staged.columns if c not in (vf, vt, cur)]
        tracked = list(load.track) if load.track else [c for c in columns if c not in key]
        unknown = [t for t in tracked if t not in columns]
        if unknown:
            raise LoadError(
                f"track names {unknown[0]!r}, which is not a staged column for {location}",
                "fix `track`, or leave it out to track every non-key column",
            )
        duplicate = staged.groupBy(*[quoted_name(c) for c in (*key, vf)]).count().where("count > 1")
        if duplicate.limit(1).count():
            raise LoadError(
                f"the staged rows for {location} hold several versions of one key that start "
                "at the same time",
                "deduplicate the rows in a transform, or declare `change_time_column` so each "
                "version has its own start",
            )
        new = staged.select(*[quoted_name(c) for c in (*columns, vf)]).withColumn(
            "_h", _hash(tracked)
        )
        if not table_exists:
            history = _history(new.withColumn("_src", F.lit(1)), key, columns, vf, vt, cur)
            write_frame(
                history.drop("_h"), location, overwrite=False, request=request, metadata=metadata
            )
            # The table is this commit's rows: counted from the files' footers.
            return session.read.format("delta").load(delta_uri(location)).count(), 0

        table = session.read.format("delta").load(delta_uri(location))
        rows = staged.count()
        at = _batch_time(request)
        current = table.where(F.col(quoted_name(cur)))
        closing = None
        closed_count = 0
        if load.detects_deletes:
            scoped = current.where(_scope(request))
            closing = scoped.where(F.col(quoted_name(vf)) <= at).join(
                staged.select(*[quoted_name(k) for k in key]), list(key), "left_anti"
            )
            closed_count = closing.count()
            check_deletes(
                load,
                staged=rows,
                doomed=closed_count,
                scoped=scoped.count(),
                qualified=str(location),
                verb="close",
            )
        # The keys this batch changes: a staged version that is not the current one again.
        affected = (
            new.alias("n")
            .join(
                current.withColumn("_h", _hash(tracked)).alias("t"),
                _keys_equal(key, "n", "t")
                & (F.col(f"t.{quoted_name(vf)}") <= F.col(f"n.{quoted_name(vf)}"))
                & (F.col("t._h") == F.col("n._h")),
                "left_anti",
            )
            .select(*[F.col(f"n.{quoted_name(k)}").alias(k) for k in key])
            .distinct()
        )
        old = table.join(affected, list(key), "left_semi").withColumn("_h", _hash(tracked))
        window = Window.partitionBy(*[quoted_name(k) for k in key]).orderBy(quoted_name(vf))
        old = old.withColumn("_next", F.lead(quoted_name(vf)).over(window))
        events_old = old.select(
            *[quoted_name(c) for c in columns], quoted_name(vf), "_h"
        ).withColumn("_src", F.lit(0))
        gaps = (
            old.where(
                F.col(quoted_name(vt)).isNotNull()
                & (F.col("_next").isNull() | (F.col("_next") != F.col(quoted_name(vt))))
            )
            .select(
                *[
                    F.col(quoted_name(c))
                    if c in key
                    else F.lit(None).cast(old.schema[c].dataType).alias(c)
                    for c in columns
                ],
                F.col(quoted_name(vt)).alias(vf),
                F.lit(None).cast("string").alias("_h"),
            )
            .withColumn("_src", F.lit(0))
        )
        incoming = new.join(affected, list(key), "left_semi").withColumn("_src", F.lit(1))
        result = _history(
            events_old.unionByName(
                gaps.withColumn("_gap", F.lit(True)), allowMissingColumns=True
            ).unionByName(incoming, allowMissingColumns=True),
            key,
            columns,
            vf,
            vt,
            cur,
        )
        identical = (
            old.alias("t")
            .join(
                result.alias("r"),
                _keys_equal(key, "t", "r")
                & (F.col(f"t.{quoted_name(vf)}") == F.col(f"r.{quoted_name(vf)}"))
                & F.col(f"t.{quoted_name(vt)}").eqNullSafe(F.col(f"r.{quoted_name(vt)}"))
                & (F.col("t._h") == F.col("r._h")),
                "left_semi",
            )
            .select(*[quoted_name(k) for k in key], quoted_name(vf))
        )
        deletes = (
            old.select(*[quoted_name(k) for k in key], quoted_name(vf))
            .join(identical, [*key, vf], "left_anti")
            .withColumn(_ACTION, F.lit("delete"))
        )
        inserts = result.join(identical, [*key, vf], "left_anti").drop("_h")
        inserts = inserts.withColumn(_ACTION, F.lit("insert"))
        source = inserts.unionByName(deletes, allowMissingColumns=True)
        if closing is not None:
            source = source.unionByName(
                closing.select(*[quoted_name(k) for k in key], quoted_name(vf)).withColumn(
                    _ACTION, F.lit("close")
                ),
                allowMissingColumns=True,
            )
        everything = [*columns, vf, vt, cur]
        merge = (
            DeltaMerge(
                session,
                location,
                source,
                f"{_condition(key, 't', 's')} AND t.{quoted_name(vf)} = s.{quoted_name(vf)} "
                f"AND s.{_ACTION} IN ('delete', 'close')",
            )
            .when_matched_delete(condition=f"s.{_ACTION} = 'delete'")
            .when_matched_update(
                {quoted_name(vt): _batch_time_sql(request), quoted_name(cur): "FALSE"},
                condition=f"s.{_ACTION} = 'close'",
            )
            .when_not_matched_insert(
                {quoted_name(c): f"s.{quoted_name(c)}" for c in everything},
                condition=f"s.{_ACTION} = 'insert'",
            )
        )
        metrics = merge.execute()
    return metrics.get("num_inserted_rows", 0), closed_count if metrics else 0


def _history(
    events: DataFrame, key: Sequence[str], columns: Sequence[str], vf: str, vt: str, cur: str
) -> DataFrame:
    """Events (versions with `_h`, gaps with `_gap`) -> the versions with their ends."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    if "_gap" not in events.columns:
        events = events.withColumn("_gap", F.lit(False))
    events = events.withColumn("_gap", F.coalesce(F.col("_gap"), F.lit(False)))
    keys = [quoted_name(k) for k in key]
    at = quoted_name(vf)
    one = Window.partitionBy(*keys, at).orderBy(F.col("_src").desc())
    ordered = Window.partitionBy(*keys).orderBy(at)
    events = events.withColumn("_rank", F.row_number().over(one)).where("_rank = 1")
    events = events.withColumn("_prev_gap", F.lag("_gap").over(ordered)).withColumn(
        "_prev_h", F.lag("_h").over(ordered)
    )
    first = F.col("_prev_gap").isNull()
    kept = events.where(
        ~(~F.col("_gap") & ~first & ~F.col("_prev_gap") & (F.col("_prev_h") == F.col("_h")))
        & ~(F.col("_gap") & (first | F.col("_prev_gap")))
    )
    timed = kept.withColumn("_end", F.lead(at).over(ordered)).where(~F.col("_gap"))
    return timed.select(
        *[quoted_name(c) for c in columns],
        F.col(at),
        F.col("_end").alias(vt),
        F.col("_end").isNull().alias(cur),
        "_h",
    )


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
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    load = request.load
    session = txn_session(spark, request, metadata)
    staged = read_parquet(session, files)
    names = staged.columns
    with spark_errors(f"merging into the Delta table at {location}", fallback=LoadError):
        table = session.read.format("delta").load(delta_uri(location))
        live = _scope(request)
        if load.deletes == "soft":
            if load.deleted_at_column not in table.columns:
                raise LoadError(
                    f"the Delta table at {location} has no column {load.deleted_at_column!r}",
                    "apply again: hakiri adds it with the staged rows",
                )
            live = live & F.col(quoted_name(load.deleted_at_column)).isNull()
        scoped = table.where(live)
        doomed = scoped.join(staged.select(*[quoted_name(k) for k in key]), list(key), "left_anti")
        verb = "delete" if load.deletes == "hard" else "mark deleted"
        doomed_rows = doomed.count()
        check_deletes(
            load,
            staged=staged.count(),
            doomed=doomed_rows,
            scoped=scoped.count(),
            qualified=str(location),
            verb=verb,
        )
        condition = _scope_sql(request, "t")
        if load.deletes == "soft":
            condition = f"({condition}) AND t.{quoted_name(load.deleted_at_column)} IS NULL"
        merge = DeltaMerge(session, location, staged, _condition(key, "t", "s"))
        updated = [n for n in names if n not in key]
        if updated:
            merge.when_matched_update({quoted_name(n): f"s.{quoted_name(n)}" for n in updated})
        merge.when_not_matched_insert({quoted_name(n): f"s.{quoted_name(n)}" for n in names})
        if load.deletes == "hard":
            merge.when_not_matched_by_source_delete(condition=condition)
        else:
            merge.when_not_matched_by_source_update(
                {quoted_name(load.deleted_at_column): _batch_time_sql(request)},
                condition=condition,
            )
        metrics = merge.execute()
    if not metrics:
        return 0, 0
    written = metrics.get("num_inserted_rows", 0) + metrics.get("num_updated_rows", 0)
    if load.deletes == "hard":
        return written, metrics.get("num_deleted_rows", 0)
    # Delta counts the rows marked deleted among the updated ones.
    return written - doomed_rows, doomed_rows


def _scope_sql(request: LoadRequest, alias: str | None) -> str:
    """`delete_scope` in Spark SQL (NULL counts as outside), every column qualified by the
    target's alias when given (a MERGE condition must not read the source's column of the
    same name); TRUE without one."""
    scope = request.load.delete_scope
    if scope is None:
        return "TRUE"
    return f"COALESCE({filter_for(scope, dialect='spark', alias=alias)}, FALSE)"


# ---------------------------------------------------------------- replace_window


def merge_replace_window(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    request: LoadRequest,
    metadata: dict[str, str],
) -> tuple[int, int]:
    """Delete the batch's window, insert the staged rows, as one MERGE; (inserted, deleted)."""
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    load = request.load
    column = load.window_column or ""
    session = txn_session(spark, request, metadata)
    staged = read_parquet(session, files)
    names = staged.columns
    if column not in names:
        raise LoadError(
            f"window_column {column!r} is not among the staged columns for {location}",
            "fix `window_column`, or select that column in the transforms",
        )
    name = quoted_name(column)
    with spark_errors(f"replacing a window of the Delta table at {location}", fallback=LoadError):
        table = session.read.format("delta").load(delta_uri(location))
        inserts = {quoted_name(n): f"s.{quoted_name(n)}" for n in names}
        window = request.window
        if window is None:  # the values the batch has: each is a delete row of the MERGE
            doomed = staged.select(name).distinct().withColumn(_ACTION, F.lit("delete"))
            source = staged.withColumn(_ACTION, F.lit("insert")).unionByName(
                doomed, allowMissingColumns=True
            )
            merge = (
                DeltaMerge(
                    session, location, source, f"t.{name} <=> s.{name} AND s.{_ACTION} = 'delete'"
                )
                .when_matched_delete()
                .when_not_matched_insert(inserts, condition=f"s.{_ACTION} = 'insert'")
            )
        else:
            kind = table.schema[column].dataType.simpleString()
            parts = []
            for value, op in (
                (window.lo, ">=" if window.lo_inclusive else ">"),
                (window.hi, "<=" if window.hi_inclusive else "<"),
            ):
                if value is not None:
                    literal = "'" + value.replace("'", "''") + "'"
                    parts.append(f"t.{name} {op} CAST({literal} AS {kind})")
            inside = " AND ".join(parts) or "TRUE"
            if window.nulls:
                inside = f"(({inside}) OR t.{name} IS NULL)"
            if load.fail_on_empty_source and staged.limit(1).count() == 0:
                rows = table.alias("t").where(F.expr(inside)).count()
                if rows:
                    raise EmptySource(
                        f"the source has 0 rows in {window.describe()}; refusing to empty that "
                        f"window of {location} ({rows:,} rows)",
                        "if the window really is empty now, set `fail_on_empty_source = false` "
                        "in [pipeline.load]",
                    )
            merge = (
                DeltaMerge(session, location, staged, "FALSE")
                .when_not_matched_insert(inserts)
                .when_not_matched_by_source_delete(condition=inside)
            )
        metrics = merge.execute()
    return metrics.get("num_inserted_rows", 0), metrics.get("num_deleted_rows", 0)


# ---------------------------------------------------------------- plan's count


def count_deletes(
    spark: SparkSession, location: Path, frame: DataFrame, request: LoadRequest
) -> tuple[int, int] | None:
    """For `plan`: (rows the snapshot `frame` would delete or close, live rows in scope) of the
    Delta table at `location`; None when it does not exist yet."""
    from pyspark.sql import functions as F

    from hakiri.destinations.context.inspect import is_delta_table
    from hakiri.spec.load import LoadMode

    if not is_delta_table(location):
        return None
    load = request.load
    key = load.key_columns if load.mode is LoadMode.SCD2 else list(load.upsert_key or ())
    table = spark.read.format("delta").load(delta_uri(location))
    live = table.where(_scope(request))
    if load.mode is LoadMode.SCD2:
        if load.is_current_column not in table.columns:
            return None
        live = live.where(F.col(quoted_name(load.is_current_column)))
    elif load.deletes == "soft" and load.deleted_at_column in table.columns:
        live = live.where(F.col(quoted_name(load.deleted_at_column)).isNull())
    doomed = live
    if load.mode is LoadMode.SCD2 and request.batch_time is not None:
        doomed = doomed.where(F.col(quoted_name(load.valid_from_column)) <= _batch_time(request))
    keys = [quoted_name(k) for k in key]
    missing = doomed.select(*keys).join(frame.select(*keys).distinct(), list(key), "left_anti")
    return missing.count(), live.count()
