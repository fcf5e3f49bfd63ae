"""Delta's MERGE INTO as SQL, built clause by clause like delta-spark's merge builder.

delta-spark's `DeltaTable` is a driver-side API: over Spark Connect it needs Delta's own
Connect plugin on the server, which is not published for this Spark. `MERGE INTO` is plain
SQL that Delta's session extension runs wherever the engine is, so hakiri's merges (upsert,
scd2, replace_window) are written as SQL: the source frame becomes a temporary view of the
merge's session for the one statement.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["DeltaMerge", "delta_table_sql", "merge_metrics"]


def delta_table_sql(location: Path) -> str:
    """The table at `location` as a Spark SQL table name: delta.`file:///...`."""
    uri = "file://" + str(location.resolve())
    return "delta." + quoted_name(uri)


class DeltaMerge:
    """MERGE INTO the Delta table at `location` (alias t) USING `source` (alias s) ON
    `condition`; clauses are SQL text, added in the order they are given, as Delta
    evaluates them."""

    def __init__(
        self, session: SparkSession, location: Path, source: DataFrame, condition: str
    ) -> None:
        self.session = session
        self.location = location
        self.source = source
        self.condition = condition
        self.clauses: list[str] = []
        # The same clauses for delta-rs: (kind, condition, assignments).
        self.parts: list[tuple[str, str | None, dict[str, str] | None]] = []

    def when_matched_update(
        self, assignments: Mapping[str, str], condition: str | None = None
    ) -> DeltaMerge:
        self.parts.append(("matched_update", condition, dict(assignments)))
        return self._add("WHEN MATCHED", condition, f"THEN UPDATE SET {_set(assignments)}")

    def when_matched_delete(self, condition: str | None = None) -> DeltaMerge:
        self.parts.append(("matched_delete", condition, None))
        return self._add("WHEN MATCHED", condition, "THEN DELETE")

    def when_not_matched_insert(
        self, values: Mapping[str, str], condition: str | None = None
    ) -> DeltaMerge:
        self.parts.append(("not_matched_insert", condition, dict(values)))
        columns = ", ".join(values)
        exprs = ", ".join(values.values())
        return self._add("WHEN NOT MATCHED", condition, f"THEN INSERT ({columns}) VALUES ({exprs})")

    def when_not_matched_by_source_delete(self, condition: str | None = None) -> DeltaMerge:
        self.parts.append(("not_matched_by_source_delete", condition, None))
        return self._add("WHEN NOT MATCHED BY SOURCE", condition, "THEN DELETE")

    def when_not_matched_by_source_update(
        self, assignments: Mapping[str, str], condition: str | None = None
    ) -> DeltaMerge:
        self.parts.append(("not_matched_by_source_update", condition, dict(assignments)))
        return self._add(
            "WHEN NOT MATCHED BY SOURCE", condition, f"THEN UPDATE SET {_set(assignments)}"
        )

    def execute(self) -> dict[str, int]:
        """Run the MERGE; Delta's metrics (num_inserted_rows, num_updated_rows,
        num_deleted_rows, ...), or {} when Delta skipped it because the session's transaction
        identity is already in the table's log.

        On an engine whose MERGE drops the transaction identity (Sail), the engine stages the
        source as Parquet and delta-rs runs the same clauses, carrying the identity the
        session was given (`commit.txn_session`)."""
        from hakiri.destinations.context.txn import commits_by_delta_rs, txn_of

        if commits_by_delta_rs(self.session):
            from hakiri.destinations.context.rs_commit import merge_frame

            identity = txn_of(self.session)
            if identity is None:
                raise ValueError("a delta-rs MERGE needs the batch's transaction identity")
            return merge_frame(self.source, self.location, self.condition, self.parts, identity)
        view = f"hakiri_merge_source_{uuid.uuid4().hex}"
        self.source.createOrReplaceTempView(view)
        try:
            statement = (
                f"MERGE INTO {delta_table_sql(self.location)} AS t USING {view} AS s "
                f"ON {self.condition} {' '.join(self.clauses)}"
            )
            return merge_metrics(self.session.sql(statement).collect())
        finally:
            self.session.catalog.dropTempView(view)

    def _add(self, when: str, condition: str | None, then: str) -> DeltaMerge:
        self.clauses.append(f"{when}{f' AND ({condition})' if condition else ''} {then}")
        return self


def merge_metrics(rows: list) -> dict[str, int]:  # type: ignore[type-arg]
    """A MERGE's metrics row as a dict of ints; {} for no row (the MERGE was skipped)."""
    if not rows:
        return {}
    return {k: int(v or 0) for k, v in rows[0].asDict().items()}


def _set(assignments: Mapping[str, str]) -> str:
    return ", ".join(f"{column} = {value}" for column, value in assignments.items())
