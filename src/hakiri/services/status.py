"""`hakiri runs` and `hakiri status`: what the catalog knows, read-only (never migrates)."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hakiri.catalog.records import BatchStatus, RunRecord, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.errors import PipelineNotFound
from hakiri.spec.loader import load_project


def _open(root: Path, env: Mapping[str, str]) -> tuple[list[str], Catalog]:
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    return list(project.pipelines), Catalog.open(url, migrate=False)


def run_json(run: RunRecord) -> dict[str, Any]:
    document = asdict(run)
    document["status"] = run.status.value
    document["duration_seconds"] = (
        (run.ended_at - run.started_at).total_seconds() if run.ended_at else None
    )
    for key in ("started_at", "ended_at"):
        document[key] = document[key].isoformat() if document[key] else None
    return document


def list_runs(
    root: Path,
    pipeline_id: str | None = None,
    limit: int = 20,
    env: Mapping[str, str] | None = None,
) -> list[dict[str, Any]]:
    names, catalog = _open(root, os.environ if env is None else env)
    with catalog:
        if (
            pipeline_id is not None
            and pipeline_id not in names
            and catalog.pipeline_state(pipeline_id) is None
        ):
            raise PipelineNotFound(
                f"no pipeline `{pipeline_id}`", "`hakiri validate` lists the pipelines"
            )
        return [run_json(r) for r in catalog.runs(pipeline_id, limit=limit)]


def pipeline_status(
    root: Path,
    ids: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    now: datetime | None = None,
) -> list[dict[str, Any]]:
    """Per pipeline: phase, batches, throughput and ETA of the latest run, last runs, cursors."""
    names, catalog = _open(root, os.environ if env is None else env)
    now = now or datetime.now(UTC)
    with catalog:
        known = list(dict.fromkeys([*names, *catalog.pipeline_states()]))
        unknown = [i for i in ids if i not in known]
        if unknown:
            raise PipelineNotFound(
                f"no pipeline {', '.join(f'`{i}`' for i in unknown)}",
                "`hakiri validate` lists the pipelines",
            )
        return [_status(catalog, pid, now) for pid in (ids or known)]


def _status(catalog: Catalog, pipeline_id: str, now: datetime) -> dict[str, Any]:
    state = catalog.pipeline_state(pipeline_id)
    counts = catalog.batch_counts(pipeline_id)
    runs = catalog.runs(pipeline_id, limit=5)
    latest = runs[0] if runs else None
    throughput, eta = None, None
    if latest is not None:
        elapsed = ((latest.ended_at or now) - latest.started_at).total_seconds()
        in_run = [
            b
            for b in catalog.batches(pipeline_id, status=BatchStatus.COMMITTED)
            if b.run_id == latest.run_id
        ]
        rows = (
            latest.row_count if latest.row_count is not None else sum(b.rows or 0 for b in in_run)
        )
        size = latest.bytes if latest.bytes is not None else sum(b.size_bytes or 0 for b in in_run)
        if elapsed > 0:
            throughput = {
                "rows_per_sec": round(rows / elapsed, 1),
                "bytes_per_sec": round(size / elapsed, 1),
            }
        if latest.status is RunStatus.RUNNING and in_run and counts.pending:
            eta = round(elapsed / len(in_run) * counts.pending)
    return {
        "pipeline_id": pipeline_id,
        "phase": state.phase.value if state else None,
        "applied_at": state.applied_at.isoformat() if state else None,
        "chunks": {
            "done": counts.committed,
            "running": counts.processing,
            "pending": counts.pending,
            "failed": counts.failed,
            "total": counts.total,
        },
        "throughput": throughput,
        "eta_seconds": eta,
        "started_at": latest.started_at.isoformat() if latest else None,
        "last_runs": [run_json(r) for r in runs],
        "cursors": catalog.cursors(pipeline_id),
    }
