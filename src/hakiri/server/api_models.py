"""The documents serve's HTTP API reads and writes, as pydantic models, so /openapi.json is exact.

The pipeline and run documents are those of `hakiri status --json` and `hakiri runs --json`
(built by hakiri.services.status); the models describe them and check them on the way out:
`extra="forbid"` makes a key added to the services without a model here fail loudly in tests.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hakiri.catalog.records import Phase, RunStatus

# The services render datetimes with isoformat(); the API passes those strings on unchanged.
Timestamp = Annotated[str, Field(json_schema_extra={"format": "date-time"})]


class Document(BaseModel):
    model_config = ConfigDict(extra="forbid")


class ErrorBody(Document):
    """Every 4xx and 5xx answer."""

    error: str = Field(description="What went wrong.")
    hint: str = Field(description="What to do about it.")


class Health(Document):
    status: Literal["ok"]


class Readiness(Document):
    ready: bool = Field(description="True when both the catalog and Spark are up.")
    catalog: bool = Field(description="The catalog database answers.")
    spark: bool = Field(description="The process's SparkSession is up.")
    reload_error: str | None = Field(
        None,
        description="Present when the last manifest edit did not validate; "
        "the previous version stays in force.",
    )
    failing: dict[str, str] | None = Field(
        None,
        description="What keeps failing now, with its last message: `tick` (the scheduler, "
        "e.g. the catalog is down) or a pipeline id (its runs, e.g. its destination is down). "
        "Cleared when it recovers.",
    )


class RunDocument(Document):
    """One run, as `hakiri runs --json` prints it."""

    run_id: str
    pipeline_id: str
    started_at: Timestamp = Field(description="When the run started, or was requested.")
    status: RunStatus
    ended_at: Timestamp | None
    row_count: int | None
    bytes: int | None
    error_kind: str | None
    error_msg: str | None
    trace_id: str | None
    quality: dict[str, Any] | None = Field(
        description="Rule counts, rows quarantined, validator results, warnings."
    )
    trigger: str | None = Field(description="apply, schedule or event.")
    trigger_reason: str | None
    duration_seconds: float | None


class Chunks(Document):
    done: int
    running: int
    pending: int
    failed: int
    superseded: int = Field(description="Ended unloaded: the file changed before it committed.")
    gone: int = Field(description="Ended unloaded: the file vanished before it committed.")
    total: int


class LastError(Document):
    run_id: str
    at: Timestamp
    kind: str | None = Field(description="The error's class, e.g. DestinationUnreachable.")
    message: str | None


class RetiredBatch(Document):
    batch_id: str
    file: str | None
    status: Literal["superseded", "gone"]
    reason: str | None


class Throughput(Document):
    rows_per_sec: float
    bytes_per_sec: float | None


class PipelineStatus(Document):
    """One pipeline, as `hakiri status ID --json` prints it."""

    pipeline_id: str
    phase: Phase | None = Field(description="Null until the pipeline is first applied.")
    applied_at: Timestamp | None
    chunks: Chunks
    throughput: Throughput | None = Field(description="Of the latest run.")
    eta_seconds: int | None = Field(description="While the latest run is running.")
    started_at: Timestamp | None = Field(description="When the current backfill started.")
    rate_budget: str | None = Field(description="e.g. 60/min")
    last_error: LastError | None = Field(
        description="The newest failed run's error, also of an attempt that failed before any "
        "batch started (a refused connection, a missing secret, a lease held elsewhere)."
    )
    retired: list[RetiredBatch] = Field(
        description="The latest batches (up to 5) that ended superseded or gone, with why."
    )
    warnings: list[str] = Field(
        description="Standing problems, e.g. a files source whose path never matched a file."
    )
    last_runs: list[RunDocument] = Field(description="Up to 5, newest first.")
    cursors: dict[str, dict[str, Any]] = Field(description="Table -> cursor state.")
    cdc: dict[str, Any] | None = Field(
        None,
        description="cdc_mirror pipelines: the lag behind the source's WAL (slot, applied_to, "
        "behind_bytes, behind_seconds, retained_bytes), or {error} when the source cannot "
        "be asked.",
    )
    drift: list[dict[str, Any]] | dict[str, str] | None = Field(
        None,
        description="Targets changed by hand since hakiri last loaded them (columns added, "
        "dropped or retyped, the primary key, rows added or deleted), one document each "
        "with a message; {error} when the targets cannot be inspected now.",
    )


class AlertDocument(Document):
    """One alert, as `hakiri alerts --json` prints it."""

    id: int
    severity: str = Field(description="info, warning or error.")
    kind: str = Field(description="anomaly, validator, empty_source, ...")
    pipeline_id: str | None
    run_id: str | None
    message: str
    created_at: Timestamp


class RunRequest(Document):
    """The optional body of an event trigger."""

    reason: str | None = Field(
        None, max_length=500, description="Why the run was asked for; kept with the run."
    )


class RunRequested(Document):
    run_id: str
    pipeline_id: str
    status: Literal["pending"]


class QueryRequest(Document):
    """A read-only query over the context store's tables and the project's views."""

    sql: str = Field(
        min_length=1,
        max_length=60_000,
        description="One Spark SQL query, as `hakiri query` takes it (`orders@v3` time-travels).",
    )
    limit: int | None = Field(
        None,
        ge=0,
        description="At most this many rows; [serve] query_max_rows caps it (default: the cap).",
    )


class QueryColumn(Document):
    name: str
    type: str = Field(description="The column's type in Spark's words (long, string, timestamp…).")


class QueryAnswer(Document):
    """The result, as `hakiri query --format json` prints it."""

    columns: list[QueryColumn]
    rows: list[list[Any]] = Field(description="One array per row, in the columns' order.")
    row_count: int
    truncated: bool = Field(description="True when the limit (or the server's cap) cut the result.")
