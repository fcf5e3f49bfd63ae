"""`hakiri gc`: drop what crashed runs left behind: staging and `_new` tables in PostgreSQL
targets, staging areas in the context store, the link directories of killed commands."""

from __future__ import annotations

import os
from collections import defaultdict
from collections.abc import Mapping
from pathlib import Path

from hakiri.catalog.records import RunStatus
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.destinations.base import Garbage
from hakiri.destinations.kinds import KINDS, kind_of
from hakiri.sources.files.stand_ins import remove_stale_link_dirs
from hakiri.spec.connections import target_of
from hakiri.spec.loader import load_project


def collect_garbage(
    root: Path, older_than_seconds: float, env: Mapping[str, str] | None = None
) -> Garbage:
    """Qualified names of the tables dropped, and of those kept with why. Tables of runs still
    running are never touched."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    project.require_variables(project.pipelines)  # gc visits every destination
    # Read-only: gc never migrates the catalog (only apply, run and replay do).
    with Catalog.open(
        catalog_url(project.root, project.settings.catalog.url, env), migrate=False
    ) as catalog:
        live_runs = {r.run_id for r in catalog.runs(limit=1000) if r.status is RunStatus.RUNNING}
    # Each kind's places (a connection URL, a store directory) with the schemas used there.
    places: dict[tuple[str, str], set[str]] = defaultdict(set)
    for spec in project.pipelines.values():
        for table in spec.table_specs():
            target = target_of(project.settings, spec, table)
            place = kind_of(target.kind).place(project, spec, env)
            places[(target.kind, place)].add(target.schema or "")
    found = Garbage()
    order = list(KINDS)  # the kinds in their registry's order, each kind's places sorted
    for (kind, place), schemas in sorted(places.items(), key=lambda i: (order.index(i[0][0]), i)):
        found.add(
            kind_of(kind).collect_garbage(
                place, sorted(s for s in schemas if s), live_runs, older_than_seconds
            )
        )
    # Links and UTF-8 copies a killed command left for its engine to read (`files.stand_ins`).
    found.dropped += [str(d) for d in remove_stale_link_dirs(project.root, older_than_seconds)]
    return found
