"""The reconciler: which pipeline runs when, in this serve process.

Each pass of the loop (`Reconciler.tick`):

1. A run requested over HTTP (a `pending` run record in the catalog) starts first.
2. Otherwise a pipeline whose schedule has a slot due fires once: the slot is claimed in
   the catalog (`claim_fire`), so across replicas and restarts each slot fires at most
   once, and slots missed while nothing ran collapse into the latest.
3. A fired pipeline runs under its pipeline lease. When another replica holds the lease,
   the fire is skipped (that replica is already doing the work). A backfilling pipeline's
   run only works the chunk queue, up to `max_chunks_per_tick` chunks; a streaming one
   pulls past its cursor.

A pipeline runs at most once at a time in this process; chunks in flight across every
pipeline are capped by `max_parallel_chunks` (one permit per chunk, see RunControls).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from hakiri.catalog.records import ScheduleFire
from hakiri.engine.controls import Outcome, RunControls, holder_id, holder_is_dead
from hakiri.engine.crash import crash_point
from hakiri.engine.failures import record_failed_attempt
from hakiri.engine.run_context import RunContext
from hakiri.engine.runner import PipelineRunner
from hakiri.errors import HakiriError, LeaseHeld
from hakiri.server.quiet_log import QuietLog
from hakiri.server.state import ServeState
from hakiri.services.apply import LazySpark, runner_for, store_changed_by
from hakiri.services.drift import alert_new_drift
from hakiri.spec.base import duration_seconds
from hakiri.spec.pipeline import PipelineSpec
from hakiri.spec.project import ServeSettings
from hakiri.spec.schedule import Schedule, parse_schedule

__all__ = ["Reconciler"]

# How long the replica that fired a pipeline's last slot leaves the next one to the others:
# more than one loop pass (0.5 s) of theirs; alone, it fires the slot this much later.
TURN_SECONDS = 0.8


@dataclass(frozen=True)
class Dispatch:
    """One run to start: why, and for a requested run, the run id it answers."""

    pipeline_id: str
    trigger: str  # schedule | event
    requested: str | None = None
    slot: datetime | None = None  # a scheduled run: the slot it fires


class Reconciler:
    def __init__(
        self,
        state: ServeState,
        spark: LazySpark,
        env: Mapping[str, str],
        settings: ServeSettings,
        log: Callable[[str], None],
    ) -> None:
        self.state, self.spark, self.env, self.log = state, spark, env, log
        self.holder = holder_id()
        self.draining = threading.Event()
        self.capacity = threading.BoundedSemaphore(settings.max_parallel_chunks)
        self.lease_ttl = float(duration_seconds(settings.lease_ttl))
        self._running: dict[str, threading.Thread] = {}
        self._runners: dict[str, PipelineRunner] = {}  # the run each thread is in, for a drain
        self.quiet = QuietLog(log)  # repeated failures: said once, then once a minute
        state.failing = self.quiet.failing
        self._lock = threading.Lock()
        self.drift_every = float(duration_seconds(settings.drift_interval))
        self._drift_due = 0.0  # monotonic time of the next drift check
        self._drift_check: threading.Thread | None = None
        # `[sync] after_apply`: loads committed to the store since its last good sync, and
        # when a failed sync is tried again.
        # One at start-up: a sync that failed before a restart is tried again (a store already
        # in the bucket costs a listing per table).
        self._unpublished = 1
        self._sync_failing = False
        self._sync_due = 0.0
        self._sync: threading.Thread | None = None

    # ------------------------------------------------------------------ deciding

    def tick(self, now: datetime | None = None) -> None:
        """Start every run that is due now."""
        if self.draining.is_set():
            return
        now = now or datetime.now(UTC)
        catalog = self.state.catalog
        pipelines = self.state.project().pipelines
        requested: dict[str, str] = {}
        for run in catalog.pending_runs():
            requested.setdefault(run.pipeline_id, run.run_id)  # oldest first
        for pipeline_id, spec in pipelines.items():
            if self.busy(pipeline_id):
                continue
            dispatch = None
            if pipeline_id in requested:
                dispatch = Dispatch(pipeline_id, "event", requested[pipeline_id])
            elif spec.enabled and spec.schedule and (slot := self._fire(spec, now)) is not None:
                crash_point("after_fire_claim")
                dispatch = Dispatch(pipeline_id, "schedule", slot=slot)
            if dispatch is not None:
                self._start(dispatch, spec)
        self._watch_drift()
        self._watch_sync()

    def _watch_drift(self) -> None:
        """Every `drift_interval`, in a thread of its own (counting rows can take a while):
        an alert per target changed by hand since its last load, once per change."""
        if time.monotonic() < self._drift_due or (
            self._drift_check is not None and self._drift_check.is_alive()
        ):
            return
        self._drift_due = time.monotonic() + self.drift_every
        project = self.state.project()
        idle = [spec for pid, spec in project.pipelines.items() if not self.busy(pid)]
        self._drift_check = threading.Thread(
            target=self._check_drift, args=(project, idle), name="drift", daemon=True
        )
        self._drift_check.start()

    def _check_drift(self, project: Any, specs: list[PipelineSpec]) -> None:
        for spec in specs:
            key = f"{spec.id} drift"
            try:
                for message in alert_new_drift(project, spec, self.state.catalog, self.env):
                    self.log(f"{spec.id}: drift: {message}")
            except HakiriError as exc:
                self.quiet.failed(key, f"{spec.id}: drift not checked: {exc.reason}")
                continue
            self.quiet.ok(key, f"{spec.id} drift check")

    def _watch_sync(self) -> None:
        """Publish the store after runs changed it, in a thread of its own; a failed sync is
        said (and alerted) once, then tried again every `[sync] retry_interval` until it works."""
        if (
            not self._unpublished
            or time.monotonic() < self._sync_due
            or (self._sync is not None and self._sync.is_alive())
        ):
            return
        self._sync = threading.Thread(
            target=self._publish, args=(self._unpublished,), name="sync", daemon=True
        )
        self._sync.start()

    def _publish(self, owed: int) -> None:
        from hakiri.services.sync import sync_after_apply

        project = self.state.project()
        if project.settings.sync is None or not project.settings.sync.after_apply:
            with self._lock:
                self._unpublished -= owed
            return
        attempt = sync_after_apply(project, self.env, alert=not self._sync_failing)
        self._sync_failing = not attempt.ok
        if not attempt.ok:
            retry = duration_seconds(project.settings.sync.retry_interval)
            self._sync_due = time.monotonic() + retry
            self.quiet.failed("sync", f"sync: {attempt.message}")
            return
        with self._lock:
            self._unpublished -= owed  # runs that committed meanwhile are published next
        self.quiet.ok("sync", "sync")
        if attempt.moved:
            self.log(f"sync: {attempt.message}")

    def _fire(self, spec: PipelineSpec, now: datetime) -> datetime | None:
        """The slot this replica fires now, if any: a due one it won, or one whose replica
        won it and died before starting its run (taken over, so a sparse cron slot is not lost)."""
        assert spec.schedule is not None
        catalog = self.state.catalog
        last = catalog.last_fire(spec.id)
        if last is not None and self._abandoned(last, now):
            taken = catalog.take_over_fire(spec.id, last.slot, last.holder, self.holder)
            if taken:
                self.log(
                    f"{spec.id}: slot {last.slot:%Y-%m-%d %H:%M}Z was won by {last.holder}, "
                    "which never started it: running it here"
                )
            return last.slot if taken else None
        slot = slot_to_fire(parse_schedule(spec.schedule), last, now, self.holder)
        if slot is not None and catalog.claim_fire(spec.id, slot, self.holder):
            return slot
        return None

    def _abandoned(self, last: ScheduleFire, now: datetime) -> bool:
        """Won by another replica that has not started its run: because it died (on this host,
        we can tell at once), or it is silent for longer than a lease."""
        if last.started_at is not None or last.holder == self.holder:
            return False
        return holder_is_dead(last.holder) or (now - last.fired_at).total_seconds() > self.lease_ttl

    # ------------------------------------------------------------------ running

    def busy(self, pipeline_id: str) -> bool:
        with self._lock:
            thread = self._running.get(pipeline_id)
            return thread is not None and thread.is_alive()

    def in_flight(self) -> list[str]:
        with self._lock:
            return [pid for pid, thread in self._running.items() if thread.is_alive()]

    def _start(self, dispatch: Dispatch, spec: PipelineSpec) -> None:
        project = self.state.project()  # the run keeps this version even if a reload swaps it
        thread = threading.Thread(
            target=self._run,
            args=(dispatch, project, spec),
            name=f"hakiri-run-{dispatch.pipeline_id}",
            daemon=True,
        )
        with self._lock:
            self._running[dispatch.pipeline_id] = thread
        thread.start()

    def _run(self, dispatch: Dispatch, project: Any, spec: PipelineSpec) -> None:
        if dispatch.slot is not None:
            try:
                self.state.catalog.fire_started(spec.id, dispatch.slot, self.holder)
            except HakiriError as exc:
                self.quiet.failed(spec.id, f"{spec.id}: failed ({dispatch.trigger}): {exc.reason}")
                return
        controls = RunControls(
            lease_ttl=self.lease_ttl,
            claim_ttl=self.lease_ttl,
            draining=self.draining,
            capacity=self.capacity,
            trigger=dispatch.trigger,
        )
        runner = None
        try:
            if self.spark.session is not None:  # this thread's jobs carry the pipeline's tag
                self.spark.session.addTag(f"hakiri-{spec.id}")
            # The project as loaded now (a reload may have changed it), with serve's engine.
            run = RunContext.of(project, self.env, self.spark.get)
            runner = runner_for(run, spec, self.state.catalog, 0.0, controls=controls)
            with self._lock:
                self._runners[spec.id] = runner
            outcome = runner.run(requested=dispatch.requested)
        except LeaseHeld:
            # Another replica runs it; a requested run stays pending for whoever is free next.
            return
        except HakiriError as exc:
            if runner is None or runner.run_id is None:  # failed before its run began
                record_failed_attempt(self.state.catalog, spec.id, exc, dispatch.trigger)
            self.quiet.failed(spec.id, f"{spec.id}: failed ({dispatch.trigger}): {exc.reason}")
            return
        except Exception as exc:  # a bug: reported, and the loop goes on with the others
            self.log(f"{spec.id}: internal error ({dispatch.trigger}): {type(exc).__name__}: {exc}")
            return
        if outcome.status == "failed":
            self.quiet.failed(spec.id, describe(outcome, dispatch.trigger), outcome.error)
            return
        self.quiet.ok(spec.id, spec.id)
        if store_changed_by(project, [outcome]):
            with self._lock:
                self._unpublished += 1
        if outcome.status != "no-op" or dispatch.trigger != "schedule":  # quiet idle slots
            self.log(describe(outcome, dispatch.trigger))

    def drain(self, timeout: float) -> list[str]:
        """Claim nothing more and wait up to `timeout` seconds for runs in flight; returns the
        pipelines still running when the time ran out, whose claims are handed back."""
        self.draining.set()
        with self._lock:
            threads = list(self._running.items())
        deadline = time.monotonic() + timeout
        for _, thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))
        stuck = [pid for pid, thread in threads if thread.is_alive()]
        for pipeline_id in stuck:  # give their claims back now, not after the lease TTL
            with self._lock:
                runner = self._runners.get(pipeline_id)
            if runner is not None:
                try:
                    runner.abandon()
                except HakiriError as exc:  # the catalog is down: the TTL will do it
                    self.log(f"{pipeline_id}: could not hand back its claims: {exc.reason}")
        return stuck


def slot_to_fire(
    schedule: Schedule, last: ScheduleFire | None, now: datetime, holder: str
) -> datetime | None:
    """The slot `holder` should try to claim now, if any.

    Replicas take turns: the one that fired the last slot leaves the next one to the others
    for a moment, so a backfill's ticks spread over the replicas instead of following
    whichever loop happens to pass first. Alone, it fires the slot that moment later.
    """
    slot = schedule.due(last.slot if last else None, now)
    if slot is None:
        return None
    turn = min(TURN_SECONDS, (schedule.interval_seconds or 60) / 2)
    if last is not None and last.holder == holder and now - slot < timedelta(seconds=turn):
        return None
    return slot


def describe(outcome: Outcome, trigger: str) -> str:
    """One log line for a finished run."""
    run = f" run {outcome.run_id}" if outcome.run_id else ""
    if outcome.status == "failed":
        hint = f" (hint: {outcome.hint})" if outcome.hint else ""
        return f"{outcome.pipeline_id}: failed ({trigger}){run}: {outcome.error}{hint}"
    if outcome.status == "no-op":
        return f"{outcome.pipeline_id}: no changes ({trigger}){run}"
    left = f", {outcome.remaining} left" if outcome.remaining else ""
    return (
        f"{outcome.pipeline_id}: {outcome.status} ({trigger}){run}: {outcome.rows} rows in "
        f"{outcome.batches} batch(es){left}, {outcome.seconds:.1f}s"
    )
