"""cdc_mirror in the context store: a batch's net changes applied by key as ONE Delta MERGE
carrying the batch's transaction identity (`txn.txn_session`; on an engine whose MERGE drops
it, delta-rs runs the same clauses: `merge.DeltaMerge`).

The staged rows hold one row per changed key (`sources.cdc.changes`) with the two control
columns of `spec.modes.cdc_mirror`: the op, and the columns whose values the WAL left out.
The MERGE does what PostgreSQL's three statements do (`postgres.mirror`): a matched 'd'
deletes the key; a matched 'u' sets every other column to the staged value, except a column
left out, which keeps the target's; an unmatched 'u' is inserted; an unmatched 'd' is nothing
to do; a snapshot batch also deletes the keys it lacks. The control columns never reach the table, not even when the batch creates it.

Which columns were left out is a JSON list; the engine turns it into one flag per column in
the MERGE's source, so the clauses are plain SQL that delta-spark and delta-rs both run.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.context.commit import delta_uri
from hakiri.destinations.context.merge import DeltaMerge
from hakiri.destinations.context.staging import read_parquet
from hakiri.destinations.context.txn import txn_session
from hakiri.destinations.context.writes import write_frame
from hakiri.errors import LoadError
from hakiri.guards.spark_types import quoted_name
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN, is_snapshot

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["mirror_changes"]

_KEEP = "_hakiri_cdc_keep_{}"  # the MERGE source's flag: value column i keeps the target's


def mirror_changes(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    key: Sequence[str],
    request: LoadRequest,
    metadata: dict[str, str],
    table_exists: bool,
) -> tuple[int, int]:
    """The staged changes applied to the Delta table at `location` (created from the
    changes' rows when missing); (rows inserted or updated, rows deleted)."""
    from pyspark.sql import functions as F

    from hakiri.spark.errors import spark_errors

    session = txn_session(spark, request, metadata)
    staged = read_parquet(session, files)
    names = [n for n in staged.columns if n not in (OP_COLUMN, UNCHANGED_COLUMN)]
    upserts = F.col(OP_COLUMN) == F.lit("u")
    with spark_errors(f"mirroring changes into the Delta table at {location}", fallback=LoadError):
        if not table_exists:  # nothing to match: the keys that exist become the table
            write_frame(
                staged.where(upserts).select(*map(quoted_name, names)),
                location,
                overwrite=False,
                request=request,
                metadata=metadata,
            )
            # The new table holds this commit's rows and nothing else.
            return session.read.format("delta").load(delta_uri(location)).count(), 0
        values = [n for n in names if n not in key]
        source = _with_keep_flags(staged, values)
        condition = " AND ".join(f"t.{quoted_name(k)} = s.{quoted_name(k)}" for k in key)
        op = f"s.{quoted_name(OP_COLUMN)}"
        merge = DeltaMerge(session, location, source, condition)
        merge.when_matched_delete(condition=f"{op} = 'd'")
        if values:  # a table of key columns only has nothing to update
            merge.when_matched_update(
                {
                    quoted_name(n): (
                        f"CASE WHEN s.{quoted_name(_KEEP.format(i))} THEN t.{quoted_name(n)} "
                        f"ELSE s.{quoted_name(n)} END"
                    )
                    for i, n in enumerate(values)
                },
                condition=f"{op} = 'u'",
            )
        merge.when_not_matched_insert(
            {quoted_name(n): f"s.{quoted_name(n)}" for n in names}, condition=f"{op} = 'u'"
        )
        if is_snapshot(request.batch_id):  # the whole table: a key it lacks is gone
            merge.when_not_matched_by_source_delete()
        metrics = merge.execute()
    written = metrics.get("num_inserted_rows", 0) + metrics.get("num_updated_rows", 0)
    return written, metrics.get("num_deleted_rows", 0)


def _with_keep_flags(staged: DataFrame, values: Sequence[str]) -> DataFrame:
    """The staged rows with a boolean per value column (in `values` order): is it one the WAL
    left out? The JSON list itself is dropped: the MERGE reads only the flags."""
    from pyspark.sql import functions as F

    left_out = F.from_json(F.col(UNCHANGED_COLUMN), "array<string>")
    flags = [
        F.coalesce(F.array_contains(left_out, name), F.lit(False)).alias(_KEEP.format(i))
        for i, name in enumerate(values)
    ]
    return staged.select("*", *flags).drop(UNCHANGED_COLUMN)
