"""What the plan service gathered before planning: plain frozen data, so planning is a pure function."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from hakiri.catalog.records import Batch, PipelineState
from hakiri.destinations.base import TargetObservation
from hakiri.sources.base import SourceObservation
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
    batches: tuple[Batch, ...] = ()  # table sources: the table's batches in the catalog


@dataclass(frozen=True)
class PipelineObservation:
    pipeline_id: str
    spec: PipelineSpec | None  # None: in the catalog but in no manifest
    state: PipelineState | None  # None: never applied
    tables: tuple[TableObservation, ...] = ()
    errors: tuple[str, ...] = ()  # one line each: an unreachable source or target, ...
