"""`hakiri schema log` and `hakiri schema accept`: the catalog's schema-evolution events.

`log` only reads. `accept` writes one `accept` event per table, naming the changes the
latest refusal (`blocked` event) of that table listed; the next apply applies exactly
those. Like every command but apply, it never migrates the catalog.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.catalog.records import SchemaEvent
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.errors import HakiriError, PipelineNotFound
from hakiri.spec.loader import load_project

__all__ = ["accept", "schema_log"]


def _event(event: SchemaEvent) -> dict[str, Any]:
    return {
        "id": event.event_id,
        "pipeline_id": event.pipeline_id,
        "table": event.table_name,
        "kind": event.kind,
        "detail": event.detail,
        "run_id": event.run_id,
        "created_at": event.created_at.isoformat() if event.created_at else None,
    }


def _open(root: Path, pipeline_id: str, env: Mapping[str, str]) -> Catalog:
    project = load_project(root, env)
    catalog = Catalog.open(
        catalog_url(project.root, project.settings.catalog.url, env), migrate=False
    )
    if pipeline_id not in project.pipelines and catalog.pipeline_state(pipeline_id) is None:
        catalog.close()
        raise PipelineNotFound(
            f"no pipeline `{pipeline_id}`", "`hakiri validate` lists the pipelines"
        )
    return catalog


def schema_log(
    root: Path, pipeline_id: str, env: Mapping[str, str] | None = None
) -> list[dict[str, Any]]:
    """Every schema event of the pipeline, oldest first."""
    with _open(root, pipeline_id, os.environ if env is None else env) as catalog:
        return [_event(e) for e in catalog.schema_events(pipeline_id)]


def accept(
    root: Path,
    pipeline_id: str,
    *,
    table: str | None = None,
    reason: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Accept the changes the latest refusal of each table named; returns the accept events."""
    with _open(root, pipeline_id, os.environ if env is None else env) as catalog:
        pending: dict[str, SchemaEvent] = {}
        for event in catalog.schema_events(pipeline_id):  # oldest first
            if table is not None and event.table_name != table:
                continue
            if event.kind == "blocked":
                pending[event.table_name] = event
            elif event.kind == "accept":
                pending.pop(event.table_name, None)
        if not pending:
            scope = f"table {table} of " if table else ""
            raise HakiriError(
                f"nothing to accept: no run of {scope}`{pipeline_id}` was refused for its schema "
                "since the last accept",
                f"`hakiri schema log {pipeline_id}` lists the schema events",
            )
        accepted = []
        for name, blocked in pending.items():
            detail = {
                "changes": blocked.detail.get("changes", []),
                "describe": blocked.detail.get("describe", []),
                "blocked_event": blocked.event_id,
                "reason": reason,
            }
            accepted.append(_event(catalog.log_schema_event(pipeline_id, name, "accept", detail)))
        return accepted
