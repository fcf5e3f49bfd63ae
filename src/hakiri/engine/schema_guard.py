"""Discovery before a batch is staged: compare the batch's columns with the target, log, evolve.

The decision (`planner.evolution.decide`, the function `plan` calls too) is recorded in the catalog's schema log
before the destination changes anything, and the destination applies it before
any row of the batch moves. A refusal is logged as `blocked` (with the changes it
named, which `hakiri schema accept` can then accept) and stops the run.
"""

from __future__ import annotations

from typing import Any

from hakiri.catalog.records import SchemaEvent
from hakiri.catalog.store import Catalog
from hakiri.destinations.base import Destination, LoadRequest
from hakiri.engine.evidence import settle_unvalued, shape_like_target
from hakiri.planner.builder import evolve_step
from hakiri.planner.evolution import (
    SchemaRefused,
    accepted_changes,
    check_upsert_key,
    decide,
    upsert_key_change,
)
from hakiri.planner.model import Column, EvolveStep
from hakiri.planner.types import destination_type
from hakiri.spec.connections import destination_kind
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["SchemaGuard"]


class SchemaGuard:
    def __init__(self, project: Project, spec: PipelineSpec, catalog: Catalog) -> None:
        self.project, self.spec, self.catalog = project, spec, catalog
        self.kind = destination_kind(project.settings, spec)
        self._logged: set[tuple[str, str, str]] = set()  # (table, kind, column) logged this run
        self._key_checked = False  # the applied spec cannot change during a run: check it once
        # What this run did to each target, as `plan` shows it: the first decision per table.
        self.steps: dict[str, EvolveStep] = {}

    def shape_empty(self, frame: Any, destination: Destination, request: LoadRequest) -> Any:
        """A batch with no data record and no declared types: the frame to stage, shaped like the
        target (so it loads 0 rows as any empty batch does); None when there is no target yet,
        since nothing in the batch says what its columns would be. Never a schema event."""
        target = destination.target_columns(request)
        if target is None:
            return None
        return shape_like_target(frame, target, self.kind)

    def discover(
        self,
        table: str,
        frame: Any,
        destination: Destination,
        request: LoadRequest,
        guessed: frozenset[str] = frozenset(),
    ) -> Any:
        """The frame to stage (minus discarded columns), after evolving the target if needed.
        `guessed` names the columns whose type Spark inferred from the batch's values."""
        if request.replay_of:
            return frame  # a replay loads rows in the target's own columns
        # `frame` is prepared (`engine.prepare`): transformed, renamed, shaped for the mode.
        target = destination.target_columns(request)
        # cdc_mirror's op: staged to tell the write what to do, never a column of the target.
        control = set(self.spec.load.strategy.control_columns)
        fields = [f for f in frame.schema.fields if f.name not in control]
        if target is None:  # the first load creates the target with the batch's columns
            columns = [
                Column(name=f.name, type=destination_type(f.dataType.simpleString(), self.kind))
                for f in fields
            ]
            self._step(EvolveStep(table=table, create=True, columns=columns))
            return frame
        where = f"pipeline `{self.spec.id}`, table {table} -> {request.target_table}"
        self._check_key(table, where)
        if guessed:
            frame = settle_unvalued(frame, target, guessed, self.kind)
        source = [
            (f.name, f.dataType.simpleString())
            for f in frame.schema.fields
            if f.name not in control
        ]
        events = self.catalog.schema_events(self.spec.id)
        try:
            decision = decide(
                source,
                target,
                destination_kind=self.kind,
                policy=self.spec.schema_policy,
                renames=self.spec.renames,
                accepted=accepted_changes(events, table),
                where=where,
                guessed=guessed,
            )
        except SchemaRefused as refused:
            policy = self.spec.schema_policy
            self._step(
                EvolveStep(table=table, refused=[b.refusal(policy) for b in refused.blocked])
            )
            # Recorded so `hakiri schema accept` knows what it accepts; raised again unchanged.
            self.catalog.log_schema_event(
                self.spec.id,
                table,
                "blocked",
                {
                    "policy": self.spec.schema_policy,
                    "changes": [[b.kind, b.column] for b in refused.blocked],
                    "describe": [b.describe() for b in refused.blocked],
                },
                run_id=request.run_id,
            )
            raise
        for kind, detail in decision.events():
            self._log(table, kind, detail, request.run_id, events)
        if not decision.change.empty or decision.discard:
            self._step(evolve_step(table, decision))
        if not decision.change.empty:
            destination.evolve(request, decision.change)
        if decision.discard:
            frame = frame.drop(*decision.discard)
        return frame

    def _step(self, step: EvolveStep) -> None:
        self.steps.setdefault(step.table, step)

    def _check_key(self, table: str, where: str) -> None:
        """An upsert key changed on an existing target is refused (and recorded as the step)."""
        load = self.spec.load
        if load.strategy.merge_key(load) is None or self._key_checked:
            return
        state = self.catalog.pipeline_state(self.spec.id)
        applied = (state.applied_spec.get("load") or {}).get("upsert_key") if state else None
        change = upsert_key_change(applied, self.spec.load.upsert_key)
        if change is not None:
            self._step(EvolveStep(table=table, refused=[change]))
        check_upsert_key(applied, self.spec.load.upsert_key, where)
        self._key_checked = True

    def _log(
        self,
        table: str,
        kind: str,
        detail: dict[str, Any],
        run_id: str,
        events: list[SchemaEvent],
    ) -> None:
        column = str(detail.get("column") or detail.get("to"))
        if kind in ("missing_column", "discard_column"):
            # Said once: while the source keeps not sending it, nothing new happens.
            latest = [e for e in events if e.table_name == table and _column(e) == column]
            if (latest and latest[-1].kind == kind) or (table, kind, column) in self._logged:
                return
        self._logged.add((table, kind, column))
        self.catalog.log_schema_event(self.spec.id, table, kind, detail, run_id=run_id)


def _column(event: SchemaEvent) -> str:
    return str(event.detail.get("column") or event.detail.get("to"))
