"""Run one pipeline to convergence: every pending batch read, staged and committed exactly once.

Protocol per batch (DESIGN.md "Exactly-once"): the batch is persisted in the
catalog before data moves; it is claimed under a lease; Spark reads and stages
it; the destination commits rows + ledger row (+ watermark) in one transaction;
only then does the catalog mark it committed. After a crash, a batch the ledger
already has is marked committed without reloading, and a batch left processing
by a dead process goes back to pending.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus, Phase, RunRecord, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.destinations.base import Destination, LoadRequest, LoadResult
from hakiri.destinations.gates import check_empty_source
from hakiri.engine.controls import (
    Outcome,
    RunControls,
    holder_id,
    holder_is_dead,
)
from hakiri.engine.crash import crash_point
from hakiri.engine.evidence import guessed_columns
from hakiri.engine.ratelimit import TokenBucket, parse_rate
from hakiri.engine.run_quality import RunQuality, quarantine_table, resolve_run_id
from hakiri.engine.schema_guard import SchemaGuard
from hakiri.engine.workers import keep_claimed, keep_leased, run_workers
from hakiri.errors import HakiriError, LeaseHeld, SourceDataError
from hakiri.hooks.runner import is_sql_like, run_hooks, run_sql_hooks, sql_hooks
from hakiri.observability import (
    RunMetrics,
    attached,
    capture_context,
    current_trace_id,
    set_error,
    span,
)
from hakiri.planner.backfill import load_parallelism
from hakiri.planner.builder import batch_ref
from hakiri.planner.model import EnqueueStep, LoadStep, Step
from hakiri.quality.anomaly import check_row_count
from hakiri.quality.rules import RuleCheck, check_rows
from hakiri.sources.cursors import CursorRange
from hakiri.sources.select import source_for
from hakiri.sources.table_batches import committed_cursor
from hakiri.spec.connections import Target, target_of
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.hooks import Hook
from hakiri.spec.load import LoadMode
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec, TableSpec


def chunk_predicate(batch: Batch) -> str | None:
    """What a batch reads, for people: its cursor range, or its file; None for a snapshot."""
    if batch.kind == "chunk" and batch.predicate:
        return CursorRange.from_predicate(batch.predicate).describe()
    return batch.file_path


def _verified(read: Any, checked: RuleCheck, destination: Destination, staged: Any) -> int:
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


class PipelineRunner:
    def __init__(
        self,
        project: Project,
        spec: PipelineSpec,
        catalog: Catalog,
        destination_for: Callable[[Target], Destination],
        spark: Callable[[], Any],
        env: Mapping[str, str],
        lease_timeout: float = 0.0,
        on_batch: Callable[[str, int, int, int], None] | None = None,
        controls: RunControls | None = None,
    ) -> None:
        self.project, self.spec, self.catalog = project, spec, catalog
        self.controls = controls or RunControls()
        self.destination_for, self.spark = destination_for, spark
        self._destinations: dict[Target, Destination] = {}  # one per target for the whole run
        self.env, self.lease_timeout = env, lease_timeout
        # (pipeline id, batches done, batches in this run, rows so far): drives progress display
        self.on_batch = on_batch
        self.holder = holder_id()
        self.source = source_for(project.root, project.settings, spec, env)
        self.metrics = RunMetrics(spec.id)
        self.schema = SchemaGuard(project, spec, catalog)
        self._lock = threading.Lock()  # guards outcome, quality and claims across chunk workers
        self._commit_locks: dict[int, threading.Lock] = {}  # per destination: one commit at a time
        self._run_bytes: int | None = None  # input of the pending batches, when all are files
        self._steps: list[Step] = []  # enqueue steps executed, in order
        self._claimed: list[str] = []  # batch ids in claim order
        self._workers = 1
        backfill = spec.backfill
        self.bucket = (
            TokenBucket(parse_rate(backfill.rate_budget))
            if backfill is not None and backfill.rate_budget
            else None
        )

    # ------------------------------------------------------------------ the whole pipeline

    def run(self, requested: str | None = None) -> Outcome:
        """Plan and load the pipeline. `requested` is a run id `request_run` left pending (an
        HTTP trigger): the run starts under that id, or is closed as a no-op with nothing new."""
        started = time.monotonic()
        outcome = Outcome(self.spec.id, "no-op", self.spec.load.mode.value)
        self._take_lease()
        try:
            with keep_leased(self.catalog, self.spec.id, self.holder, self.controls.lease_ttl):
                self._converge(outcome, requested)
        finally:
            self.catalog.release_lease(self.spec.id, self.holder)
            outcome.seconds = time.monotonic() - started
        return outcome

    def _converge(self, outcome: Outcome, requested: str | None) -> None:
        try:
            self._converge_steps(outcome, requested)
        finally:
            outcome.steps = self._executed()

    def _executed(self) -> list[dict[str, Any]]:
        """The steps this run executed, in plan order: enqueue, evolve, load."""
        steps: list[Step] = [*self._steps]
        steps += [
            self.schema.steps[t.name]
            for t in self.spec.table_specs()
            if t.name in self.schema.steps
        ]
        if self._claimed:
            steps.append(LoadStep(batches=self._claimed, parallelism=self._workers))
        return [s.model_dump(mode="json") for s in steps]

    def _converge_steps(self, outcome: Outcome, requested: str | None) -> None:
        self._recover_stale_claims(keep=requested)
        for table in self.spec.table_specs():
            self._plan_table(table, outcome)
        pending = self.catalog.batches(self.spec.id, status=BatchStatus.PENDING)
        pending = [b for b in pending if not self._already_in_ledger(b, outcome)]
        sizes = [b.size_bytes for b in pending]
        self._run_bytes = None if None in sizes else sum(s or 0 for s in sizes)
        draining = self.controls.stopping()  # then a requested run stays pending for later
        if pending and not draining:
            self._load(outcome, total=len(pending), run_id=requested)
        elif requested is not None and not draining:  # answered: there was nothing new
            self.catalog.start_run(self.spec.id, run_id=requested)
            self.catalog.finish_run(requested, RunStatus.SUCCESS, row_count=0)
            outcome.run_id = requested
        self._advance_cursors()
        if outcome.status != "failed":
            left = self.catalog.batch_counts(self.spec.id)
            outcome.remaining = left.pending + left.failed
            phase = Phase.BACKFILLING if outcome.remaining else Phase.STREAMING
            if outcome.remaining:
                why = "draining" if self.controls.stopping() else "max_chunks_per_tick"
                outcome.notes.append(f"{outcome.remaining} batch(es) left for the next run ({why})")
            self.catalog.record_applied(
                self.spec.id, normalized_spec(self.spec), spec_hash(self.spec), phase
            )

    def replay(self, of_run: str) -> Outcome:
        """Load the rows `of_run` quarantined and dropped, if they pass the rules as they are now.

        Every rule applies with abort treated as skip, so a row that still breaks one stays
        quarantined. Rows are added with upsert when the pipeline upserts and inserted (append)
        otherwise. The quarantine records of the loaded rows get `replayed_by` in the same
        destination transaction, so a replay run twice never loads a row twice.
        """
        started = time.monotonic()
        outcome = Outcome(self.spec.id, "no-op", self.spec.load.mode.value)
        if not self.spec.quarantine.enabled:
            raise HakiriError(
                f"pipeline `{self.spec.id}` has no quarantine, so there is nothing to replay",
                "enable it with [pipeline.quarantine] enabled = true; later runs keep their rule violations",
            )
        of_run = resolve_run_id(self.catalog, self.spec.id, of_run)
        self._take_lease()
        try:
            run = self.catalog.start_run(self.spec.id)
            outcome.run_id = run.run_id
            quality = RunQuality(replay_of=of_run)
            try:
                for table in self.spec.table_specs():
                    self._replay_table(table, of_run, run.run_id, outcome, quality)
            except HakiriError as exc:
                self._fail(outcome, run.run_id, exc, RunStatus.FAILED, 0, quality)
                return outcome
            outcome.status = "success" if outcome.rows else "no-op"
            self.catalog.finish_run(
                run.run_id, RunStatus.SUCCESS, row_count=outcome.rows, quality=quality.as_dict()
            )
        finally:
            self.catalog.release_lease(self.spec.id, self.holder)
            outcome.seconds = time.monotonic() - started
        return outcome

    def _replay_table(
        self, table: TableSpec, of_run: str, run_id: str, outcome: Outcome, quality: RunQuality
    ) -> None:
        from hakiri.spark.errors import spark_errors

        target = target_of(self.project.settings, self.spec, table)
        quarantine = quarantine_table(self.spec, table, target)
        assert quarantine is not None  # replay() checked that the quarantine is enabled
        load = self.spec.load
        if load.mode is not LoadMode.UPSERT:
            load = load.model_copy(update={"mode": LoadMode.APPEND})
        request = LoadRequest(
            self.project.settings.project.name,
            self.spec.id,
            run_id,
            f"replay:{table.name}:{of_run}:{run_id}",
            target.schema,
            target.table,
            load,
            quarantine=quarantine,
            replay_of=of_run,
        )
        destination = self._destination(target)
        rules = [
            rule.model_copy(update={"on_fail": "skip"}) if rule.on_fail == "abort" else rule
            for rule in self.spec.validate_.rules
        ]
        checked = None
        try:
            with spark_errors(f"replaying the quarantined rows of run {of_run}"):
                frame = destination.read_for_replay(self.spark(), quarantine, request, of_run)
                if frame is None:
                    outcome.notes.append(f"{table.name}: no quarantine table yet")
                    return
                checked = check_rows(frame, rules, label=f"the quarantined rows of run {of_run}")
                staged = destination.stage(RuleCheck.unchecked(checked.clean), request)
            if staged.rows == 0:
                destination.discard(staged)
            else:
                result = destination.commit(staged, request, crash_point)
                outcome.rows += result.rows_loaded
                outcome.batches += 1
        finally:
            if checked is not None:
                checked.release()
        report = checked.report if checked else None
        if report is not None:
            still = report.rows_in - report.rows_kept
            for rule_id, count in report.counts.items():
                quality.rules[rule_id] = quality.rules.get(rule_id, 0) + count
            if still:
                outcome.notes.append(
                    f"{table.name}: {still} rows still break a rule and stay quarantined"
                )

    def _take_lease(self) -> None:
        ttl = self.controls.lease_ttl
        lease = self.catalog.acquire_lease(self.spec.id, self.holder, ttl)
        if not lease.acquired and holder_is_dead(lease.holder):
            self.catalog.release_lease(
                self.spec.id, lease.holder
            )  # its process crashed on this host
        if not lease.acquired:
            self.catalog.wait_for_lease(self.spec.id, self.holder, ttl, self.lease_timeout)

    def _keep_lease(self) -> None:
        """Renew the pipeline lease between batches, so a long run is never overlapped (a single
        batch longer than the lease's TTL still can be)."""
        if not self.catalog.renew_lease(self.spec.id, self.holder, self.controls.lease_ttl):
            raise LeaseHeld(
                f"pipeline `{self.spec.id}`: this apply lost its lease (it ran out, or was broken)",
                "the batches committed so far are kept; apply again to load the rest",
            )

    def _recover_stale_claims(self, keep: str | None = None) -> None:
        # We hold the pipeline lease, so a run still "running" and a batch still processing
        # were left by a process that died.
        for run in self.catalog.runs(self.spec.id, limit=50):
            if run.status is RunStatus.RUNNING and run.run_id != keep:
                self.catalog.finish_run(
                    run.run_id,
                    RunStatus.FAILED,
                    error_kind="Interrupted",
                    error_msg="the process ended before the run finished",
                )
        for batch in self.catalog.batches(self.spec.id, status=BatchStatus.PROCESSING):
            if holder_is_dead(batch.holder):
                self.catalog.release(self.spec.id, batch.batch_id, batch.holder or "")
        self.catalog.reclaim_expired(self.spec.id)
        # Converging means trying failed batches again (the cause may have been fixed).
        failed = [b.batch_id for b in self.catalog.batches(self.spec.id, status=BatchStatus.FAILED)]
        if failed:
            self.catalog.reset_batches(self.spec.id, failed)

    def _plan_table(self, table: TableSpec, outcome: Outcome) -> None:
        plan = self.source.plan_batches(table, self.catalog)
        outcome.notes.extend(plan.notes)
        if plan.empty_source:
            self.catalog.add_alert(
                "warning", "empty_source", plan.notes[0], pipeline_id=self.spec.id
            )
        if plan.planning:
            self._set_phase(Phase.PLANNING)
        cursor = (table.name, plan.cursor) if plan.cursor is not None else None
        self.catalog.add_batches(self.spec.id, plan.batches, cursor=cursor)
        if plan.batches:
            step = EnqueueStep(table=table.name, batches=[batch_ref(b) for b in plan.batches])
            self._steps.append(step)
        if plan.planning and plan.batches:
            self._set_phase(Phase.BACKFILLING)
            outcome.notes.append(f"{table.name}: backfill planned in {len(plan.batches)} chunk(s)")

    def _set_phase(self, phase: Phase) -> None:
        if self.catalog.pipeline_state(self.spec.id) is None:
            self.catalog.record_applied(
                self.spec.id, normalized_spec(self.spec), spec_hash(self.spec), phase
            )
        else:
            self.catalog.set_phase(self.spec.id, phase)

    def _advance_cursors(self) -> None:
        """Each table cursor's `value`: the end of the committed chunks, from the start."""
        if not self.source.has_cursors:
            return
        everything = self.catalog.batches(self.spec.id)
        for table in self.spec.table_specs():
            state = self.catalog.get_cursor(self.spec.id, table.name)
            if state is None or state.get("planned_to") is None:
                continue
            mine = [b for b in everything if b.table_name == table.name]
            advanced = committed_cursor(mine, state)
            if advanced != state:
                self.catalog.set_cursor(self.spec.id, table.name, advanced)

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
            post_hook=self._in_swap_post_hook(target),
            validators=tuple(self.spec.validate_.dataset),
            quarantine=quarantine_table(self.spec, table, target),
            run_bytes=self._run_bytes,
        )
        return self._destination(target), request

    def _destination(self, target: Target) -> Destination:
        with self._lock:
            if target not in self._destinations:
                self._destinations[target] = self.destination_for(target)
                self._commit_locks[id(self._destinations[target])] = threading.Lock()
            return self._destinations[target]

    def _in_swap_post_hook(self, target: Target) -> Callable[[Any], None] | None:
        """blue_green runs SQL post hooks inside its swap transaction, before the rename."""
        hooks = sql_hooks(self.spec.hooks.post)
        if self.spec.load.mode is not LoadMode.BLUE_GREEN or not hooks:
            return None
        schema = target.schema or "public"
        return lambda conn: run_sql_hooks(
            conn, "post", hooks, default_schema=schema, in_transaction=True
        )

    def _already_in_ledger(self, batch: Batch, outcome: Outcome) -> bool:
        destination, request = self._request(batch, run_id="recovery")
        if destination.is_committed(request):
            self.catalog.mark_committed_from_ledger(self.spec.id, batch.batch_id)
            outcome.recovered += 1
            return True
        return False

    # ------------------------------------------------------------------ loading

    def _load(self, outcome: Outcome, total: int, run_id: str | None = None) -> None:
        """One run, traced as `hakiri.run`: the span starts first, so its trace id is on the
        run record from the start (`hakiri runs --json`)."""
        started = time.monotonic()
        attributes = {
            "hakiri.pipeline_id": self.spec.id,
            "hakiri.load_mode": self.spec.load.mode.value,
            "hakiri.trigger": self.controls.trigger,
        }
        with span("hakiri.run", attributes) as current:
            run = self.catalog.start_run(
                self.spec.id,
                run_id=run_id,
                trace_id=current_trace_id(),
                trigger=self.controls.trigger,
            )
            current.set_attribute("hakiri.run_id", run.run_id)
            status = self._load_run(run, outcome, total)
            current.set_attributes({"hakiri.rows": outcome.rows, "hakiri.status": status.value})
            if status is not RunStatus.SUCCESS:
                set_error(current, outcome.error)
        self.metrics.run_finished(time.monotonic() - started, status.value)

    def _load_run(self, run: RunRecord, outcome: Outcome, total: int) -> RunStatus:
        outcome.run_id = run.run_id
        quality = RunQuality()
        tally = {"bytes": 0}
        try:
            self._hooks("pre", self.spec.hooks.pre, outcome, run, "running")
            self._work(run.run_id, outcome, quality, total, tally)
        except HakiriError as exc:
            self._fail(outcome, run.run_id, exc, RunStatus.FAILED, tally["bytes"], quality)
            return RunStatus.FAILED
        outcome.quarantined = quality.quarantined
        try:
            post = self.spec.hooks.post
            if self.spec.load.mode is LoadMode.BLUE_GREEN:  # its SQL hooks ran inside the swap
                post = [h for h in post if not is_sql_like(h)]
            self._hooks("post", post, outcome, run, "success")
        except HakiriError as exc:
            # The rows are committed; only what came after them failed.
            self._fail(outcome, run.run_id, exc, RunStatus.PARTIAL, tally["bytes"], quality)
            return RunStatus.PARTIAL
        self._check_anomaly(outcome, quality)
        outcome.status = "success"
        outcome.notes.extend(quality.warnings)
        self.catalog.finish_run(
            run.run_id,
            RunStatus.SUCCESS,
            row_count=outcome.rows,
            bytes=tally["bytes"],
            quality=quality.as_dict(),
        )
        return RunStatus.SUCCESS

    def parallelism(self) -> int:
        """Chunks in flight (`planner.backfill.load_parallelism`)."""
        return load_parallelism(self.spec, self.source.has_cursors)

    def _work(
        self, run_id: str, outcome: Outcome, quality: RunQuality, total: int, tally: dict[str, int]
    ) -> None:
        """Claim and load batches until none is left (or max_chunks_per_tick), `parallelism` at once."""
        limit = self.spec.backfill.max_chunks_per_tick if self.spec.backfill else None
        workers = min(self.parallelism(), limit or total, total) or 1
        self._workers = workers
        total = min(total, limit) if limit else total
        claimed = 0
        controls = self.controls

        def claim(stop: threading.Event) -> Batch | None:
            nonlocal claimed
            if not self._take_permit(stop):
                return None
            with self._lock:
                batch = None
                if not (stop.is_set() or controls.stopping()) and (
                    limit is None or claimed < limit
                ):
                    self._keep_lease()  # before each claim: a run never outlives its lease
                    batch = self.catalog.claim_batch(
                        self.spec.id, self.holder, controls.claim_ttl, run_id=run_id
                    )
                if batch is not None:
                    claimed += 1
                    self._claimed.append(batch.batch_id)
            if batch is None and controls.capacity is not None:
                controls.capacity.release()
            return batch

        run_context = capture_context()  # chunk spans are children of the run span in any thread

        def load(batch: Batch) -> None:
            try:
                with (
                    attached(run_context),
                    keep_claimed(
                        self.catalog, self.spec.id, batch, self.holder, controls.claim_ttl
                    ),
                ):
                    rows, malformed = self._load_batch(batch, run_id, quality, outcome)
            finally:
                if controls.capacity is not None:
                    controls.capacity.release()
            with self._lock:
                outcome.rows += rows
                outcome.malformed += malformed
                outcome.batches += 1
                tally["bytes"] += batch.size_bytes or 0
                if self.on_batch:
                    done = outcome.batches
                    self.on_batch(self.spec.id, done, max(total, done), outcome.rows)

        # Spark starts before the threads share it; one scheduler pool per worker.
        spark = self.spark() if workers > 1 else None
        run_workers(workers, claim, load, spark, pool_prefix=f"hakiri-{self.spec.id}")

    def _take_permit(self, stop: threading.Event) -> bool:
        """Wait for room under the process-wide cap on chunks in flight (serve's
        `max_parallel_chunks`); False once this run should stop claiming instead."""
        capacity = self.controls.capacity
        if capacity is None:
            return True
        while not capacity.acquire(timeout=0.2):
            if stop.is_set() or self.controls.stopping():
                return False
        return True

    def _fail(
        self,
        outcome: Outcome,
        run_id: str,
        exc: HakiriError,
        status: RunStatus,
        bytes_read: int,
        quality: RunQuality,
    ) -> None:
        outcome.status, outcome.error, outcome.hint = "failed", exc.reason, exc.hint
        outcome.quarantined = quality.quarantined
        self.catalog.finish_run(
            run_id,
            status,
            row_count=outcome.rows,
            bytes=bytes_read,
            error_kind=type(exc).__name__,
            error_msg=exc.reason,
            quality=quality.as_dict(),
        )

    def _hooks(
        self, slot: str, hooks: Sequence[Hook], outcome: Outcome, run: RunRecord, status: str
    ) -> None:
        if not hooks:
            return
        table = self.spec.table_specs()[0]
        target = target_of(self.project.settings, self.spec, table)
        summary = {
            "project": self.project.settings.project.name,
            "pipeline_id": self.spec.id,
            "run_id": run.run_id,
            "status": status,
            "rows_loaded": outcome.rows,
            "rows_quarantined": outcome.quarantined,
            "batches": outcome.batches,
            "started_at": run.started_at.isoformat(),
        }
        with span("hakiri.hooks", {"hakiri.hook.slot": slot, "hakiri.hook.count": len(hooks)}):
            run_hooks(
                slot,
                hooks,
                run_sql=lambda some: self._destination(target).run_sql_hooks(
                    slot, some, target.schema
                ),
                summary=summary,
                env=self.env,
            )

    def _check_anomaly(self, outcome: Outcome, quality: RunQuality) -> None:
        """Warn (never fail) when this load's row count is far from the recent mean."""
        delta = self.spec.load.expected_row_count_delta
        if delta is None:
            return
        window = self.spec.load.window_runs
        history = [
            run.row_count or 0
            for run in self.catalog.runs(self.spec.id, limit=window * 4 + 10)
            if run.status is RunStatus.SUCCESS
            and run.run_id != outcome.run_id
            and not (run.quality or {}).get("replay_of")  # replays add a few rows, not a load
        ][:window]
        check = check_row_count(outcome.rows, history, delta)
        if check is None or check.ok:
            return
        quality.alerts.append(f"row-count anomaly: {check.message}")
        self.catalog.add_alert(
            "warning", "anomaly", check.message, pipeline_id=self.spec.id, run_id=outcome.run_id
        )

    def _on_empty(self, label: str, run_id: str) -> None:
        """A batch without a data record: what the files source's `on_empty` asks for."""
        source = self.spec.source
        on_empty = getattr(source.config, "on_empty", "ignore")
        message = f"{label} holds no data record"
        if on_empty == "fail":
            raise SourceDataError(
                f"{message} (on_empty = 'fail')",
                "fix the export, or set on_empty = 'ignore' (or 'alert') to load it as 0 rows",
            )
        if on_empty == "alert":
            self.catalog.add_alert(
                "warning", "empty_source", message, pipeline_id=self.spec.id, run_id=run_id
            )

    def _nothing_to_create(self, request: LoadRequest) -> LoadResult:
        """An empty batch with undeclared columns, and no target yet: nothing says what the
        target's columns would be, so none is created. The batch is committed as 0 rows (the
        destination holds nothing of it to be exactly-once about); truncate and blue_green
        still refuse an empty source."""
        qualified = ".".join(filter(None, (request.target_schema, request.target_table)))
        check_empty_source(request.load, 0, qualified)
        return LoadResult(rows_loaded=0)

    def _load_batch(
        self, batch: Batch, run_id: str, quality: RunQuality, outcome: Outcome
    ) -> tuple[int, int]:
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
            rows, malformed = self._load_chunk(batch, run_id, quality, outcome)
            chunk.set_attributes(
                {
                    "hakiri.chunk.rows": rows,
                    "hakiri.chunk.wait_ms": round(waited * 1000),
                    "hakiri.chunk.duration_ms": round((time.monotonic() - started) * 1000),
                }
            )
        return rows, malformed

    def _load_chunk(
        self, batch: Batch, run_id: str, quality: RunQuality, outcome: Outcome
    ) -> tuple[int, int]:
        from hakiri.spark.errors import spark_errors
        from hakiri.spark.transforms import apply_transforms

        destination, request = self._request(batch, run_id)
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
                    read = self.source.read(self.spark(), batch)
                    label = read.label
                    if read.empty:
                        self._on_empty(read.label, run_id)
                    frame = read.frame
                    if read.evidence:
                        frame = apply_transforms(frame, self.spec.transforms)
                with self._commit_locks[id(destination)]:  # no commit runs while the DDL does
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
                    with span("hakiri.stage"):
                        staged = destination.stage(checked, request)
                    malformed = _verified(read, checked, destination, staged)
            staged_at = time.monotonic()
            if frame is None:
                result = self._nothing_to_create(request)
            else:
                crash_point("after_stage")
                with self._commit_locks[id(destination)], span("hakiri.commit"):
                    result = destination.commit(staged, request, crash_point)
        except HakiriError as exc:
            self.catalog.mark_failed(self.spec.id, batch.batch_id, self.holder, exc.reason)
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
        with self._lock:
            outcome.timings.append(
                {
                    "read_stage": staged_at - started,
                    "commit": committed_at - staged_at,
                    "catalog": time.monotonic() - committed_at,
                }
            )
            quality.add(checked.report if checked else None, result)
        for probe in result.validations:
            if not probe.ok:
                self.catalog.add_alert(
                    "warning", "validator", probe.message, pipeline_id=self.spec.id, run_id=run_id
                )
        return result.rows_loaded, malformed
