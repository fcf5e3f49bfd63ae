"""What the plan service gathered before planning: plain frozen data, so planning is a pure function.

`plan` and `apply` gather the same observations: the source's own batch planner
(`Source.plan_batches`) says which batches are new, the catalog says which are queued.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hakiri.catalog.records import Batch, PipelineState
from hakiri.destinations.base import ChangeCount, TargetObservation
from hakiri.planner.drift import TargetDrift
from hakiri.planner.restore import LostTarget
from hakiri.sources.base import SourceObservation, TablePlan
from hakiri.sources.cdc.lag import CdcLag
from hakiri.spec.connections import Target
from hakiri.spec.pipeline import PipelineSpec, TableSpec


@dataclass(frozen=True)
class TableObservation:
    table: TableSpec
    target: Target
    source: SourceObservation | None = None
    target_now: TargetObservation | None = None
    committed_files: Mapping[str, str] = field(
        default_factory=dict
    )  # path -> content hash already loaded
    cursor: Mapping[str, Any] | None = None  # table sources: the stored cursor state
    batches: tuple[Batch, ...] = ()  # the table's batches in the catalog
    # The batches the source would add now (None: the source could not be observed).
    batch_plan: TablePlan | None = None
    # (kind, column) changes `hakiri schema accept` accepted and no load has applied yet.
    accepted: frozenset[tuple[str, str]] = frozenset()
    # Delete-detecting loads: (the next snapshot's batch id, target rows it would delete or
    # close, live target rows in scope), counted by Spark; None when not counted.
    deletes: tuple[str, int, int] | None = None
    # Keyed loads (upsert, scd2): (the next batch's id, what it would insert, update, leave
    # unchanged and delete), counted by Spark (`plan --count-changes`); None when not counted.
    changes: tuple[str, ChangeCount] | None = None
    # The target was dropped since hakiri loaded it: the committed batches apply loads again.
    reload: tuple[Batch, ...] = ()


@dataclass(frozen=True)
class PipelineObservation:
    pipeline_id: str
    spec: PipelineSpec | None  # None: in the catalog but in no manifest
    state: PipelineState | None  # None: never applied
    tables: tuple[TableObservation, ...] = ()
    errors: tuple[str, ...] = ()  # one line each: an unreachable source or target, ...
    has_cursors: bool = False  # a table source: chunks may load in parallel
    skipped: bool = False  # disabled and not named: apply leaves it alone
    cdc: CdcLag | None = None  # cdc_mirror: the lag behind the source's WAL
    # Targets changed by hand since hakiri last loaded them (`engine.drift`).
    drift: tuple[TargetDrift, ...] = ()
    # Of those, the targets dropped (or dropped and created again): what apply does about them.
    lost: tuple[LostTarget, ...] = ()
    # Warnings about the manifests themselves (a compiled transforms file older than its module).
    notes: tuple[str, ...] = ()
