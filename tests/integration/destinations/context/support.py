"""Helpers for the context-store load tests: requests, a destination on a tmp store, and looks at Delta tables.

Rows are read back with delta-rs (`DeltaTable`), never through the destination
under test, and sorted so tests do not depend on file order.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from deltalake import DeltaTable
from pyspark.sql import DataFrame, SparkSession

from hakiri.destinations.base import LoadRequest, LoadResult, QuarantineTable
from hakiri.destinations.context.client import ContextDestination
from hakiri.destinations.context.commit import commit_metadata
from hakiri.quality.rules import RuleCheck
from hakiri.spec.load import LoadMode, LoadSpec
from hakiri.spec.quality import DatasetValidator, RowRule
from tests.support.context_store import as_a_source_reads

PROJECT = "shop"
PIPELINE = "orders_pipe"


def destination(store: Path, spark: SparkSession) -> ContextDestination:
    return ContextDestination(store, lambda: spark)


def request(
    table: str,
    mode: str | LoadMode = LoadMode.APPEND,
    *,
    batch: str = "batch-1",
    run: str = "run-1",
    pipeline: str = PIPELINE,
    quarantine: QuarantineTable | None = None,
    validators: Sequence[DatasetValidator] = (),
    **load: Any,
) -> LoadRequest:
    return LoadRequest(
        project=PROJECT,
        pipeline_id=pipeline,
        run_id=run,
        batch_id=batch,
        target_schema=None,
        target_table=table,
        load=LoadSpec(mode=LoadMode(mode), **load),
        validators=tuple(validators),
        quarantine=quarantine,
    )


def frame(spark: SparkSession, ddl: str, rows: Sequence[Sequence[Any]]) -> DataFrame:
    """The rows, typed as a source's read types them (`as_a_source_reads`)."""
    return as_a_source_reads(spark.createDataFrame([tuple(r) for r in rows], ddl))


def load(
    dest: ContextDestination,
    rows: DataFrame,
    req: LoadRequest,
    *,
    rules: Sequence[RowRule] = (),
    checkpoint: Any = None,
) -> LoadResult:
    """stage + commit, as the engine does (the row rules judged between the two)."""
    checked = RuleCheck(rows, rules, label="the test batch")
    try:
        staged = dest.stage(checked, req)
        checked.finish()
        return dest.commit(staged, req, checkpoint or no_checkpoint)
    finally:
        checked.release()


def table_rows(path: Path, version: int | None = None) -> list[dict[str, Any]]:
    """Every row of the Delta table (at `version`), sorted by its values (NULLs first)."""
    found = DeltaTable(str(path), version=version).to_pyarrow_table().to_pylist()
    return sorted(found, key=lambda r: tuple((v is not None, v) for v in r.values()))


def version_of(path: Path) -> int:
    return DeltaTable(str(path)).version()


def history_of(path: Path) -> list[dict[str, Any]]:
    """The table's commits, oldest first, with hakiri's metadata (`userMetadata`) as keys."""
    entries = [{**e, **commit_metadata(e)} for e in DeltaTable(str(path)).history()]
    return sorted(entries, key=lambda e: e["version"])


def files_in(path: Path) -> list[str]:
    """Data files in the table directory, committed or not."""
    return sorted(p.name for p in path.glob("*.parquet"))


def staging_dirs(store: Path) -> list[str]:
    staging = store / "_staging"
    return sorted(p.name for p in staging.iterdir()) if staging.is_dir() else []


def no_checkpoint(name: str) -> None:
    del name


class Recorder:
    """A checkpoint that records the points it passes and may raise at one of them."""

    def __init__(self, raise_at: str | None = None) -> None:
        self.seen: list[str] = []
        self.raise_at = raise_at

    def __call__(self, name: str) -> None:
        self.seen.append(name)
        if name == self.raise_at:
            raise Crash(name)


class Crash(Exception):
    pass
