"""The context store's writes of a batch: ONE Delta commit each, carrying the batch's
transaction identity (`commit.app_id`). On Apache Spark delta-spark writes and merges in the
executors; on an engine whose Delta writer drops the identity (Sail) the same calls go to
delta-rs (`rs_commit`, `merge.DeltaMerge`), which carries it.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.context.commit import (
    TXN_VERSION,
    app_id,
    delta_uri,
    user_metadata,
)
from hakiri.destinations.context.staging import read_parquet
from hakiri.destinations.context.txn import commits_by_delta_rs, txn_session
from hakiri.errors import LoadError
from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

__all__ = ["merge_rows", "write_frame", "write_rows"]


def write_rows(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    *,
    overwrite: bool,
    request: LoadRequest,
    metadata: dict[str, str],
) -> None:
    """ONE commit by Delta's DataFrame writer, in the executors: the staged rows appended to the
    table (`overwrite`: in place of every row of the current version; either creates a missing
    table), with the batch's transaction identity, so Delta skips a retried batch by itself."""
    write_frame(
        read_parquet(spark, files),
        location,
        overwrite=overwrite,
        request=request,
        metadata=metadata,
    )


def write_frame(
    frame: Any,
    location: Path,
    *,
    overwrite: bool,
    request: LoadRequest,
    metadata: dict[str, str],
) -> None:
    """`write_rows` for rows already in a DataFrame (scd2's first history)."""
    from hakiri.spark.errors import spark_errors

    if commits_by_delta_rs(frame.sparkSession):
        from hakiri.destinations.context.rs_commit import append_frame

        append_frame(frame, location, overwrite=overwrite, request=request, metadata=metadata)
        return

    writer = (
        frame.write.format("delta")
        .mode("overwrite" if overwrite else "append")
        .option("txnAppId", app_id(request))
        .option("txnVersion", TXN_VERSION)
        .option("userMetadata", user_metadata(metadata))
    )
    with spark_errors(f"committing to the Delta table at {location}", fallback=LoadError):
        writer.save(delta_uri(location))


def merge_rows(
    spark: SparkSession,
    location: Path,
    files: Sequence[Path],
    key: Sequence[str],
    request: LoadRequest,
    metadata: dict[str, str],
    *,
    update: bool = True,
) -> int:
    """Delta's MERGE of the staged rows into the table on `key`, executed by Spark: a match gets
    every staged column (left alone without `update`), the rest is inserted. The rows inserted
    or updated.

    Table columns the staged files lack are left alone in matched rows and NULL in inserted
    ones; with nothing but the key staged, matched rows are not touched at all. The transaction
    identity and metadata of a MERGE can only be given as session settings, so it runs in a
    session of its own: concurrent chunk workers never see each other's."""
    from hakiri.destinations.context.merge import DeltaMerge
    from hakiri.spark.errors import spark_errors

    session = txn_session(spark, request, metadata)
    staged = read_parquet(session, files)
    names = staged.columns
    condition = " AND ".join(f"t.{quoted_name(k)} = s.{quoted_name(k)}" for k in key)
    with spark_errors(f"merging into the Delta table at {location}", fallback=LoadError):
        merge = DeltaMerge(session, location, staged, condition)
        updated = [n for n in names if n not in key] if update else []
        if updated:
            merge.when_matched_update({quoted_name(n): f"s.{quoted_name(n)}" for n in updated})
        merge.when_not_matched_insert({quoted_name(n): f"s.{quoted_name(n)}" for n in names})
        metrics = merge.execute()
    return metrics.get("num_inserted_rows", 0) + metrics.get("num_updated_rows", 0)
