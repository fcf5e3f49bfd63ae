"""Run one pipeline to convergence: the plan's steps, executed in order.

Under the pipeline lease (`engine.leases`), a run executes what `hakiri plan` shows:

1. enqueue: each table's new batches, from the source's `plan_batches` (the call plan
   makes), persisted in the catalog before any data moves;
2. evolve + load: claim the pending batches in order, `parallelism` at a time; each is
   loaded exactly once by `engine.batch_loader` (its target evolved first, by the schema
   guard, with the decision plan shows);
3. advance the table cursors, record the applied spec.

After a crash, a batch the destination's ledger already has is marked committed
without reloading (checked before planning, so the catalog is up to date when the source
decides what is new), and a batch left processing by a dead process goes back to pending.
A queued batch whose file changed or vanished ends as superseded or gone, when planning
sees it or when the loader finds it while reading; then the table is planned again once,
so the file's current content loads in the same run.
The steps executed are reported on the outcome (`apply --json`) in plan's form.
Replays of quarantined rows are `engine.replay`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from typing import Any

from hakiri.catalog.records import (
    Batch,
    BatchStatus,
    Phase,
    Retirement,
    RunRecord,
    RunStatus,
)
from hakiri.catalog.store import Catalog
from hakiri.destinations.capabilities import refusals
from hakiri.destinations.kinds import kind_of
from hakiri.engine.batch_loader import BatchLoader
from hakiri.engine.controls import Outcome, RunControls, holder_id
from hakiri.engine.drift import (
    mark_after_run,
    observe_targets,
    refuse_frozen_drift,
    target_drift,
)
from hakiri.engine.failures import NEVER_MATCHED_ALERT, alert_run_failed
from hakiri.engine.leases import keep_lease, recover_stale_claims, take_lease
from hakiri.engine.lineage import LineageRecorder
from hakiri.engine.progress import ProgressWatch
from hakiri.engine.ratelimit import TokenBucket, parse_rate
from hakiri.engine.replay import Replayer
from hakiri.engine.restore import lost_targets, queue_again
from hakiri.engine.run_context import RunContext
from hakiri.engine.run_quality import RunQuality, audit_run
from hakiri.engine.schema_guard import SchemaGuard
from hakiri.engine.targets import Targets
from hakiri.engine.workers import keep_claimed, keep_leased, run_workers
from hakiri.errors import (
    HakiriError,
    PlanStale,
    SecretMissing,
)
from hakiri.hooks.runner import is_sql_like, run_hooks
from hakiri.observability import (
    RunMetrics,
    attached,
    capture_context,
    current_trace_id,
    set_error,
    span,
)
from hakiri.planner.backfill import live_batches, load_parallelism
from hakiri.planner.builder import batch_ref, restore_step, retired_ref
from hakiri.planner.drift import TargetDrift
from hakiri.planner.model import EnqueueStep, LoadStep, Step
from hakiri.quality.anomaly import check_run_row_count
from hakiri.quality.verdicts import ProbeResult
from hakiri.sources.cursors.batches import committed_cursor
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.hooks import Hook
from hakiri.spec.pipeline import PipelineSpec, TableSpec

__all__ = ["PipelineRunner"]


class PipelineRunner:
    def __init__(
        self,
        run: RunContext,
        spec: PipelineSpec,
        catalog: Catalog,
        lease_timeout: float = 0.0,
        on_batch: Callable[[str, int, int, int], None] | None = None,
        controls: RunControls | None = None,
        audit: Callable[[], list[ProbeResult]] | None = None,
        progress: ProgressWatch | None = None,
    ) -> None:
        project, env, spark = run.project, run.env, run.spark
        self.run_context, self.project, self.spec, self.catalog = run, project, spec, catalog
        # `source_diff` validators, after the run's loads (services.diff.source_diff_audit)
        self.audit = audit
        self.controls = controls or RunControls()
        self.spark, self.env, self.lease_timeout = spark, env, lease_timeout
        # (pipeline id, batches done, batches in this run, rows so far): drives progress display
        self.on_batch = on_batch
        self.holder = holder_id()
        self.source = run.source_for(spec)
        self.targets = Targets(project, spec, run.destination_for(spec))
        self.metrics = RunMetrics(spec.id)
        self.schema = SchemaGuard(project, spec, catalog)
        self.lineage = LineageRecorder(project, spec, self.targets, env)
        backfill = spec.backfill
        bucket = (
            TokenBucket(parse_rate(backfill.rate_budget))
            if backfill is not None and backfill.rate_budget
            else None
        )
        self.loader = BatchLoader(
            spec,
            catalog,
            self.source,
            self.targets,
            self.schema,
            spark,
            self.holder,
            self.metrics,
            bucket,
            self.lineage,
            progress,
            run.engine_label,
        )
        self._lock = threading.Lock()  # guards outcome, quality and claims across chunk workers
        self._run_bytes: int | None = None  # input of the pending batches, when all are files
        self._steps: list[Step] = []  # enqueue steps executed, in order
        self._claimed: list[str] = []  # batch ids in claim order
        self._workers = 1
        self.run_id: str | None = None  # the run record this run started, once it has one
        self._replan: set[str] = set()  # tables with a batch superseded or gone while loading
        self._replanned: set[str] = set()  # tables planned again in this run (once each)

    # ------------------------------------------------------------------ the whole pipeline

    def run(self, requested: str | None = None) -> Outcome:
        """Plan and load the pipeline. `requested` is a run id `request_run` left pending (an
        HTTP trigger): the run starts under that id, or is closed as a no-op with nothing new."""
        started = time.monotonic()
        outcome = Outcome(self.spec.id, "no-op", self.spec.load.mode.value)
        take_lease(
            self.catalog, self.spec.id, self.holder, self.controls.lease_ttl, self.lease_timeout
        )
        try:
            with keep_leased(self.catalog, self.spec.id, self.holder, self.controls.lease_ttl):
                self._converge(outcome, requested)
        finally:
            self.catalog.release_lease(self.spec.id, self.holder)
            outcome.seconds = time.monotonic() - started
        return outcome

    def abandon(self) -> list[str]:
        """After a drain that ran out of time, from another thread: hand back the batches this
        run holds and its pipeline lease, so another process takes them over at once instead of
        after the TTL. A commit of this run that still lands is recognised by the destination's
        ledger, so nothing loads twice. Returns the batch ids handed back."""
        released = [
            batch.batch_id
            for batch in self.catalog.batches(self.spec.id, status=BatchStatus.PROCESSING)
            if batch.holder == self.holder
            and self.catalog.release(self.spec.id, batch.batch_id, self.holder)
        ]
        self.catalog.release_lease(self.spec.id, self.holder)
        return released

    def replay(self, of_run: str) -> Outcome:
        """Load the rows `of_run` quarantined (`engine.replay`)."""
        return Replayer(
            self.project,
            self.spec,
            self.catalog,
            self.targets,
            self.spark,
            self.holder,
            self.controls,
            self.lease_timeout,
        ).replay(of_run)

    def parallelism(self) -> int:
        """Chunks in flight (`planner.backfill.load_parallelism`)."""
        return load_parallelism(self.spec, self.source.has_cursors)

    def _converge(self, outcome: Outcome, requested: str | None) -> None:
        succeeded = False
        try:
            self._execute(outcome, requested)
            succeeded = True
        finally:
            outcome.steps = self._executed()
            mark_after_run(self.project, self.spec, self.catalog, self.env, outcome, succeeded)

    def _execute(self, outcome: Outcome, requested: str | None) -> None:
        missing = [name for name in self.spec.secrets if not self.env.get(name)]
        if missing:
            raise SecretMissing(
                f"pipeline `{self.spec.id}` needs the secret {', '.join(missing)}, and the "
                "environment does not set it",
                f"export {missing[0]}=... in the environment apply (or serve) runs in",
            )
        # What plan reports as errors is refused before anything moves.
        kinds = {self.targets.target(table).kind for table in self.spec.table_specs()}
        problems = [
            p for kind in sorted(kinds) for p in refusals(self.spec, kind_of(kind).capabilities)
        ]
        if problems:
            raise problems[0]
        refused = self.run_context.refusals(self.spec, kinds)
        if refused:
            raise HakiriError(*refused[0])
        # Every target, reached once per run even with nothing to load (a broken credential
        # fails cron's run, not only the run that has data); what plan reports as an error
        # stops here, before a slot, a schema or a table is created.
        now = observe_targets(self.project, self.spec, self.env, count=False)
        for target in now:
            if isinstance(target.seen, HakiriError):
                raise target.seen
            refused = target.seen.schema_refusal()
            if refused is not None:
                raise refused
        seen = {t.table.name: t.seen for t in now}
        drifts = target_drift(self.project, self.spec, self.catalog, self.env, seen=seen)
        refuse_frozen_drift(self.spec, drifts)
        recover_stale_claims(self.catalog, self.spec.id, keep=requested)
        # What a crashed run committed is committed before the source plans: a file that
        # changed since is then a change of a loaded file, not of a queued one.
        self._recognise_committed(
            self.catalog.batches(self.spec.id, status=BatchStatus.PENDING), outcome
        )
        added = {i for table in self.spec.table_specs() for i in self._enqueue(table, outcome)}
        self._restore_lost(drifts, outcome)
        pending = self.catalog.batches(self.spec.id, status=BatchStatus.PENDING)
        # New ones too: the ledger outlives a catalog that was lost or reset.
        done = self._recognise_committed([b for b in pending if b.batch_id in added], outcome)
        pending = [b for b in pending if b.batch_id not in done]
        sizes = [b.size_bytes for b in pending]
        self._run_bytes = None if None in sizes else sum(s or 0 for s in sizes)
        draining = self.controls.stopping()  # then a requested run stays pending for later
        if pending and not draining:
            self._load(outcome, total=len(pending), run_id=requested)
        elif requested is not None and not draining:  # answered: there was nothing new
            self.catalog.start_run(self.spec.id, run_id=requested)
            self.catalog.finish_run(requested, RunStatus.SUCCESS, row_count=0)
            outcome.run_id = self.run_id = requested
        self._advance_cursors()
        self._watch_cdc_lag()
        if outcome.status != "failed":
            left = self.catalog.batch_counts(self.spec.id)
            outcome.remaining = left.pending + left.failed
            phase = Phase.BACKFILLING if outcome.remaining else Phase.STREAMING
            if outcome.remaining:
                why = "draining" if self.controls.stopping() else "max_chunks_per_tick"
                outcome.notes.append(f"{outcome.remaining} batch(es) left for the next run ({why})")
            state = self.catalog.pipeline_state(self.spec.id)
            outcome.spec_recorded = state is None or state.spec_hash != spec_hash(self.spec)
            self.catalog.record_applied(
                self.spec.id, normalized_spec(self.spec), spec_hash(self.spec), phase
            )

    def _watch_cdc_lag(self) -> None:
        """A cdc_mirror pipeline's lag as a metric; past `max_lag_bytes`, an alert (once)."""
        lag_of = getattr(self.source, "lag", None)
        if lag_of is None:
            return
        try:
            lag = lag_of(self.catalog)
        except HakiriError:
            return  # the source is unreachable: the run's own error says so
        self.metrics.cdc_lag(lag.behind_seconds, lag.retained_bytes)
        if lag.over_limit:
            self._alert_once(
                "cdc_lag",
                f"pipeline {self.spec.id}: replication slot {lag.slot} retains more WAL than "
                f"max_lag_bytes = {lag.max_lag_bytes}; apply it, or drop the slot "
                f"(`hakiri cdc drop-slot {self.spec.id}`) if the mirror is abandoned",
            )

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

    # ------------------------------------------------------------------ enqueue

    def _enqueue(self, table: TableSpec, outcome: Outcome) -> list[str]:
        """Persist the table's new batches (and retire the queued ones its files no longer
        hold) before any data moves; returns the ids of the batches added."""
        plan = self.source.plan_batches(table, self.catalog)
        planned = self.controls.planned
        if planned is not None and [b.batch_id for b in plan.batches] != planned.get(
            table.name, []
        ):
            raise PlanStale(
                f"plan is stale: pipeline `{self.spec.id}`: the batches of {table.name} changed "
                "after the plan was checked",
                "run hakiri plan again, then apply the new plan",
            )
        if plan.never_matched:
            outcome.warnings.extend(plan.notes)
            self._alert_once(NEVER_MATCHED_ALERT, f"pipeline {self.spec.id}: {plan.notes[0]}")
        else:
            outcome.notes.extend(plan.notes)
        if plan.empty_source:
            self.catalog.add_alert(
                "warning", "empty_source", plan.empty_source, pipeline_id=self.spec.id
            )
        if plan.planning:
            self._set_phase(Phase.PLANNING)
        cursor = (table.name, plan.cursor) if plan.cursor is not None else None
        self.catalog.add_batches(self.spec.id, plan.batches, cursor=cursor, retire=plan.retire)
        for retirement in plan.retire:
            self._retired(outcome, retirement)
        if plan.batches or plan.retire:
            step = EnqueueStep(
                table=table.name,
                batches=[batch_ref(b) for b in plan.batches],
                retired=[retired_ref(r) for r in plan.retire],
            )
            self._steps.append(step)
        if plan.planning and plan.batches:
            self._set_phase(Phase.BACKFILLING)
            outcome.notes.append(f"{table.name}: backfill planned in {len(plan.batches)} chunk(s)")
        return [b.batch_id for b in plan.batches]

    def _restore_lost(self, drifts: Sequence[TargetDrift], outcome: Outcome) -> None:
        """Targets dropped since hakiri loaded them: their batches go back in the queue
        (`engine.restore`). A part the source cannot give back stops the run before anything
        moves, unless the caller chose to go on (`restore_partial`)."""
        if not any(d.lost for d in drifts):
            return
        batches = self.catalog.batches(self.spec.id)
        upcoming: dict[str, list[Batch]] = defaultdict(list)
        for b in live_batches(batches):
            if b.status.unfinished:
                upcoming[b.table_name].append(b)
        lost = lost_targets(self.spec, self.source, drifts, batches, upcoming)
        refused = [t for t in lost if t.lost and not self.controls.restore_partial]
        if refused:
            raise refused[0].refusal()
        for target in lost:
            queue_again(self.spec, target, self.targets, self.catalog)
            self._steps.append(restore_step(target))
            outcome.notes.append(target.describe())

    def _retired(self, outcome: Outcome, retirement: Retirement, run_id: str | None = None) -> None:
        """A batch ended superseded or gone: said in the outcome; a vanished file, once, as a
        warning alert too (a change of content is routine, a file lost before loading is not)."""
        if retirement.status is BatchStatus.GONE:
            outcome.gone += 1
            self.catalog.add_alert(
                "warning", "batch_gone", retirement.reason, pipeline_id=self.spec.id, run_id=run_id
            )
        else:
            outcome.superseded += 1
        outcome.notes.append(retirement.reason)

    def _alert_once(self, kind: str, message: str) -> None:
        """An alert that says the same thing every run is raised the first time only."""
        seen = self.catalog.alerts(pipeline_id=self.spec.id, kind=kind, limit=1000)
        if not any(alert.message == message for alert in seen):
            self.catalog.add_alert("warning", kind, message, pipeline_id=self.spec.id)

    def _replan_retired(self, outcome: Outcome) -> bool:
        """Plan again, once per run, the tables whose batch was superseded or gone while it
        loaded, so their files' current content loads now. A saved plan is executed as
        planned: its next apply picks the new content up. True when batches were added."""
        tables = [
            t
            for t in self.spec.table_specs()
            if t.name in self._replan and t.name not in self._replanned
        ]
        if not tables or self.controls.planned is not None:
            return False
        self.source.refresh()
        added: list[str] = []
        for table in tables:
            self._replanned.add(table.name)
            added += self._enqueue(table, outcome)
        pending = self.catalog.batches(self.spec.id, status=BatchStatus.PENDING)
        done = self._recognise_committed([b for b in pending if b.batch_id in added], outcome)
        return bool(set(added) - done)

    def _continue_walks(self, outcome: Outcome) -> bool:
        """A source that walks pages in order (`rest`) knows its next batch only once the
        previous one committed: plan it now, so one run walks to the last page. A saved
        plan is executed as planned: its next apply continues. True when batches were added."""
        following = getattr(self.source, "next_batches", None)
        if following is None or self.controls.planned is not None:
            return False
        added: list[str] = []
        for table in self.spec.table_specs():
            plan = following(table, self.catalog)
            if plan.batches:
                self.catalog.add_batches(self.spec.id, plan.batches)
                added += [b.batch_id for b in plan.batches]
                for b in plan.batches:
                    self._steps.append(EnqueueStep(table=table.name, batches=[batch_ref(b)]))
        pending = self.catalog.batches(self.spec.id, status=BatchStatus.PENDING)
        done = self._recognise_committed([b for b in pending if b.batch_id in added], outcome)
        return bool(set(added) - done)

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

    def _recognise_committed(self, pending: Sequence[Batch], outcome: Outcome) -> set[str]:
        """Mark committed the pending batches the destination's ledger already has (their
        commit landed, the catalog's record of it did not: a crash, a lost connection);
        returns their ids."""
        done = set()
        for batch in pending:
            destination, request = self.targets.request(batch, run_id="recovery")
            if destination.is_committed(request):
                self.catalog.mark_committed_from_ledger(self.spec.id, batch.batch_id)
                outcome.recovered += 1
                done.add(batch.batch_id)
        return done

    # ------------------------------------------------------------------ load

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
            with self.lineage.run(run.run_id, outcome):  # OpenLineage: START, COMPLETE|FAIL
                status = self._load_run(run, outcome, total)
            current.set_attributes({"hakiri.rows": outcome.rows, "hakiri.status": status.value})
            if status is not RunStatus.SUCCESS:
                set_error(current, outcome.error)
        self.metrics.run_finished(time.monotonic() - started, status.value)

    def _load_run(self, run: RunRecord, outcome: Outcome, total: int) -> RunStatus:
        outcome.run_id = self.run_id = run.run_id
        quality = RunQuality()
        tally = {"bytes": 0}
        try:
            self._hooks("pre", self.spec.hooks.pre, outcome, run, "running")
            self._work(run.run_id, outcome, quality, total, tally)
            if self.audit is not None and outcome.batches:
                audit_run(self.catalog, self.spec, run.run_id, quality, self.audit)
        except HakiriError as exc:
            self._fail(outcome, run.run_id, exc, RunStatus.FAILED, tally["bytes"], quality)
            return RunStatus.FAILED
        outcome.quarantined = quality.quarantined
        try:
            post = self.spec.hooks.post
            if self.spec.load.strategy.post_hook_in_commit:  # its SQL hooks ran in the commit
                post = [h for h in post if not is_sql_like(h)]
            self._hooks("post", post, outcome, run, "success")
        except HakiriError as exc:
            # The rows are committed; only what came after them failed.
            self._fail(outcome, run.run_id, exc, RunStatus.PARTIAL, tally["bytes"], quality)
            return RunStatus.PARTIAL
        anomaly = check_run_row_count(self.catalog, self.spec, run.run_id, outcome.rows)
        if anomaly is not None:
            quality.alerts.append(anomaly)
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
                    # before each claim: a run never outlives its lease
                    keep_lease(self.catalog, self.spec.id, self.holder, controls.lease_ttl)
                    batch = self.catalog.claim_batch(
                        self.spec.id, self.holder, controls.claim_ttl, run_id=run_id
                    )
                    if batch is None and (
                        self._replan_retired(outcome) or self._continue_walks(outcome)
                    ):
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
                    loaded = self.loader.load(batch, run_id, self._run_bytes)
            finally:
                if controls.capacity is not None:
                    controls.capacity.release()
            with self._lock:
                if loaded.retired is not None:
                    status = BatchStatus(loaded.retired.status)
                    self._retired(
                        outcome, Retirement(batch.batch_id, status, loaded.retired.reason), run_id
                    )
                    self._replan.add(batch.table_name)
                    return
                outcome.rows += loaded.result.rows_loaded
                self.lineage.loaded(batch.table_name, loaded.result.rows_loaded)
                outcome.deleted += loaded.result.rows_deleted
                outcome.malformed += loaded.malformed
                outcome.batches += 1
                outcome.timings.append(loaded.timings)
                quality.add(loaded.report, loaded.result)
                tally["bytes"] += batch.size_bytes or 0
                if self.on_batch:
                    done = outcome.batches
                    self.on_batch(self.spec.id, done, max(total, done), outcome.rows)

        # Spark starts before the threads share it; each worker tags its jobs.
        spark = self.spark() if workers > 1 else None
        run_workers(workers, claim, load, spark, tag_prefix=f"hakiri-{self.spec.id}")

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
        alert_run_failed(self.catalog, self.spec.id, run_id, exc.reason)

    def _hooks(
        self, slot: str, hooks: Sequence[Hook], outcome: Outcome, run: RunRecord, status: str
    ) -> None:
        if not hooks:
            return
        target = self.targets.target(self.spec.table_specs()[0])
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
                run_sql=lambda some: self.targets.destination(target).run_sql_hooks(
                    slot, some, target.schema
                ),
                summary=summary,
                env=self.env,
            )
