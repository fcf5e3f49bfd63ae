"""`hakiri runs`, `hakiri status` and serve's /v1/pipelines: what the catalog knows, read-only."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus, PipelineState, RunRecord, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.failures import NEVER_MATCHED_ALERT
from hakiri.errors import PipelineNotFound
from hakiri.planner.backfill import current_plan, live_batches
from hakiri.spec.loader import load_project
from hakiri.spec.pipeline import PipelineSpec


def _open(root: Path, env: Mapping[str, str]) -> tuple[dict[str, PipelineSpec], Catalog]:
    """The manifests' pipelines (in manifest order) and the catalog, opened without migrating."""
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    return dict(project.pipelines), Catalog.open(url, migrate=False)


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
    """`recent_runs` of the project at `root`."""
    specs, catalog = _open(root, os.environ if env is None else env)
    with catalog:
        return recent_runs(catalog, specs, pipeline_id, limit)


def recent_runs(
    catalog: Catalog,
    specs: Mapping[str, PipelineSpec],
    pipeline_id: str | None = None,
    limit: int = 20,
) -> list[dict[str, Any]]:
    """The runs of one pipeline (or of all), newest first, as `run_json` documents.

    A pipeline is known when a manifest defines it or the catalog remembers it.
    """
    if (
        pipeline_id is not None
        and pipeline_id not in specs
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
    """`pipeline_statuses` of the project at `root`, with cdc_mirror pipelines' lag and
    every pipeline's drift."""
    from hakiri.services.cdc import lag_reader
    from hakiri.services.drift import drift_reader

    env = os.environ if env is None else env
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    with Catalog.open(url, migrate=False) as catalog:
        lag_of = lag_reader(project, catalog, env)
        drift_of = drift_reader(project, catalog, env)
        return pipeline_statuses(catalog, dict(project.pipelines), ids, now, lag_of, drift_of)


def pipeline_statuses(
    catalog: Catalog,
    specs: Mapping[str, PipelineSpec],
    ids: Sequence[str] = (),
    now: datetime | None = None,
    lag_of: Callable[[PipelineSpec], dict[str, Any] | None] | None = None,
    drift_of: Callable[[PipelineSpec], Any] | None = None,
) -> list[dict[str, Any]]:
    """Per pipeline: phase, chunks, throughput and ETA, rate budget, last runs, cursors.

    The document of one pipeline::

        {"pipeline_id", "phase", "applied_at",
         "chunks": {"done", "running", "pending", "failed", "superseded", "gone", "total"},
         "throughput": {"rows_per_sec", "bytes_per_sec"} | null,
         "eta_seconds": int | null, "started_at", "rate_budget": "60/min" | null,
         "last_error": {"run_id", "at", "kind", "message"} | null,
         "retired": [{"batch_id", "file", "status", "reason"}],
         "warnings": [...], "last_runs": [...], "cursors": {table: cursor state},
         "cdc": {slot, applied_to, behind_bytes, behind_seconds, retained_bytes, …} | null,
         "drift": [{table, target, columns_added, …, message}] | {"error"} | null}

    `cdc` is a cdc_mirror pipeline's lag behind its source's WAL, asked of the source
    when `lag_of` is given (`services.cdc.lag_reader`); null for other pipelines.
    `drift` lists the targets changed by hand since hakiri last loaded them, when
    `drift_of` is given (`services.drift.drift_reader`); null otherwise.

    `chunks` counts the pipeline's batches (chunks of table sources, files, snapshots)
    without older generations: a chunk a rewind re-added at a higher generation counts
    once, as its newest generation; the older batch is history. `superseded` and `gone`
    count batches that ended without loading because their file changed or vanished
    before they committed; `retired` lists the latest few of them, with the reason.

    `last_error` is the newest failed run's error, also of an attempt that failed before
    any batch started (a refused connection, a missing secret, a lease held elsewhere).
    `warnings` are standing problems the catalog knows of: a files source whose path has
    never matched a file.

    `started_at` is when the current backfill started: the earliest `created_at` of the
    live batches of the plan being worked on (or of the last plan, once all of it is
    committed) — chunks are written to the catalog by the run that starts the backfill,
    or by `backfill rewind`, before any row moves. Without batches it is the latest
    run's start.

    `throughput` is the latest run's rows (and bytes, null when the batches carry no
    size, as chunks do) over its elapsed time: until now while it runs, its duration
    once it ended. `eta_seconds` is given while that run is running: remaining batches
    (pending + running) times the wall-clock seconds per batch committed so far in the
    run. Measured on the wall clock, that rate already includes chunks loading side by
    side, so it is not divided by the parallelism again.
    """
    now = now or datetime.now(UTC)
    known = list(dict.fromkeys([*specs, *catalog.pipeline_states()]))
    unknown = [i for i in ids if i not in known]
    if unknown:
        raise PipelineNotFound(
            f"no pipeline {', '.join(f'`{i}`' for i in unknown)}",
            "`hakiri validate` lists the pipelines",
        )
    found = []
    for pid in ids or known:
        status = _status(catalog, pid, specs.get(pid), now)
        spec = specs.get(pid)
        status["cdc"] = lag_of(spec) if lag_of is not None and spec is not None else None
        status["drift"] = drift_of(spec) if drift_of is not None and spec is not None else None
        found.append(status)
    return found


def _status(
    catalog: Catalog, pipeline_id: str, spec: PipelineSpec | None, now: datetime
) -> dict[str, Any]:
    state = catalog.pipeline_state(pipeline_id)
    everything = catalog.batches(pipeline_id)
    batches = live_batches(everything)
    counts = {status: sum(b.status is status for b in batches) for status in BatchStatus}
    runs = catalog.runs(pipeline_id, limit=5)
    # A run requested over HTTP and not started yet has no pace to measure.
    latest = next((r for r in runs if r.status is not RunStatus.PENDING), None)
    remaining = counts[BatchStatus.PENDING] + counts[BatchStatus.PROCESSING]
    throughput, eta = None, None
    if latest is not None:
        throughput, eta = _pace(latest, everything, remaining, now)
    plan = current_plan(batches)
    started = min((b.created_at for b in plan if b.created_at is not None), default=None)
    if started is None and latest is not None:
        started = latest.started_at
    return {
        "pipeline_id": pipeline_id,
        "phase": state.phase.value if state else None,
        "applied_at": state.applied_at.isoformat() if state else None,
        "chunks": {
            "done": counts[BatchStatus.COMMITTED],
            "running": counts[BatchStatus.PROCESSING],
            "pending": counts[BatchStatus.PENDING],
            "failed": counts[BatchStatus.FAILED],
            "superseded": counts[BatchStatus.SUPERSEDED],
            "gone": counts[BatchStatus.GONE],
            "total": len(batches),
        },
        "throughput": throughput,
        "eta_seconds": eta,
        "started_at": started.isoformat() if started else None,
        "rate_budget": _rate_budget(spec, state),
        "last_error": _last_error(catalog, pipeline_id, runs),
        "retired": [
            {
                "batch_id": b.batch_id,
                "file": b.file_path,
                "status": b.status.value,
                "reason": b.error,
            }
            for b in sorted((b for b in batches if b.status.retired), key=lambda b: -b.seq)[:5]
        ],
        "warnings": _warnings(catalog, pipeline_id, everything),
        "last_runs": [run_json(r) for r in runs],
        "cursors": catalog.cursors(pipeline_id),
    }


def _last_error(
    catalog: Catalog, pipeline_id: str, runs: Sequence[RunRecord]
) -> dict[str, Any] | None:
    """The newest failed run's error (looked for past the last runs shown, if need be)."""
    failed = [r for r in runs if r.status is RunStatus.FAILED]
    if not failed:
        failed = [r for r in catalog.runs(pipeline_id, limit=50) if r.status is RunStatus.FAILED]
    if not failed:
        return None
    run = failed[0]
    return {
        "run_id": run.run_id,
        "at": (run.ended_at or run.started_at).isoformat(),
        "kind": run.error_kind,
        "message": run.error_msg,
    }


def _warnings(catalog: Catalog, pipeline_id: str, batches: Sequence[Batch]) -> list[str]:
    """A path that has never matched a file: its alert stands while the pipeline has no batch."""
    if batches:
        return []
    found = catalog.alerts(pipeline_id=pipeline_id, kind=NEVER_MATCHED_ALERT, limit=20)
    return list(dict.fromkeys(alert.message for alert in found))


def _pace(
    run: RunRecord, batches: Sequence[Batch], remaining: int, now: datetime
) -> tuple[dict[str, float | None] | None, int | None]:
    """(throughput, eta_seconds) of `run`; see `pipeline_status`.

    `batches` are all of the pipeline's, superseded ones included: their rows were loaded.
    """
    elapsed = ((run.ended_at or now) - run.started_at).total_seconds()
    if elapsed <= 0:
        return None, None
    in_run = [b for b in batches if b.status is BatchStatus.COMMITTED and b.run_id == run.run_id]
    rows = run.row_count if run.row_count is not None else sum(b.rows or 0 for b in in_run)
    size = run.bytes or sum(b.size_bytes or 0 for b in in_run)
    throughput = {
        "rows_per_sec": round(rows / elapsed, 1),
        "bytes_per_sec": round(size / elapsed, 1) if size or not rows else None,
    }
    eta = None
    if run.status is RunStatus.RUNNING and in_run:
        eta = round(elapsed / len(in_run) * remaining)
    return throughput, eta


def _rate_budget(spec: PipelineSpec | None, state: PipelineState | None) -> str | None:
    """`[pipeline.backfill] rate_budget` from the manifest, else as last applied."""
    if spec is not None:
        return spec.backfill.rate_budget if spec.backfill else None
    if state is None:
        return None
    backfill = state.applied_spec.get("backfill") or {}
    budget = backfill.get("rate_budget")
    return str(budget) if budget is not None else None
