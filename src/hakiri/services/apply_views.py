"""What a whole-project `apply` does to views, after the pipelines ran: the create, replace
and drop plan showed (`planner.views.view_changes`, the same function), recorded in the
catalog as new versions, then the live definitions written to the store's `_views` table.

A view that reads (directly or through other views) a table whose pipeline failed in this
apply is held back: its new SQL may name a column that load was to bring. It is applied by
the next apply that loads the table.

`_views` is rewritten when the catalog's live views differ from what it holds: after a
change, and also when the store lost it (a new store, a crash between the catalog and the
table), so it converges on the catalog.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hakiri.catalog.records import ViewDefinition
from hakiri.catalog.store import Catalog
from hakiri.destinations.context.views_table import VIEWS_TABLE, views_in_store, write_views
from hakiri.engine.controls import Outcome
from hakiri.planner.model import ViewAction, ViewPlan
from hakiri.planner.views import view_changes
from hakiri.spec.loader import Project

__all__ = ["ViewsApplied", "apply_views"]

_DONE = {ViewAction.CREATE: "created", ViewAction.REPLACE: "replaced", ViewAction.DROP: "dropped"}


@dataclass
class ViewsApplied:
    """What apply did to views: `apply --json` lists `changes` after the pipelines."""

    changes: list[dict[str, Any]] = field(default_factory=list)  # {view, status, version, reads}
    live: int = 0  # views live after this apply
    store_version: int | None = None  # the version of `_views` written; None: left as it was
    store: str | None = None  # where `_views` is
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    @property
    def changed(self) -> bool:
        return any(c["status"] in _DONE.values() for c in self.changes)


def apply_views(project: Project, catalog: Catalog, outcomes: Sequence[Outcome]) -> ViewsApplied:
    from hakiri.services.plan import observe_views

    seen = observe_views(project, catalog)
    done = ViewsApplied()
    if seen is None:
        return done
    plans = [v for v in view_changes(seen) if v.action is not ViewAction.NO_OP]
    held = _held(project, plans, outcomes)
    put = [
        ViewDefinition(v.name, v.sql or "", v.description, tuple(v.reads))
        for v in plans
        if v.action in (ViewAction.CREATE, ViewAction.REPLACE) and v.name not in held
    ]
    drop = [v.name for v in plans if v.action is ViewAction.DROP]
    recorded = catalog.record_views(put, drop) if put or drop else []
    by_name = {r.name: r for r in recorded}
    for v in plans:
        if v.name in held:
            done.changes.append(
                {"view": v.name, "status": "held", "reads": v.reads, "warning": held[v.name]}
            )
            done.warnings.append(held[v.name])
            continue
        record = by_name[v.name]
        done.changes.append(
            {
                "view": v.name,
                "status": _DONE[v.action],
                "version": record.version,
                "reads": list(record.reads),
            }
        )
    live = catalog.live_views()
    done.live = len(live)
    store = store_of(project)
    done.store = str(store / VIEWS_TABLE)
    wanted = sorted((v.name, v.version) for v in live.values())
    there = views_in_store(store)
    if there != wanted and (live or there is not None):
        done.store_version = write_views(store, list(live.values()))
        if not recorded:
            done.notes.append(
                f"{VIEWS_TABLE} in the context store did not hold the catalog's views: rewritten"
            )
    return done


def _held(
    project: Project, plans: Sequence[ViewPlan], outcomes: Sequence[Outcome]
) -> dict[str, str]:
    """View -> why it waits: it reads, directly or through views, a failed pipeline's table."""
    from hakiri.spec.connections import destination_kind, target_of

    failed = {o.pipeline_id for o in outcomes if o.status == "failed"}
    if not failed:
        return {}
    tables: dict[str, str] = {}
    for pid in failed:
        spec = project.pipelines.get(pid)
        if spec is None or destination_kind(project.settings, spec) != "context":
            continue
        for table in spec.table_specs():
            tables[target_of(project.settings, spec, table).table.lower()] = pid
    reads = {v.name: v.reads for v in plans}
    reads |= {name: list(_reads_of(project, name)) for name in project.views if name not in reads}
    held: dict[str, str] = {}

    def blocked(name: str, trail: frozenset[str]) -> str | None:
        for read in reads.get(name, []):
            if read in tables:
                return f"{read}, whose pipeline {tables[read]} failed"
            if read in reads and read not in trail:
                found = blocked(read, trail | {read})
                if found:
                    return found
        return None

    for v in plans:
        if v.action is ViewAction.DROP:
            continue
        why = blocked(v.name, frozenset({v.name}))
        if why is not None:
            held[v.name] = (
                f"view {v.name} not {_DONE[v.action]}: it reads {why}; the next apply does it"
            )
    return held


def _reads_of(project: Project, name: str) -> tuple[str, ...]:
    from hakiri.spec.view_checks import view_reads

    return view_reads(project.views[name])


def store_of(project: Project) -> Path:
    from hakiri.spec.connections import project_store

    return project_store(project.root, project.settings)
