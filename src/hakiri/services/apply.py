"""`hakiri apply [IDS]` and `hakiri run ID`: run pipelines to convergence.

The catalog is opened with migrations (apply is allowed to upgrade it). Spark
starts lazily, once, and only when some batch actually needs reading: an apply
with nothing new to load never starts a JVM.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from hakiri import observability
from hakiri.catalog.records import Phase
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.controls import Outcome, RunControls
from hakiri.engine.failures import record_failed_attempt
from hakiri.engine.progress import ProgressWatch
from hakiri.engine.run_context import RunContext
from hakiri.engine.runner import PipelineRunner
from hakiri.errors import HakiriError, PipelineNotFound
from hakiri.planner.builder import applied_now
from hakiri.planner.model import EnqueueStep, RetireStep
from hakiri.services.apply_views import ViewsApplied, apply_views
from hakiri.services.runtime import LazySpark
from hakiri.spec.loader import Project, load_project
from hakiri.spec.pipeline import PipelineSpec


def apply_project(
    root: Path,
    ids: Sequence[str] = (),
    *,
    fail_fast: bool = False,
    lease_timeout: float = 0.0,
    env: Mapping[str, str] | None = None,
    on_outcome: Callable[[Outcome], None] | None = None,
    on_batch: Callable[[str, int, int, int], None] | None = None,
    planned: Mapping[str, dict[str, list[str]]] | None = None,
    progress: ProgressWatch | None = None,
    restore_partial: bool = False,
    on_views: Callable[[ViewsApplied], None] | None = None,
) -> list[Outcome]:
    """`planned` (from a saved plan): per pipeline, the batches each table may enqueue;
    `progress`: who is told, and how often, how far a batch in flight has got;
    `restore_partial`: a target dropped by hand is loaded again with what its source still
    has, even when part of it cannot come back (`engine.restore`); `on_views`: told what a
    whole-project apply (no `ids`) did to views, after the pipelines (`services.apply_views`)."""
    env = os.environ if env is None else env
    observability.configure(env)
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    _check_ids(project, url, ids)
    project.require_variables(ids or project.pipelines)
    outcomes: list[Outcome] = []
    spark = LazySpark(project, env=env)
    spark.start_early()  # the engine starts while the catalog opens and the sources are listed
    run = RunContext.of(project, env, spark.get)
    views: ViewsApplied | None = None
    try:
        from hakiri import pgpool  # psycopg: imported by the commands that talk to PostgreSQL

        # One connection per server for the command's questions, not one per question.
        with Catalog.open(url, migrate=True) as catalog, pgpool.keep_open():
            removed = _removed(project, catalog)
            specs = [
                project.pipelines[i]
                for i in (ids or project.pipelines)
                if i in project.pipelines and applied_now(project.pipelines[i], bool(ids))
            ]
            for spec in specs:
                controls = None
                if planned or restore_partial:
                    controls = RunControls(
                        planned=planned.get(spec.id, {}) if planned else None,
                        restore_partial=restore_partial,
                    )
                outcome = run_one(run, spec, catalog, lease_timeout, on_batch, controls, progress)
                outcomes.append(outcome)
                if on_outcome:
                    on_outcome(outcome)
                if fail_fast and outcome.status == "failed":
                    break
            # A whole-project apply converges like Terraform: removed means retired.
            retire = [i for i in removed if i in ids] if ids else removed
            for outcome in _retire(catalog, retire):
                outcomes.append(outcome)
                if on_outcome:
                    on_outcome(outcome)
            # Views last: a view's new SQL may read what this apply's loads bring.
            views = None if ids else apply_views(project, catalog, outcomes)
    finally:
        spark.stop()
    publish_store(project, outcomes, env, views)
    if views is not None and on_views is not None:
        on_views(views)
    return outcomes


def publish_store(
    project: Project,
    outcomes: Sequence[Outcome],
    env: Mapping[str, str],
    views: ViewsApplied | None = None,
) -> None:
    """`[sync] after_apply`: the loads are committed; sync the store if one of them (or the
    views' `_views` table) changed it. How it went is told on those pipelines' outcomes, or
    the views' (a failure as a warning: it never fails a load)."""
    from hakiri.services.sync import sync_after_apply

    changed = store_changed_by(project, outcomes)
    rewrote = views is not None and views.store_version is not None
    sync = project.settings.sync
    if not changed and not (rewrote and sync is not None and sync.after_apply):
        return
    attempt = sync_after_apply(project, env)
    for told in [*changed, *([views] if rewrote and views is not None else [])]:
        if attempt.ok:
            told.notes.append(attempt.message)
        else:
            told.warnings.append(attempt.message)


def store_changed_by(project: Project, outcomes: Sequence[Outcome]) -> list[Outcome]:
    """Those outcomes that committed to the project's context store, when `[sync]
    after_apply` wants it published after them."""
    from hakiri.spec.connections import lands_in_store

    sync = project.settings.sync
    if sync is None or not sync.after_apply:
        return []
    return [
        o
        for o in outcomes
        if o.status == "success"
        and (spec := project.pipelines.get(o.pipeline_id)) is not None
        and lands_in_store(project.root, project.settings, spec)
    ]


def apply_saved_plan(
    root: Path,
    plan_file: Path,
    *,
    env: Mapping[str, str] | None = None,
    **options: Any,
) -> list[Outcome]:
    """`hakiri apply plan.json`: refuse a stale plan (`services.plan.check_saved_plan`), else
    apply the pipelines it planned. Nothing it observed has changed, so apply's own planning,
    the same pure function, makes the same steps, and executes them."""
    from hakiri.services.plan import check_saved_plan, read_saved_plan

    saved = read_saved_plan(plan_file)
    check_saved_plan(root, saved, env)
    planned = {
        p.id: {
            step.table: [b.id for b in step.batches]
            for step in p.steps
            if isinstance(step, EnqueueStep)
        }
        for p in saved.plan.pipelines
    }
    return apply_project(root, saved.named, env=env, planned=planned, **options)


def _check_ids(project: Project, url: str, ids: Sequence[str]) -> None:
    """A named pipeline that is in no manifest but in the catalog is retired, as `plan`
    announces for it; one in neither is a typo (refused before the catalog is created)."""
    missing = [i for i in ids if i not in project.pipelines]
    if not missing:
        return
    with Catalog.open(url, migrate=False) as catalog:
        removed = set(_removed(project, catalog)) if catalog.initialized else set()
    unknown = [i for i in missing if i not in removed]
    if unknown:
        raise PipelineNotFound(
            f"no pipeline {', '.join(f'`{i}`' for i in unknown)}",
            "`hakiri validate` lists the pipelines",
        )


def _removed(project: Project, catalog: Catalog) -> list[str]:
    """Pipelines applied before and now in no manifest, not yet retired."""
    return [
        pipeline_id
        for pipeline_id, state in catalog.pipeline_states().items()
        if pipeline_id not in project.pipelines and state.phase is not Phase.RETIRED
    ]


def _retire(catalog: Catalog, pipeline_ids: Sequence[str]) -> list[Outcome]:
    """Mark the pipelines retired in the catalog (what `plan` announced), their runs, batches
    and target tables left as they are."""
    retired = []
    for pipeline_id in pipeline_ids:
        catalog.retire(pipeline_id)
        retired.append(
            Outcome(
                pipeline_id,
                "retired",
                "-",
                notes=["in no manifest any more: retired; its state and tables are kept"],
                steps=[RetireStep().model_dump(mode="json")],
            )
        )
    return retired


def run_one(
    run: RunContext,
    spec: PipelineSpec,
    catalog: Catalog,
    lease_timeout: float,
    on_batch: Callable[[str, int, int, int], None] | None,
    controls: RunControls | None = None,
    progress: ProgressWatch | None = None,
) -> Outcome:
    runner = None
    try:
        runner = runner_for(run, spec, catalog, lease_timeout, on_batch, controls, progress)
        return runner.run()
    except HakiriError as exc:
        run_id = runner.run_id if runner is not None else None
        if run_id is None:  # it failed before its run began: recorded all the same
            trigger = controls.trigger if controls is not None else "apply"
            run_id = record_failed_attempt(catalog, spec.id, exc, trigger)
        return Outcome(
            spec.id, "failed", spec.load.mode.value, run_id=run_id, error=exc.reason, hint=exc.hint
        )


def runner_for(
    run: RunContext,
    spec: PipelineSpec,
    catalog: Catalog,
    lease_timeout: float,
    on_batch: Callable[[str, int, int, int], None] | None = None,
    controls: RunControls | None = None,
    progress: ProgressWatch | None = None,
) -> PipelineRunner:
    """The engine for one pipeline, wired to its destinations, Spark and the file reader."""
    from hakiri.services.diff import source_diff_audit

    return PipelineRunner(
        run,
        spec,
        catalog,
        lease_timeout,
        on_batch,
        controls,
        audit=lambda: source_diff_audit(run, spec),
        progress=progress,
    )
