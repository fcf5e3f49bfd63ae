"""`hakiri replay`: load the rows a run quarantined, if they pass the rules as they are now.

Every rule applies with abort treated as skip, so a row that still breaks one stays
quarantined. Rows are added with upsert when the pipeline upserts and inserted (append)
otherwise. The quarantine records of the loaded rows get `replayed_by` in the same
destination transaction, so a replay run twice never loads a row twice.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

from hakiri.catalog.records import RunStatus
from hakiri.catalog.store import Catalog
from hakiri.destinations.base import LoadRequest
from hakiri.destinations.capabilities import check_replay
from hakiri.destinations.kinds import kind_of
from hakiri.engine.controls import Outcome, RunControls
from hakiri.engine.crash import crash_point
from hakiri.engine.leases import take_lease
from hakiri.engine.run_quality import RunQuality, quarantine_table, resolve_run_id
from hakiri.engine.targets import Targets
from hakiri.errors import HakiriError
from hakiri.quality.rules import RuleCheck, check_rows
from hakiri.spec.load import LoadMode
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec, TableSpec

__all__ = ["Replayer"]


class Replayer:
    def __init__(
        self,
        project: Project,
        spec: PipelineSpec,
        catalog: Catalog,
        targets: Targets,
        spark: Callable[[], Any],
        holder: str,
        controls: RunControls,
        lease_timeout: float,
    ) -> None:
        self.project, self.spec, self.catalog, self.targets = project, spec, catalog, targets
        self.spark, self.holder, self.controls = spark, holder, controls
        self.lease_timeout = lease_timeout

    def replay(self, of_run: str) -> Outcome:
        started = time.monotonic()
        outcome = Outcome(self.spec.id, "no-op", self.spec.load.mode.value)
        if not self.spec.quarantine.enabled:
            raise HakiriError(
                f"pipeline `{self.spec.id}` has no quarantine, so there is nothing to replay",
                "enable it with [pipeline.quarantine] enabled = true; later runs keep their rule violations",
            )
        for table in self.spec.table_specs():
            check_replay(kind_of(self.targets.target(table).kind).capabilities)
        of_run = resolve_run_id(self.catalog, self.spec.id, of_run)
        take_lease(
            self.catalog, self.spec.id, self.holder, self.controls.lease_ttl, self.lease_timeout
        )
        try:
            run = self.catalog.start_run(self.spec.id)
            outcome.run_id = run.run_id
            quality = RunQuality(replay_of=of_run)
            try:
                for table in self.spec.table_specs():
                    self._replay_table(table, of_run, run.run_id, outcome, quality)
            except HakiriError as exc:
                outcome.status, outcome.error, outcome.hint = "failed", exc.reason, exc.hint
                outcome.quarantined = quality.quarantined
                self.catalog.finish_run(
                    run.run_id,
                    RunStatus.FAILED,
                    row_count=outcome.rows,
                    bytes=0,
                    error_kind=type(exc).__name__,
                    error_msg=exc.reason,
                    quality=quality.as_dict(),
                )
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

        target = self.targets.target(table)
        quarantine = quarantine_table(self.spec, table, target)
        assert quarantine is not None  # replay() checked that the quarantine is enabled
        load = self.spec.load
        if load.strategy.merge_key(load) is None:  # replayed rows are added, or merged by key
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
        destination = self.targets.destination(target)
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
