"""`hakiri alerts`, `hakiri errors` and `hakiri replay`: the data-quality side of the catalog and
of the destinations' quarantine tables."""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Alert
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.controls import Outcome
from hakiri.engine.run_context import RunContext
from hakiri.engine.run_quality import quarantine_table, resolve_run_id
from hakiri.errors import HakiriError, PipelineNotFound
from hakiri.services.apply import LazySpark, runner_for
from hakiri.spec.base import duration_seconds
from hakiri.spec.connections import target_of
from hakiri.spec.loader import Project, load_project
from hakiri.spec.pipeline import PipelineSpec


def parse_since(text: str, now: datetime | None = None) -> datetime:
    """'24h', '7d', '30m' (ago), or an ISO date/time (UTC when it has no zone)."""
    now = now or datetime.now(UTC)
    try:
        return now - timedelta(seconds=duration_seconds(text))
    except ValueError:
        pass
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise HakiriError(
            f"--since {text!r} is neither a duration nor a date",
            "use a duration such as 24h or 7d, or an ISO date/time such as 2026-11-01T00:00",
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def list_alerts(
    root: Path,
    *,
    since: datetime | None = None,
    pipeline_id: str | None = None,
    limit: int = 100,
    env: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Newest first, read-only (the catalog is never migrated here)."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    with Catalog.open(url, migrate=False) as catalog:
        alerts = catalog.alerts(since=since, pipeline_id=pipeline_id, limit=limit)
    return [alert_json(a) for a in alerts]


def alert_json(alert: Alert) -> dict[str, Any]:
    """One alert as `hakiri alerts --json` and serve's `GET /v1/alerts` show it."""
    return {
        "id": alert.alert_id,
        "severity": alert.severity,
        "kind": alert.kind,
        "pipeline_id": alert.pipeline_id,
        "run_id": alert.run_id,
        "message": alert.message,
        "created_at": alert.created_at.isoformat() if alert.created_at else None,
    }


def quarantined_rows(
    root: Path,
    pipeline_id: str,
    *,
    run_id: str | None = None,
    limit: int = 50,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The pipeline's quarantined records, newest first, from every table it quarantines into."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    spec = _pipeline(project, pipeline_id)
    project.require_variables([spec.id])
    if run_id is not None:
        url = catalog_url(project.root, project.settings.catalog.url, env)
        with Catalog.open(url, migrate=False) as catalog:
            run_id = resolve_run_id(catalog, spec.id, run_id)
    records: list[dict[str, Any]] = []
    tables: list[str] = []
    spark = LazySpark(project, env=env)  # never started to read a quarantine
    run = RunContext.of(project, env, spark.get)
    for table in spec.table_specs():
        target = target_of(project.settings, spec, table)
        quarantine = quarantine_table(spec, table, target)
        if quarantine is None:
            continue
        shown = f"{quarantine.schema or target.schema}.{quarantine.table}"
        if shown in tables:
            continue
        tables.append(shown)
        destination = run.destination_for(spec)(target)
        found = destination.quarantined(quarantine, spec.id, run_id=run_id, limit=limit)
        records.extend(r.as_dict() for r in found or [])
    if not tables:
        raise HakiriError(
            f"pipeline `{spec.id}` has no quarantine",
            "enable it with [pipeline.quarantine] enabled = true; rows of later runs that break a "
            "warn or skip rule are then kept",
        )
    records.sort(key=lambda r: (r["created_at"], r["id"]), reverse=True)
    return {
        "pipeline_id": spec.id,
        "run_id": run_id,
        "tables": tables,
        "rows": records[:limit],
    }


def replay_run(
    root: Path,
    pipeline_id: str,
    run_id: str,
    *,
    lease_timeout: float = 0.0,
    env: Mapping[str, str] | None = None,
) -> Outcome:
    """Re-validate the rows `run_id` dropped against the current rules; load those that pass."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    spec = _pipeline(project, pipeline_id)
    project.require_variables([spec.id])
    spark = LazySpark(project, env=env)
    run = RunContext.of(project, env, spark.get)
    try:
        url = catalog_url(project.root, project.settings.catalog.url, env)
        with Catalog.open(url, migrate=True) as catalog:
            return runner_for(run, spec, catalog, lease_timeout).replay(run_id)
    finally:
        spark.stop()


def _pipeline(project: Project, pipeline_id: str) -> PipelineSpec:
    if pipeline_id not in project.pipelines:
        raise PipelineNotFound(
            f"no pipeline `{pipeline_id}`", "`hakiri validate` lists the pipelines"
        )
    return project.pipelines[pipeline_id]
