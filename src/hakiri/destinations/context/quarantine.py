"""The quarantine (dead-letter) table of the context store: a Delta table of rule violations.

Columns: id (a random UUID per record, from Spark's uuid()), pipeline_id, run_id,
node_id, rule_id, on_fail, dropped, row (the original row as JSON text),
batch_id, replayed_by (always NULL: replay into the context store is not
supported yet) and created_at (when the batch was staged). One record per (row,
rule it broke), as in PostgreSQL.

Spark turns the violations frame into these columns when the batch is staged,
so the commit only renames files into the table. The records are committed with
the batch's app transaction id, in a commit of their own just before the rows'
(Delta has no transaction across two tables): a retried batch finds its id in
the quarantine table's log and does not write its records twice.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.destinations.base import LoadRequest, QuarantinedRow
from hakiri.destinations.context.commit import delta_errors, live_files

if TYPE_CHECKING:
    from deltalake import DeltaTable
    from pyspark.sql import DataFrame

__all__ = ["QUARANTINE_COLUMNS", "quarantine_records", "read_quarantined"]

QUARANTINE_COLUMNS = (
    "id",
    "pipeline_id",
    "run_id",
    "node_id",
    "rule_id",
    "on_fail",
    "dropped",
    "row",
    "batch_id",
    "replayed_by",
    "created_at",
)


def quarantine_records(violations: DataFrame, request: LoadRequest, node_id: str) -> DataFrame:
    """The violations (rule_id, on_fail, dropped, row) in the quarantine table's columns."""
    from pyspark.sql import functions as F

    return violations.select(
        F.expr("uuid()").alias("id"),
        F.lit(request.pipeline_id).alias("pipeline_id"),
        F.lit(request.run_id).alias("run_id"),
        F.lit(node_id).alias("node_id"),
        F.col("rule_id").cast("string").alias("rule_id"),
        F.col("on_fail").cast("string").alias("on_fail"),
        F.col("dropped").cast("boolean").alias("dropped"),
        F.col("row").cast("string").alias("row"),
        F.lit(request.batch_id).alias("batch_id"),
        F.lit(None).cast("string").alias("replayed_by"),
        F.current_timestamp().alias("created_at"),
    )


def read_quarantined(
    table: DeltaTable,
    location: Path,
    pipeline_id: str,
    *,
    run_id: str | None = None,
    limit: int = 50,
) -> list[QuarantinedRow]:
    """Newest first (by created_at, then id). Only created_at is read for every matching record;
    whole records are read for the newest `limit` only."""
    import pyarrow.compute as pc
    import pyarrow.dataset as ds

    files = live_files(table, location)
    if not files or limit <= 0:
        return []
    with delta_errors(location, "read", reading=True):
        dataset = ds.dataset([str(f) for f in files], format="parquet")
        wanted = pc.field("pipeline_id") == pipeline_id
        if run_id is not None:
            wanted = wanted & (pc.field("run_id") == run_id)
        times = dataset.to_table(columns=["created_at"], filter=wanted).column("created_at")
        if len(times) == 0:
            return []
        if len(times) > limit:
            # top_k_unstable gives the indices of the `limit` newest; the oldest of those bounds the page.
            oldest_shown = pc.min(pc.take(times, pc.top_k_unstable(times, k=limit)))
            wanted = wanted & (pc.field("created_at") >= oldest_shown)
        page = (
            dataset.to_table(columns=list(QUARANTINE_COLUMNS), filter=wanted)
            .sort_by([("created_at", "descending"), ("id", "descending")])
            .slice(0, limit)
        )
    return [
        QuarantinedRow(
            id=record["id"],
            pipeline_id=record["pipeline_id"],
            run_id=record["run_id"],
            node_id=record["node_id"],
            rule_id=record["rule_id"],
            on_fail=record["on_fail"],
            dropped=bool(record["dropped"]),
            row=json.loads(record["row"]) if record["row"] is not None else {},
            created_at=record["created_at"],
            replayed_by=record["replayed_by"],
        )
        for record in page.to_pylist()
    ]
