"""`hakiri cdc lag` and `hakiri cdc drop-slot`: a cdc_mirror pipeline's replication slot.

Both read the manifests and the catalog; `lag` changes nothing. `drop-slot` holds the
pipeline's lease while it drops the slot, so no apply is reading it; the server then
recycles the WAL it kept, and the pipeline's next apply takes a new snapshot of every
table (changes between the last applied range and the new snapshot are in that snapshot).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.controls import holder_id, holder_is_dead
from hakiri.errors import HakiriError, LeaseHeld, PipelineNotFound
from hakiri.sources.cdc.lag import ChangeStream
from hakiri.sources.kinds import kind_of, source_for
from hakiri.spec.loader import Project, load_project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["drop_slot", "lag", "lag_reader"]

_LEASE_TTL_SECONDS = 60.0


def _source(root: Path, pipeline_id: str, env: Mapping[str, str]) -> tuple[ChangeStream, str]:
    project = load_project(root, env)
    spec = project.pipelines.get(pipeline_id)
    if spec is None:
        raise PipelineNotFound(f"no pipeline `{pipeline_id}`", "`hakiri validate` lists them")
    project.require_variables([spec.id])
    source = source_for(project.root, project.settings, spec, env)
    if not isinstance(source, ChangeStream):
        raise HakiriError(
            f"pipeline `{pipeline_id}` reads no change stream (its source has no `cdc`)",
            "`hakiri cdc` works on cdc_mirror pipelines",
        )
    return source, catalog_url(project.root, project.settings.catalog.url, env)


def lag(root: Path, pipeline_id: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """The pipeline's slot and how far its targets are behind the WAL."""
    env = os.environ if env is None else env
    source, url = _source(root, pipeline_id, env)
    with Catalog.open(url, migrate=False) as catalog:
        found = source.lag(catalog)
    return {"pipeline_id": pipeline_id, **found.model_dump(mode="json")}


def drop_slot(root: Path, pipeline_id: str, env: Mapping[str, str] | None = None) -> dict[str, Any]:
    """Drop the pipeline's replication slot, under its lease."""
    env = os.environ if env is None else env
    source, url = _source(root, pipeline_id, env)
    with Catalog.open(url, migrate=False) as catalog:

        def under_lease(drop: Callable[[], bool]) -> bool:
            holder = holder_id()
            lease = catalog.acquire_lease(pipeline_id, holder, _LEASE_TTL_SECONDS)
            if not lease.acquired and holder_is_dead(lease.holder):
                catalog.release_lease(pipeline_id, lease.holder)
                lease = catalog.acquire_lease(pipeline_id, holder, _LEASE_TTL_SECONDS)
            if not lease.acquired:
                raise LeaseHeld(
                    f"pipeline `{pipeline_id}` is running on {lease.host}",
                    "wait for it to finish, then drop the slot",
                )
            try:
                return drop()
            finally:
                catalog.release_lease(pipeline_id, holder)

        dropped = source.drop_slot(under_lease)
    return {"pipeline_id": pipeline_id, "slot": source.slot, "dropped": dropped}


def lag_reader(
    project: Project, catalog: Catalog, env: Mapping[str, str]
) -> Callable[[PipelineSpec], dict[str, Any] | None]:
    """For `status` and the API: a cdc_mirror pipeline's lag as JSON (`{"error": …}` when
    its source cannot be reached); None for other pipelines."""

    def lag_of(spec: PipelineSpec) -> dict[str, Any] | None:
        if not kind_of(spec).follows_changes(spec):
            return None
        try:
            source = source_for(project.root, project.settings, spec, env)
            assert isinstance(source, ChangeStream)
            return source.lag(catalog).model_dump(mode="json")
        except HakiriError as exc:
            return {"error": exc.reason}

    return lag_of
