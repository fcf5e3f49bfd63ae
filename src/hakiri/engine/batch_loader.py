"""One batch, exactly once: read -> transforms -> schema guard -> rules -> stage -> commit -> mark.

The batch was persisted in the catalog and claimed by the caller (`engine.runner`).
Spark reads and stages it; the destination commits rows + ledger row (+ watermark) in
one transaction; only then does the catalog mark it committed ("Exactly-once across
two databases" in the design brief). A failure marks the batch failed and propagates; a
crash at any named point (`engine.crash`) is recovered by the next run through the
destination's ledger. A batch whose file changed or vanished before the commit
(`SourceChanged`) is ended as superseded or gone, its staged rows discarded: the
runner plans the file's current content instead.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.destinations.base import Destination, LoadRequest, LoadResult, Window
from hakiri.destinations.gates import check_empty_source
from hakiri.engine.crash import crash_point
from hakiri.engine.evidence import guessed_columns
from hakiri.engine.lineage import LineageRecorder
from hakiri.engine.prepare import prepared_for_load
from hakiri.engine.progress import InFlight, ProgressWatch, watching
from hakiri.engine.ratelimit import TokenBucket
from hakiri.engine.schema_guard import SchemaGuard
from hakiri.engine.targets import Targets
from hakiri.errors import DeletesRefused, HakiriError, LoadError, SourceChanged, SourceDataError
from hakiri.observability import RunMetrics, span
from hakiri.quality.rules import RuleCheck, RuleReport
from hakiri.sources.base import BatchRead, Source, explained_by
from hakiri.sources.cursors.ranges import CursorRange, as_python
from hakiri.spec.pipeline import CursorKind, PipelineSpec

__all__ = ["BatchLoader", "Loaded", "chunk_predicate"]


def chunk_predicate(batch: Batch) -> str | None:
    """What a batch reads, for people: its cursor range, or its file; None for a snapshot."""
    if batch.kind == "chunk" and batch.predicate:
        return CursorRange.from_predicate(batch.predicate).describe()
    return batch.file_path


@dataclass
class Loaded:
    """What loading one batch did, for the run to add up."""

    result: LoadResult
    malformed: int = 0
    report: RuleReport | None = None
    # seconds reading+staging, in the destination commit, in the catalog
    timings: dict[str, float] = field(default_factory=dict)
    # Superseded or gone instead of loaded (its file changed or vanished first), and why.
    retired: SourceChanged | None = None


class BatchLoader:
    def __init__(
        self,
        spec: PipelineSpec,
        catalog: Catalog,
        source: Source,
        targets: Targets,
        schema: SchemaGuard,
        spark: Any,
        holder: str,
        metrics: RunMetrics,
        bucket: TokenBucket | None = None,
        lineage: LineageRecorder | None = None,
        progress: ProgressWatch | None = None,
        engine_label: str = "the engine",
    ) -> None:
        self.spec, self.catalog, self.source, self.targets = spec, catalog, source, targets
        self.engine_label = engine_label  # what the progress line names while it starts
        self.schema, self.spark, self.holder = schema, spark, holder
        self.metrics, self.bucket, self.lineage = metrics, bucket, lineage
        self.progress = progress

    def load(self, batch: Batch, run_id: str, run_bytes: int | None = None) -> Loaded:
        """One batch, traced as `hakiri.chunk` (a child of `hakiri.run`)."""
        started = time.monotonic()
        attributes = {
            "hakiri.pipeline_id": self.spec.id,
            "hakiri.run_id": run_id,
            "hakiri.chunk_id": batch.batch_id,
            "hakiri.table": batch.table_name,
            "hakiri.chunk.predicate": chunk_predicate(batch),
            "hakiri.chunk.bytes": batch.size_bytes,
            "hakiri.chunk.attempts": batch.attempt,
        }
        with span("hakiri.chunk", attributes) as chunk:
            waited = self.bucket.acquire(self.source.requests_per_read()) if self.bucket else 0.0
            flight = InFlight(
                self.spec.id,
                batch.table_name,
                chunk_predicate(batch) or batch.table_name,
                batch.size_bytes,
            )
            with watching(flight, self.progress):
                loaded = self._load(batch, run_id, run_bytes, flight)
            chunk.set_attributes(
                {
                    "hakiri.chunk.rows": loaded.result.rows_loaded,
                    "hakiri.chunk.wait_ms": round(waited * 1000),
                    "hakiri.chunk.duration_ms": round((time.monotonic() - started) * 1000),
                }
            )
        return loaded

    def _load(self, batch: Batch, run_id: str, run_bytes: int | None, flight: InFlight) -> Loaded:
        from hakiri.spark.errors import spark_errors

        destination, request = self.targets.request(batch, run_id, run_bytes)
        # stage_progress finds the write by batch id and target table, which `replace` keeps
        flight.probe = lambda: destination.stage_progress(request)
        lock = self.targets.commit_lock(destination)
        checked = None
        malformed = 0
        label = batch.file_path or batch.table_name
        started = time.monotonic()
        try:
            # Spark is lazy: reading fails only when staging runs the job, so one block covers both.
            # For the same reason `hakiri.read` only plans the read: the source rows are read,
            # checked and staged by the Spark job(s) inside `hakiri.stage`.
            with spark_errors(f"loading {label} into {request.target_table}"):
                with span("hakiri.read"):
                    # a first batch may wait for a server
                    flight.starting_engine = self.engine_label
                    try:
                        session = self.spark()
                    finally:
                        flight.starting_engine = ""
                    read = self.source.read(session, batch)
                    label = read.label
                    flight.expected_rows = read.expected_rows
                    request = replace(
                        request,
                        batch_time=read.taken_at or batch.created_at,
                        window=batch_window(batch, self.spec),
                        source=read.label,
                    )
                    if read.empty:
                        self._on_empty(read, run_id)
                    frame = read.frame
                    if read.evidence and self.lineage is not None:
                        self.lineage.seen(batch.table_name, frame, destination, request)
                    if read.evidence:
                        frame = prepared_for_load(
                            self.spec, read, request.batch_time, self.targets.project
                        )
                with lock:  # no commit runs while the DDL does
                    if read.evidence:
                        guessed = guessed_columns(read.inferred, frame, self.spec.transforms)
                        frame = self.schema.discover(
                            batch.table_name, frame, destination, request, guessed
                        )
                    else:
                        frame = self.schema.shape_empty(frame, destination, request)
                if frame is not None:
                    # The rules are compiled here and evaluated by the staging pass (or, for a
                    # writer that needs them first, by a cached evaluation inside `stage`).
                    checked = RuleCheck(frame, self.spec.validate_.rules, label=label)
                    with span("hakiri.stage"), explained_by(read):
                        staged = destination.stage(checked, request)
                    malformed = _verified(read, checked, destination, staged)
            staged_at = time.monotonic()
            if frame is None:
                result = _nothing_to_create(request)
            else:
                crash_point("after_stage")
                with lock, span("hakiri.commit"):
                    result = destination.commit(staged, request, crash_point)
        except SourceChanged as exc:
            status = BatchStatus(exc.status)
            self.catalog.mark_retired(self.spec.id, batch.batch_id, self.holder, status, exc.reason)
            return Loaded(LoadResult(rows_loaded=0), retired=exc)
        except HakiriError as exc:
            self.catalog.mark_failed(self.spec.id, batch.batch_id, self.holder, exc.reason)
            if isinstance(exc, DeletesRefused):
                # A refused snapshot is news for whoever watches the alerts, not only the run.
                self.catalog.add_alert(
                    "error", "delete_guard", exc.reason, pipeline_id=self.spec.id, run_id=run_id
                )
            raise
        finally:
            if checked is not None:
                checked.release()
        committed_at = time.monotonic()
        crash_point("before_catalog_commit")
        self.catalog.mark_committed(
            self.spec.id, batch.batch_id, self.holder, rows=result.rows_loaded
        )
        lag = (datetime.now(UTC) - batch.created_at).total_seconds() if batch.created_at else None
        self.metrics.chunk_committed(result.rows_loaded, result.quarantined, lag)
        for probe in result.validations:
            if not probe.ok:
                self.catalog.add_alert(
                    "warning", "validator", probe.message, pipeline_id=self.spec.id, run_id=run_id
                )
        return Loaded(
            result,
            malformed,
            checked.report if checked else None,
            {
                "read_stage": staged_at - started,
                "commit": committed_at - staged_at,
                "catalog": time.monotonic() - committed_at,
            },
        )

    def _on_empty(self, read: BatchRead, run_id: str) -> None:
        """A batch without a data record: what its source asks for (`BatchRead.on_empty`)."""
        on_empty = read.on_empty
        message = f"{read.label} holds no data record"
        if on_empty == "fail":
            raise SourceDataError(
                f"{message} (on_empty = 'fail')",
                "fix the export, or set on_empty = 'ignore' (or 'alert') to load it as 0 rows",
            )
        if on_empty == "alert":
            self.catalog.add_alert(
                "warning", "empty_source", message, pipeline_id=self.spec.id, run_id=run_id
            )


def batch_window(batch: Batch, spec: PipelineSpec) -> Window | None:
    """replace_window with window = 'range': the batch's cursor range, as the window it replaces."""
    if not spec.load.strategy.replaces_cursor_range(spec.load):
        return None
    if batch.kind != "chunk" or not batch.predicate:
        raise LoadError(
            f"batch {batch.batch_id} of {batch.table_name} has no cursor range to replace",
            'replace_window with window = "range" needs a table source read past a cursor',
        )
    found = CursorRange.from_predicate(batch.predicate)
    kind = CursorKind(found.kind)

    def bound(value: Any) -> str | None:
        return None if value is None else str(as_python(kind, value))

    return Window(
        found.column,
        bound(found.lo),
        bound(found.hi),
        found.lo_inclusive,
        found.hi_inclusive,
        found.nulls,
    )


def _verified(read: BatchRead, checked: RuleCheck, destination: Destination, staged: Any) -> int:
    """The read's verdict on what it left out and the rules' report, both judged from the
    staging pass (a batch with malformed records under on_malformed = "fail", or rows that
    broke an abort rule, is discarded, not committed); the malformed records dropped."""
    try:
        malformed = int(read.verify())
        checked.finish()
        return malformed
    except BaseException:
        destination.discard(staged)
        raise


def _nothing_to_create(request: LoadRequest) -> LoadResult:
    """An empty batch with undeclared columns, and no target yet: nothing says what the
    target's columns would be, so none is created. The batch is committed as 0 rows (the
    destination holds nothing of it to be exactly-once about); truncate and blue_green
    still refuse an empty source."""
    qualified = ".".join(filter(None, (request.target_schema, request.target_table)))
    check_empty_source(request.load, 0, qualified)
    return LoadResult(rows_loaded=0)
