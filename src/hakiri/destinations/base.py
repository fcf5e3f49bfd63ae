"""The destination interface: what an inspection reports, and how a batch is staged and committed.

Plain data and a Protocol; no I/O here."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

from hakiri.spec.load import LoadSpec


@dataclass(frozen=True)
class TargetColumn:
    name: str
    type: str  # the destination's type as it would be written in DDL: 'bigint', 'character varying(20)', 'text'
    nullable: bool = True


@dataclass(frozen=True)
class TargetObservation:
    """One target table as it is now."""

    table: str  # unqualified name
    schema: str | None  # PostgreSQL schema; None for the context store
    exists: bool
    columns: tuple[TargetColumn, ...] = ()
    primary_key: tuple[str, ...] = ()
    dependent_views: tuple[
        str, ...
    ] = ()  # qualified names of views (and materialized views) that read the table
    row_estimate: int | None = None  # from statistics; never a full count

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]


# ---------------------------------------------------------------- loading (used by the engine)


@dataclass(frozen=True)
class LoadRequest:
    """Everything a destination needs to commit one batch; built by the engine."""

    project: str
    pipeline_id: str
    run_id: str
    batch_id: str  # deterministic: recorded in the destination's ledger in the same transaction as the rows
    target_schema: str | None  # None for the context store
    target_table: str
    load: LoadSpec
    post_hook: Callable[[Any], None] | None = (
        None  # blue_green: runs inside the swap transaction, before the rename
    )


@dataclass(frozen=True)
class StagedBatch:
    """Rows of one batch written to a staging area in the destination, not yet visible in the target."""

    batch_id: str
    staging_schema: str | None
    staging_table: str
    rows: int
    columns: tuple[TargetColumn, ...]  # staged columns with destination types


@dataclass(frozen=True)
class LoadResult:
    rows_loaded: int  # rows the load mode inserted or updated in the target
    already_committed: bool = False  # the ledger already had this batch: nothing was written
    created_target: bool = False
    backup_table: str | None = None
    watermark: str | None = None  # incremental_watermark: the mark after this load


# A named point in the commit protocol; the engine passes a callback that may end
# the process there (HAKIRI_CRASH_AT) to prove exactly-once.
Checkpoint = Callable[[str], None]


class Destination(Protocol):
    """Stage a DataFrame, then commit it under a load spec in ONE destination transaction."""

    def stage(self, frame: Any, request: LoadRequest) -> StagedBatch:
        """Write the DataFrame's rows into a fresh staging table (Spark runs the write)."""
        ...

    def commit(
        self, staged: StagedBatch, request: LoadRequest, checkpoint: Checkpoint
    ) -> LoadResult:
        """Load mode + ledger row + watermark in one transaction, for this target; calls
        checkpoint('before_dest_commit') just before COMMIT and checkpoint('after_dest_commit') right
        after it; drops the staging table. A batch the ledger already has for this target returns
        `already_committed` without touching the target or calling the checkpoints."""
        ...

    def is_committed(self, request: LoadRequest) -> bool:
        """Is this batch id in the destination's load ledger for this target (committed earlier,
        maybe before a crash)?"""
        ...

    def discard(self, staged: StagedBatch) -> None:
        """Drop a staging table whose batch will not be committed."""
        ...
