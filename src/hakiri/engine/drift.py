"""Marking targets after a load, and finding what changed by hand since (drift).

A run that committed rows to a target (or created it) ends by marking each of the
pipeline's targets in the catalog: its columns and types, primary key and exact row count
as the destination shows them right after the run. `target_drift` compares a mark with the
target now (`planner.drift`). Marks are written only by runs, under the pipeline's lease,
so a load in progress never looks like drift: while the lease is held, rows are not
compared.

The window: a run killed between its last commit and its mark leaves the mark one load
behind; the next plan then reports that load's rows as drift, until the next run marks
again. docs/drift.md says so.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from hakiri.catalog.records import TargetMark
from hakiri.catalog.store import Catalog
from hakiri.destinations.base import TargetObservation
from hakiri.destinations.kinds import kind_of
from hakiri.engine.controls import Outcome
from hakiri.errors import HakiriError, SchemaIncompatible
from hakiri.planner.drift import TargetDrift, find_drift
from hakiri.spec.connections import Target, target_of
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec, TableSpec

__all__ = [
    "TargetNow",
    "mark_after_run",
    "mark_targets",
    "observe_targets",
    "refuse_frozen_drift",
    "target_drift",
]


@dataclass(frozen=True)
class TargetNow:
    """One table entry's target as its destination shows it now."""

    table: TableSpec
    target: Target
    seen: TargetObservation | HakiriError
    rows: int | None = None  # exact, when counted


def observe_targets(
    project: Project,
    spec: PipelineSpec,
    env: Mapping[str, str],
    *,
    count: bool,
    seen: Mapping[str, TargetObservation | HakiriError] | None = None,
) -> list[TargetNow]:
    """Every table entry's target now; `seen` (table name -> observation) spares inspecting
    again what the caller already inspected; `count` also counts each existing target's rows."""
    entries = [(t, target_of(project.settings, spec, t)) for t in spec.table_specs()]
    by_place: dict[tuple[str, str], list[int]] = defaultdict(list)
    places: dict[str, str] = {}
    for i, (_, target) in enumerate(entries):
        if target.kind not in places:
            places[target.kind] = kind_of(target.kind).place(project, spec, env)
        by_place[(target.kind, places[target.kind])].append(i)
    found: list[TargetNow | None] = [None] * len(entries)
    for (kind_name, place), indexes in by_place.items():
        kind = kind_of(kind_name)
        wanted = [(entries[i][1].schema or "public", entries[i][1].table) for i in indexes]
        try:
            given = seen or {}
            if all(entries[i][0].name in given for i in indexes):
                observed = [given[entries[i][0].name] for i in indexes]
            else:
                observed = kind.inspect(place, wanted)
            counts: list[int | None] = [None] * len(indexes)
            if count:
                existing = [
                    j
                    for j, o in enumerate(observed)
                    if isinstance(o, TargetObservation) and o.exists
                ]
                counted = kind.count_rows(place, [wanted[j] for j in existing])
                for j, rows in zip(existing, counted, strict=True):
                    counts[j] = rows
        except HakiriError as exc:
            observed, counts = [exc] * len(indexes), [None] * len(indexes)
        for i, o, rows in zip(indexes, observed, counts, strict=True):
            found[i] = TargetNow(entries[i][0], entries[i][1], o, rows)
    return [f for f in found if f is not None]


def mark_targets(
    project: Project, spec: PipelineSpec, catalog: Catalog, env: Mapping[str, str], run_id: str
) -> list[str]:
    """Mark every existing target of `spec` as the run left it; a warning per target that
    cannot be read now, which loses its mark (no drift report is better than a false one)."""
    warnings = []
    for now in observe_targets(project, spec, env, count=True):
        seen = now.seen
        if isinstance(seen, HakiriError) or not seen.exists:
            if isinstance(seen, HakiriError):
                warnings.append(
                    f"drift of {now.target.display} is not watched until the next load: "
                    f"{seen.reason}"
                )
            catalog.forget_mark(spec.id, now.table.name)
            continue
        catalog.mark_target(
            TargetMark(
                spec.id,
                now.table.name,
                now.target.display,
                tuple((c.name, c.type) for c in seen.columns),
                tuple(seen.primary_key),
                now.rows,
                run_id,
                identity=seen.identity,
            )
        )
    return warnings


def target_drift(
    project: Project,
    spec: PipelineSpec,
    catalog: Catalog,
    env: Mapping[str, str],
    seen: Mapping[str, TargetObservation | HakiriError] | None = None,
) -> list[TargetDrift]:
    """What changed by hand in the pipeline's marked targets; [] for a target never marked or
    that cannot be read now (plan reports that as its own error)."""
    marks = catalog.target_marks(spec.id)
    if not marks:
        return []
    loading = catalog.lease_held(spec.id)
    found = []
    for now in observe_targets(project, spec, env, count=not loading, seen=seen):
        mark = marks.get(now.table.name)
        if mark is None or isinstance(now.seen, HakiriError):
            continue
        drift = find_drift(mark, now.seen, now.rows)
        if drift is not None:
            found.append(drift)
    return found


def mark_after_run(
    project: Project,
    spec: PipelineSpec,
    catalog: Catalog,
    env: Mapping[str, str],
    outcome: Outcome,
    succeeded: bool,
) -> None:
    """After a run that changed its targets (or a successful one of a pipeline never
    marked), under its lease: mark them. A failed run that committed nothing leaves them
    (and a destination that is down) alone. Never fails the run: drift is a report."""
    changed = outcome.batches or outcome.recovered or outcome.deleted
    try:
        if changed or (succeeded and not catalog.target_marks(spec.id)):
            outcome.warnings += mark_targets(project, spec, catalog, env, outcome.run_id or "")
    except HakiriError as exc:
        outcome.warnings.append(f"drift is not watched until the next load: {exc.reason}")


def refuse_frozen_drift(spec: PipelineSpec, drifts: Sequence[TargetDrift]) -> None:
    """Under schema_policy = 'freeze', a target whose columns or key changed by hand since
    hakiri last loaded it is not loaded: the manifest no longer describes it. (A target
    dropped by hand is loaded again as the manifest describes it: `engine.restore`.)"""
    if spec.schema_policy != "freeze":
        return
    changed = [d for d in drifts if d.of_schema and not d.lost]
    if changed:
        raise SchemaIncompatible(
            changed[0].describe() + " (schema_policy = 'freeze')",
            "undo the change by hand, or set schema_policy = 'evolve' for one apply to "
            "load the target as it is now; `hakiri plan` lists every drift",
        )
