"""Saved plans (`hakiri plan -o plan.json`, then `hakiri apply plan.json`), as Terraform has them.

A saved plan is the plan document plus what it was computed from: per pipeline, a
digest of each kind of observation (the manifest, the catalog's state of it, its
targets, its sources). `apply plan.json` observes again and refuses, naming the first
difference, unless every digest is the same: then the planner, a pure function of
those observations, makes the same plan, and apply executes exactly it.

Nothing secret is written: manifests keep their `${VAR}` placeholders unexpanded
(see `spec.interpolate`), URLs are masked, and observations enter as digests only.
Pure: no I/O.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hakiri.planner.model import CatalogInfo, PlanDocument
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.spec.fingerprint import spec_hash

__all__ = ["Observed", "SavedPlan", "observed", "stale_reason"]

FORMAT = "hakiri-plan"


class Observed(BaseModel):
    """Digests of what one pipeline's plan was computed from."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    manifest: str = Field(description="The pipeline's spec as written (placeholders unexpanded).")
    catalog: str = Field(
        description="Its state in the catalog: applied spec, batches, cursors, accepted changes."
    )
    targets: str = Field(description="Its target tables: existence, columns, key, views.")
    sources: str = Field(
        description="Its sources: files (path, size, hash), columns, and the batches they make "
        "now (new rows past a cursor change it; row estimates do not)."
    )


class SavedPlan(BaseModel):
    """What `hakiri plan -o FILE` writes and `hakiri apply FILE` executes."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["hakiri-plan"] = FORMAT
    format_version: Literal[1] = 1
    hakiri_version: str
    created_at: datetime
    project: str
    catalog: CatalogInfo
    named: list[str] = Field(
        default_factory=list,
        description="The pipeline ids `plan` was given; empty: the whole project.",
    )
    observed: dict[str, Observed] = Field(
        description="Per pipeline id: digests of the observations the plan was made from."
    )
    plan: PlanDocument


def observed(obs: PipelineObservation) -> Observed:
    spec = obs.spec
    state = obs.state
    return Observed(
        manifest=_digest(spec_hash(spec) if spec is not None else None),
        catalog=_digest(
            {
                "applied": state.spec_hash if state else None,
                "phase": state.phase.value if state else None,
                "tables": [_catalog_of(t) for t in obs.tables],
            }
        ),
        targets=_digest([_target_of(t) for t in obs.tables]),
        sources=_digest([_source_of(t) for t in obs.tables]),
    )


def stale_reason(
    saved: SavedPlan,
    *,
    version: str,
    project: str,
    catalog_url: str,
    now: Mapping[str, Observed],
) -> str | None:
    """Why `saved` no longer describes what apply would do; None when it still does."""
    if saved.hakiri_version != version:
        return f"it was made by hakiri {saved.hakiri_version}, this is hakiri {version}"
    if saved.project != project:
        return f"it was made for project {saved.project!r}, this is project {project!r}"
    if saved.catalog.url != catalog_url:
        return (
            f"it was made against the catalog {saved.catalog.url}, this project uses {catalog_url}"
        )
    for pipeline_id in sorted(now.keys() - saved.observed.keys()):
        return f"pipeline `{pipeline_id}` is new since the plan"
    for pipeline_id in sorted(saved.observed.keys() - now.keys()):
        return f"pipeline `{pipeline_id}` is gone since the plan"
    for pipeline_id in sorted(saved.observed):
        before, after = saved.observed[pipeline_id], now[pipeline_id]
        if before.manifest != after.manifest:
            return f"pipeline `{pipeline_id}`: its manifest changed"
        if before.catalog != after.catalog:
            return f"pipeline `{pipeline_id}`: its state in the catalog changed (another apply ran)"
        if before.targets != after.targets:
            return f"pipeline `{pipeline_id}`: a target table changed (columns, key or existence)"
        if before.sources != after.sources:
            return f"pipeline `{pipeline_id}`: its source changed (files, columns or new rows)"
    return None


def _catalog_of(t: TableObservation) -> dict[str, Any]:
    return {
        "table": t.table.name,
        "batches": sorted((b.batch_id, b.status.value, b.generation) for b in t.batches),
        "cursor": t.cursor,
        "accepted": sorted(t.accepted),
    }


def _target_of(t: TableObservation) -> dict[str, Any]:
    now = t.target_now
    return {
        "table": t.table.name,
        "target": t.target.display,
        "exists": now.exists if now else None,
        "columns": [(c.name, c.type) for c in now.columns] if now else None,
        "primary_key": list(now.primary_key) if now else None,
        "views": list(now.dependent_views) if now else None,
    }


def _source_of(t: TableObservation) -> dict[str, Any]:
    source, planned = t.source, t.batch_plan
    return {
        "table": t.table.name,
        "columns": [(c.name, c.type) for c in source.columns or ()] if source else None,
        "files": [(f.path, f.size, f.content_hash) for f in source.files] if source else None,
        "batches": [b.batch_id for b in planned.batches] if planned else None,
        "cursor": planned.cursor if planned else None,
    }


def _digest(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return "sha256:" + hashlib.sha256(text.encode()).hexdigest()
