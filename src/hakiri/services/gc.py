"""`hakiri gc`: drop what crashed runs left behind: staging and `_new` tables in PostgreSQL
targets, staging areas in the context store."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from hakiri.catalog.records import RunStatus
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.spec.connections import context_store_path, destination_url, target_of
from hakiri.spec.loader import load_project


def collect_garbage(
    root: Path, older_than_seconds: float, env: Mapping[str, str] | None = None
) -> list[str]:
    """Qualified names of the tables dropped. Tables of runs still running are never touched."""
    from hakiri.destinations.context.garbage import gc_context
    from hakiri.destinations.postgres import gc

    env = os.environ if env is None else env
    project = load_project(root, env)
    # Read-only: gc never migrates the catalog (only apply, run and replay do).
    with Catalog.open(
        catalog_url(project.root, project.settings.catalog.url, env), migrate=False
    ) as catalog:
        live_runs = {r.run_id for r in catalog.runs(limit=1000) if r.status is RunStatus.RUNNING}
    schemas_by_url: dict[str, set[str]] = defaultdict(set)
    stores: set[Path] = set()
    for spec in project.pipelines.values():
        for table in spec.table_specs():
            target = target_of(project.settings, spec, table)
            if target.kind == "context":
                stores.add(context_store_path(project.root, project.settings, spec))
            elif target.kind == "postgres":
                schemas_by_url[destination_url(project.settings, spec, env)].add(
                    target.schema or "public"
                )
    dropped: list[str] = []
    for url, schemas in schemas_by_url.items():
        dropped += gc(
            url, sorted(schemas), live_runs=live_runs, older_than_seconds=older_than_seconds
        )
    for store in sorted(stores):
        dropped += gc_context(store, live_runs=live_runs, older_than_seconds=older_than_seconds)
    return dropped
