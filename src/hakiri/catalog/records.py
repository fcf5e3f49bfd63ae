"""The rows the catalog hands out: small frozen records, no SQLAlchemy types."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    PLANNING = "planning"
    BACKFILLING = "backfilling"
    STREAMING = "streaming"
    RETIRED = "retired"


class RunStatus(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCESS = "success"
    FAILED = "failed"
    PARTIAL = "partial"


class BatchStatus(StrEnum):
    PENDING = "pending"
    PROCESSING = "processing"
    COMMITTED = "committed"
    FAILED = "failed"  # tried again by the next run
    # Terminal without loading: the file changed (superseded) or vanished (gone) before the
    # batch committed. Its content never reaches the target; the current content, if any, is
    # planned as a batch of its own.
    SUPERSEDED = "superseded"
    GONE = "gone"

    @property
    def unfinished(self) -> bool:
        """Work is left: pending, processing or failed (failed batches are retried)."""
        return self in (BatchStatus.PENDING, BatchStatus.PROCESSING, BatchStatus.FAILED)

    @property
    def queued(self) -> bool:
        """Waiting for a run to claim it: pending, or failed (tried again)."""
        return self in (BatchStatus.PENDING, BatchStatus.FAILED)

    @property
    def retired(self) -> bool:
        """Ended without loading (superseded, gone): the batch is history, never work."""
        return self in (BatchStatus.SUPERSEDED, BatchStatus.GONE)


@dataclass(frozen=True)
class PipelineState:
    pipeline_id: str
    spec_hash: str
    applied_spec: dict[str, Any]  # normalized spec as last applied (placeholders unexpanded)
    phase: Phase
    applied_at: datetime


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    pipeline_id: str
    started_at: datetime
    status: RunStatus
    ended_at: datetime | None = None
    row_count: int | None = None
    bytes: int | None = None
    error_kind: str | None = None
    error_msg: str | None = None
    trace_id: str | None = None
    quality: dict[str, Any] | None = (
        None  # rule counts, rows quarantined, validator results, warnings
    )
    trigger: str | None = None  # apply | schedule | event
    trigger_reason: str | None = None


@dataclass(frozen=True)
class ScheduleFire:
    """The latest schedule slot fired for a pipeline, and which serve process fired it."""

    pipeline_id: str
    slot: datetime
    fired_at: datetime
    holder: str
    started_at: datetime | None = None  # None: its run has not started (or its holder died)


@dataclass(frozen=True)
class NewBatch:
    """A unit of work to persist before any data moves."""

    batch_id: str  # deterministic: file content hash, or chunk (table, predicate, generation)
    table_name: str
    kind: str  # 'file' | 'chunk' | 'snapshot'
    file_path: str | None = None
    content_hash: str | None = None
    predicate: str | None = None
    generation: int = 0
    size_bytes: int | None = None


@dataclass(frozen=True)
class Retirement:
    """A queued batch that will never load as planned: its file changed (superseded) or
    vanished (gone) before it committed, with the reason people read in `status`."""

    batch_id: str
    status: BatchStatus  # SUPERSEDED or GONE
    reason: str


@dataclass(frozen=True)
class Batch:
    batch_id: str
    pipeline_id: str
    table_name: str
    kind: str
    status: BatchStatus
    attempt: int
    seq: int  # claim order within the pipeline
    file_path: str | None = None
    content_hash: str | None = None
    predicate: str | None = None
    generation: int = 0
    size_bytes: int | None = None
    holder: str | None = None
    lease_expires_at: datetime | None = None
    run_id: str | None = None
    rows: int | None = None
    error: str | None = None
    created_at: datetime | None = None
    started_at: datetime | None = None  # when the latest attempt was claimed
    committed_at: datetime | None = None


@dataclass(frozen=True)
class BatchCounts:
    pending: int = 0
    processing: int = 0
    committed: int = 0
    failed: int = 0
    superseded: int = 0
    gone: int = 0

    @property
    def total(self) -> int:
        return (
            self.pending
            + self.processing
            + self.committed
            + self.failed
            + self.superseded
            + self.gone
        )


@dataclass(frozen=True)
class Lease:
    """The outcome of asking for a pipeline lease: granted, or who holds it."""

    pipeline_id: str
    acquired: bool
    holder: str
    host: str
    since: datetime
    expires_at: datetime


@dataclass(frozen=True)
class SchemaEvent:
    pipeline_id: str
    table_name: str
    kind: str  # 'add_column', 'widen', 'rename', 'accept', ...
    detail: dict[str, Any] = field(default_factory=dict)
    run_id: str | None = None
    created_at: datetime | None = None
    event_id: int | None = None


@dataclass(frozen=True)
class Alert:
    severity: str  # 'info' | 'warning' | 'error'
    kind: str  # 'anomaly', 'validator', 'empty_source', ...
    message: str
    pipeline_id: str | None = None
    run_id: str | None = None
    created_at: datetime | None = None
    alert_id: int | None = None


@dataclass(frozen=True)
class Rewind:
    """`hakiri backfill rewind`: a window of a table loaded again, and why."""

    pipeline_id: str
    table_name: str
    range_from: str
    range_to: str
    reason: str
    generation: int
    chunks: int
    created_at: datetime | None = None
    rewind_id: int | None = None


@dataclass(frozen=True)
class TargetMark:
    """A managed target as hakiri left it after its last load (drift is what differs since)."""

    pipeline_id: str
    table_name: str
    target: str  # as plan shows it: 'public.orders'
    columns: tuple[tuple[str, str], ...]  # (name, type) in table order
    primary_key: tuple[str, ...]
    row_count: int | None  # None: the destination could not count them
    run_id: str | None = None
    marked_at: datetime | None = None
    alerted: str | None = None  # the drift serve last alerted about (its fingerprint)
    # Which table it was (`TargetObservation.identity`); None: marked before identities.
    identity: str | None = None


@dataclass(frozen=True)
class ViewDefinition:
    """A view as apply records it: what the manifest says, with the names its SQL reads."""

    name: str
    sql: str
    description: str | None
    reads: tuple[str, ...]


@dataclass(frozen=True)
class ViewRecord:
    """One recorded version of a view. Live while `dropped_at` is None; a replaced version
    has the time its successor was recorded, a dropped one the drop's."""

    name: str
    version: int  # 1, 2, … per name, never reused (a view dropped and defined again goes on)
    sql: str
    description: str | None
    sql_hash: str
    reads: tuple[str, ...]
    applied_at: datetime
    dropped_at: datetime | None = None
