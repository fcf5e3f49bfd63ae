"""Run one pipeline to convergence: every pending batch read, staged and committed exactly once.

Protocol per batch (DESIGN.md "Exactly-once"): the batch is persisted in the
catalog before data moves; it is claimed under a lease; Spark reads and stages
it; the destination commits rows + ledger row (+ watermark) in one transaction;
only then does the catalog mark it committed. After a crash, a batch the ledger
already has is marked committed without reloading, and a batch left processing
by a dead process goes back to pending.
"""

from __future__ import annotations

import os
import socket
import time
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus, Phase, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.destinations.base import Destination, LoadRequest
from hakiri.engine.batches import plan_file_batches, snapshot_files
from hakiri.engine.crash import crash_point
from hakiri.errors import HakiriError, SourceDataError
from hakiri.sources.base import SourceFile
from hakiri.sources.files import inspect_files
from hakiri.spec.connections import Target, target_of
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import FilesSource, PipelineSpec, TableSpec

BATCH_TTL_SECONDS = 600.0
PIPELINE_LEASE_TTL_SECONDS = 3600.0


@dataclass
class Outcome:
    """What happened to one pipeline in this apply."""

    pipeline_id: str
    status: str  # 'success' | 'no-op' | 'failed'
    mode: str
    run_id: str | None = None
    rows: int = 0
    batches: int = 0
    recovered: int = 0  # batches found in the destination's ledger after a crash
    malformed: int = 0
    seconds: float = 0.0
    error: str | None = None
    hint: str | None = None
    notes: list[str] = field(default_factory=list)


def holder_id() -> str:
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"


def _holder_is_dead(holder: str | None) -> bool:
    """A holder on this host whose process is gone (it crashed); other hosts wait for lease expiry."""
    if not holder:
        return False
    host, _, rest = holder.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False


class PipelineRunner:
    def __init__(
        self,
        project: Project,
        spec: PipelineSpec,
        catalog: Catalog,
        destination_for: Callable[[Target], Destination],
        spark: Callable[[], Any],
        read_files: Callable[..., Any],
        env: Mapping[str, str],
        lease_timeout: float = 0.0,
        on_batch: Callable[[str, int, int, int], None] | None = None,
    ) -> None:
        self.project, self.spec, self.catalog = project, spec, catalog
        self.destination_for, self.spark, self.read_files = destination_for, spark, read_files
        self._destinations: dict[Target, Destination] = {}  # one per target for the whole run
        self.env, self.lease_timeout = env, lease_timeout
        # (pipeline id, batches done, batches in this run, rows so far): drives progress display
        self.on_batch = on_batch
        self.holder = holder_id()

    # ------------------------------------------------------------------ the whole pipeline

    def run(self) -> Outcome:
        started = time.monotonic()
        outcome = Outcome(self.spec.id, "no-op", self.spec.load.mode.value)
        self._take_lease()
        try:
            self._recover_stale_claims()
            for table in self.spec.table_specs():
                self._plan_table(table, outcome)
            pending = self.catalog.batches(self.spec.id, status=BatchStatus.PENDING)
            pending = [b for b in pending if not self._already_in_ledger(b, outcome)]
            if pending:
                self._load(outcome, total=len(pending))
            if outcome.status != "failed":
                self.catalog.record_applied(
                    self.spec.id, normalized_spec(self.spec), spec_hash(self.spec), Phase.STREAMING
                )
        finally:
            self.catalog.release_lease(self.spec.id, self.holder)
            outcome.seconds = time.monotonic() - started
        return outcome

    def _take_lease(self) -> None:
        lease = self.catalog.acquire_lease(self.spec.id, self.holder, PIPELINE_LEASE_TTL_SECONDS)
        if not lease.acquired and _holder_is_dead(lease.holder):
            self.catalog.release_lease(
                self.spec.id, lease.holder
            )  # its process crashed on this host
        if not lease.acquired:
            self.catalog.wait_for_lease(
                self.spec.id, self.holder, PIPELINE_LEASE_TTL_SECONDS, self.lease_timeout
            )

    def _recover_stale_claims(self) -> None:
        # We hold the pipeline lease, so a run still "running" and a batch still processing
        # were left by a process that died.
        for run in self.catalog.runs(self.spec.id, limit=50):
            if run.status is RunStatus.RUNNING:
                self.catalog.finish_run(
                    run.run_id,
                    RunStatus.FAILED,
                    error_kind="Interrupted",
                    error_msg="the process ended before the run finished",
                )
        for batch in self.catalog.batches(self.spec.id, status=BatchStatus.PROCESSING):
            if _holder_is_dead(batch.holder):
                self.catalog.release(self.spec.id, batch.batch_id, batch.holder or "")
        self.catalog.reclaim_expired(self.spec.id)
        # Converging means trying failed batches again (the cause may have been fixed).
        failed = [b.batch_id for b in self.catalog.batches(self.spec.id, status=BatchStatus.FAILED)]
        if failed:
            self.catalog.reset_batches(self.spec.id, failed)

    def _plan_table(self, table: TableSpec, outcome: Outcome) -> None:
        if not isinstance(self.spec.source, FilesSource):
            raise HakiriError(
                f"pipeline `{self.spec.id}`: reading a {self.spec.source.connector} source is not implemented yet",
                "use a files source for now; table sources arrive with incremental cursors and backfills",
            )
        config = self.spec.source.config
        observed = inspect_files(self.project.root, config, table)
        if not observed.files:
            pattern = table.path or config.path
            if config.on_miss == "fail":
                raise SourceDataError(
                    f"no file matches {pattern!r}", "check the path, or set on_miss = 'ignore'"
                )
            outcome.notes.append(f"{table.name}: no file matches {pattern!r}")
            return
        committed = self.catalog.committed_hashes(self.spec.id, table.name)
        batches = plan_file_batches(
            table.name, self.spec.load.mode, config, observed.files, committed
        )
        self.catalog.add_batches(self.spec.id, batches)

    def _request(self, batch: Batch, run_id: str) -> tuple[Destination, LoadRequest]:
        table = next(t for t in self.spec.table_specs() if t.name == batch.table_name)
        target = target_of(self.project.settings, self.spec, table)
        request = LoadRequest(
            self.project.settings.project.name,
            self.spec.id,
            run_id,
            batch.batch_id,
            target.schema,
            target.table,
            self.spec.load,
        )
        if target not in self._destinations:
            self._destinations[target] = self.destination_for(target)
        return self._destinations[target], request

    def _already_in_ledger(self, batch: Batch, outcome: Outcome) -> bool:
        destination, request = self._request(batch, run_id="recovery")
        if destination.is_committed(request):
            self.catalog.mark_committed_from_ledger(self.spec.id, batch.batch_id)
            outcome.recovered += 1
            return True
        return False

    # ------------------------------------------------------------------ loading

    def _load(self, outcome: Outcome, total: int) -> None:
        run = self.catalog.start_run(self.spec.id)
        outcome.run_id = run.run_id
        bytes_read = 0
        try:
            while batch := self.catalog.claim_batch(
                self.spec.id, self.holder, BATCH_TTL_SECONDS, run_id=run.run_id
            ):
                rows, malformed = self._load_batch(batch, run.run_id)
                outcome.rows += rows
                outcome.malformed += malformed
                outcome.batches += 1
                bytes_read += batch.size_bytes or 0
                if self.on_batch:
                    self.on_batch(
                        self.spec.id, outcome.batches, max(total, outcome.batches), outcome.rows
                    )
        except HakiriError as exc:
            outcome.status, outcome.error, outcome.hint = "failed", exc.reason, exc.hint
            self.catalog.finish_run(
                run.run_id,
                RunStatus.FAILED,
                row_count=outcome.rows,
                bytes=bytes_read,
                error_kind=type(exc).__name__,
                error_msg=exc.reason,
            )
            return
        outcome.status = "success"
        self.catalog.finish_run(
            run.run_id, RunStatus.SUCCESS, row_count=outcome.rows, bytes=bytes_read
        )

    def _load_batch(self, batch: Batch, run_id: str) -> tuple[int, int]:
        from hakiri.spark.errors import spark_errors

        destination, request = self._request(batch, run_id)
        try:
            files = self._files_of(batch)
            # Spark is lazy: reading fails only when staging runs the job, so one block covers both.
            with spark_errors(
                f"loading {batch.file_path or batch.table_name} into {request.target_table}"
            ):
                read = self.read_files(
                    self.spark(), self.project.root, self.spec.source.config, files
                )  # type: ignore[union-attr]
                staged = destination.stage(read.frame, request)
            crash_point("after_stage")
            result = destination.commit(staged, request, crash_point)
        except HakiriError as exc:
            self.catalog.mark_failed(self.spec.id, batch.batch_id, self.holder, exc.reason)
            raise
        crash_point("before_catalog_commit")
        self.catalog.mark_committed(
            self.spec.id, batch.batch_id, self.holder, rows=result.rows_loaded
        )
        return result.rows_loaded, read.malformed

    def _files_of(self, batch: Batch) -> list[SourceFile]:
        if batch.kind == "snapshot":
            pairs = snapshot_files(batch.predicate)
        else:
            pairs = [(batch.file_path or "", batch.content_hash or "")]
        root = self.project.root
        files = []
        for path, digest in pairs:
            full = Path(path) if Path(path).is_absolute() else root / path
            if not full.is_file():
                raise SourceDataError(
                    f"{path} disappeared before it was loaded",
                    "restore it, or apply again to re-plan",
                )
            files.append(SourceFile(path, full.stat().st_size, digest))
        return files
