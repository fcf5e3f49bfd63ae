"""`hakiri plan`: observe (manifests, catalog, targets, sources), then let the planner decide.

Read-only everywhere: the catalog is opened without migrating (a missing one reads
as empty and is not created), PostgreSQL sessions are read-only, and no JVM starts,
unless `count_deletes` asks Spark to count what a delete-detecting load (upsert
`deletes`, scd2 closing) would delete, or `count_changes` what the next batch of a keyed load
(upsert, scd2) would insert, update and delete (`engine.delete_preview`). An unreachable source
or target becomes an error on that pipeline, not a crash.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from hakiri import __version__
from hakiri.catalog.records import (
    Batch,
    NewBatch,
    Phase,
    PipelineState,
    SchemaEvent,
    ViewDefinition,
)
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.destinations.base import TargetObservation
from hakiri.destinations.kinds import kind_of
from hakiri.engine.delete_preview import count_batch_changes, count_snapshot_deletes
from hakiri.engine.drift import target_drift
from hakiri.engine.restore import lost_targets
from hakiri.engine.run_context import RunContext
from hakiri.errors import HakiriError, PipelineNotFound, PlanStale
from hakiri.planner.backfill import live_batches
from hakiri.planner.builder import applied_now, build_plan
from hakiri.planner.drift import TargetDrift
from hakiri.planner.evolution import accepted_changes
from hakiri.planner.model import CatalogInfo, PlanDocument, SyncPreview, ViewPlan
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.planner.restore import LostTarget
from hakiri.planner.saved import SavedPlan, observed, stale_reason
from hakiri.planner.views import ViewsObservation
from hakiri.services.runtime import LazySpark
from hakiri.sources.base import ShapeChecked, Source
from hakiri.sources.cdc.lag import CdcLag, ChangeStream
from hakiri.spec.connections import Target, target_of
from hakiri.spec.interpolate import mask_url
from hakiri.spec.loader import Project, load_project
from hakiri.spec.pipeline import PipelineSpec, TableSpec
from hakiri.spec.views import normalized_sql


@dataclass(frozen=True)
class ProjectObservation:
    project: str
    catalog: CatalogInfo
    pipelines: list[PipelineObservation]
    sync: SyncPreview | None = None
    views: ViewsObservation | None = None  # None: the project has none, the catalog neither
    whole: bool = True  # no pipeline ids were named: views are planned (and applied) too


def observe_project(
    root: Path,
    ids: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    count_deletes: bool = False,
    count_changes: bool = False,
) -> ProjectObservation:
    """Everything the planner decides from: manifests, catalog, targets and sources, read-only.
    `count_deletes`: also read the next snapshot of each delete-detecting pipeline with Spark
    and count the target rows it would delete (`plan --count-deletes`). `count_changes`: read
    the next batch of each keyed load (upsert, scd2) and count the rows it would insert, update
    and delete (`plan --count-changes`; the delete counts too)."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    url = catalog_url(project.root, project.settings.catalog.url, env)
    spark = LazySpark(project, env=env) if count_deletes or count_changes else None
    run = RunContext.of(project, env, spark.get if spark is not None else None)
    with Catalog.open(url, migrate=False) as catalog:
        states = catalog.pipeline_states()
        wanted = _select(project, states, ids)
        project.require_variables(wanted)
        try:
            observer = _Observer(run, catalog, states, spark, count_changes=count_changes)
            observations = observer.observe(
                [project.pipelines[i] for i in wanted if i in project.pipelines], named=bool(ids)
            )
        finally:
            if spark is not None:
                spark.stop()
        for pid in wanted:
            state = states.get(pid)
            if pid not in project.pipelines and state is not None:
                observations.append(PipelineObservation(pid, None, state))
        info = CatalogInfo(url=mask_url(url), initialized=catalog.initialized)
        views = observe_views(project, catalog)
    return ProjectObservation(
        project.settings.project.name,
        info,
        observations,
        _sync_preview(project, env),
        views,
        whole=not ids,
    )


def observe_views(project: Project, catalog: Catalog) -> ViewsObservation | None:
    """The manifests' views (in definition order, each with what it reads) and the catalog's
    live ones; None when there are neither."""
    from hakiri.spec.view_checks import view_reads

    live = catalog.live_views()
    if not project.views and not live:
        return None
    last: dict[str, int] = {}
    for record in catalog.view_versions():
        last[record.name] = max(last.get(record.name, 0), record.version)
    manifest = tuple(
        ViewDefinition(name, normalized_sql(view.sql), view.description, view_reads(view))
        for name, view in project.views.items()
    )
    return ViewsObservation(manifest, live, last)


def plan_of(seen: ProjectObservation) -> PlanDocument:
    """The plan of what was observed (the one function plan, saved plans and apply share)."""
    return build_plan(
        seen.project, seen.catalog, seen.pipelines, seen.sync, seen.views, view_changes=seen.whole
    )


def _sync_preview(project: Project, env: Mapping[str, str]) -> SyncPreview | None:
    """Where apply will publish the store: read from the manifest and the environment only
    (plan opens no connection to the bucket)."""
    from hakiri.spec.sync import (
        SYNC_ENDPOINT_VARIABLE,
        SYNC_KEY_ID_VARIABLE,
        SYNC_KEY_SECRET_VARIABLE,
    )

    sync = project.settings.sync
    if sync is None:
        return None
    return SyncPreview(
        bucket=sync.bucket,
        endpoint=env.get(SYNC_ENDPOINT_VARIABLE) or sync.endpoint,
        after_apply=sync.after_apply,
        missing=[v for v in (SYNC_KEY_ID_VARIABLE, SYNC_KEY_SECRET_VARIABLE) if not env.get(v)],
    )


def plan_project(
    root: Path,
    ids: Sequence[str] = (),
    env: Mapping[str, str] | None = None,
    *,
    count_deletes: bool = False,
    count_changes: bool = False,
) -> PlanDocument:
    seen = observe_project(root, ids, env, count_deletes=count_deletes, count_changes=count_changes)
    return plan_of(seen)


def save_plan(
    root: Path,
    ids: Sequence[str],
    out: Path,
    env: Mapping[str, str] | None = None,
    *,
    count_deletes: bool = False,
    count_changes: bool = False,
) -> PlanDocument:
    """`hakiri plan -o FILE`: the plan and digests of what it was made from, for `apply FILE`.
    A plan with errors is not written (as Terraform): there is nothing apply could execute."""
    seen = observe_project(root, ids, env, count_deletes=count_deletes, count_changes=count_changes)
    document = plan_of(seen)
    if document.summary.errors:
        return document
    saved = SavedPlan(
        hakiri_version=__version__,
        created_at=datetime.now(UTC),
        project=seen.project,
        catalog=seen.catalog,
        named=list(dict.fromkeys(ids)),
        observed={o.pipeline_id: observed(o) for o in seen.pipelines},
        plan=document,
    )
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(saved.model_dump_json(indent=2) + "\n", encoding="utf-8")
    except OSError as exc:
        raise HakiriError(
            f"cannot write the plan to {out}: {exc.strerror or exc}",
            "pick a path in a directory you can write, e.g. -o plan.json",
        ) from None
    return document


def read_saved_plan(path: Path) -> SavedPlan:
    """A plan file written by `hakiri plan -o`; one clear error for anything else."""
    hint = "make one with `hakiri plan -o plan.json`, then run `hakiri apply plan.json`"
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) else "it is not UTF-8 text"
        raise PlanStale(f"cannot read the plan file {path}: {reason}", hint) from None
    try:
        document = json.loads(text)
    except json.JSONDecodeError as exc:
        raise PlanStale(
            f"{path} is not a plan file: {exc.msg} at line {exc.lineno}", hint
        ) from None
    if not isinstance(document, dict) or document.get("format") != "hakiri-plan":
        raise PlanStale(f"{path} is not a hakiri plan file", hint)
    if document.get("format_version") != 1:
        raise PlanStale(
            f"{path} is a plan file of format version {document.get('format_version')!r}; "
            "this hakiri reads version 1",
            "run hakiri plan again with this hakiri",
        )
    try:
        return SavedPlan.model_validate(document)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        raise PlanStale(f"{path} is not a valid plan file: {where}: {first['msg']}", hint) from None


def check_saved_plan(root: Path, saved: SavedPlan, env: Mapping[str, str] | None = None) -> None:
    """Raise PlanStale unless observing now gives exactly what `saved` was planned from."""
    seen = observe_project(root, saved.named, env)
    reason = stale_reason(
        saved,
        version=__version__,
        project=seen.project,
        catalog_url=seen.catalog.url,
        now={o.pipeline_id: observed(o) for o in seen.pipelines},
    )
    if reason is None and saved.plan.views is not None:
        reason = _views_stale(saved.plan.views, plan_of(seen).views or [])
    if reason is not None:
        raise PlanStale(
            f"plan is stale: {reason}", "run hakiri plan again, then apply the new plan"
        )


def _views_stale(planned: Sequence[ViewPlan], now: Sequence[ViewPlan]) -> str | None:
    """What differs between the views a saved plan would apply and what a plan would now."""

    def key(v: ViewPlan) -> tuple[Any, ...]:
        return (v.name, v.action, v.sql, v.description, v.version)

    before, after = {v.name: key(v) for v in planned}, {v.name: key(v) for v in now}
    changed = sorted(n for n in before.keys() | after.keys() if before.get(n) != after.get(n))
    if not changed:
        return None
    return f"view {', '.join(f'`{n}`' for n in changed)} changed since the plan"


def _select(project: Project, states: Mapping[str, Any], ids: Sequence[str]) -> list[str]:
    retired = [
        pid
        for pid, s in states.items()
        if pid not in project.pipelines and s.phase is not Phase.RETIRED
    ]
    everything = [*project.pipelines, *retired]
    if not ids:
        return everything
    unknown = [i for i in ids if i not in everything]
    if unknown:
        raise PipelineNotFound(
            f"no pipeline {', '.join(f'`{i}`' for i in unknown)} in the manifests or the catalog",
            "`hakiri validate` lists the pipelines",
        )
    return list(dict.fromkeys(ids))


def _following(t: TableObservation) -> Batch | NewBatch | None:
    """The table's next batch to load: the oldest one queued (and not retired by this plan),
    else the first new one."""
    leaving = {r.batch_id for r in t.batch_plan.retire} if t.batch_plan is not None else set()
    queued = [b for b in t.batches if b.status.queued and b.batch_id not in leaving]
    new = list(t.batch_plan.batches) if t.batch_plan is not None else []
    return (queued or new or [None])[0]


def _attempt(errors: list[str], call: Callable[[], Any]) -> Any:
    try:
        return call()
    except HakiriError as exc:
        errors.append(exc.reason)
        return None


class _Observer:
    def __init__(
        self,
        run: RunContext,
        catalog: Catalog,
        states: Mapping[str, PipelineState],
        spark: LazySpark | None,
        *,
        count_changes: bool = False,
    ) -> None:
        """`spark`: count what the next batches delete (and, with `count_changes`, insert and
        update) with it; None counts nothing."""
        self.count_changes = count_changes
        self.states = states
        self.run, self.catalog, self.spark = run, catalog, spark
        self.project, self.env = run.project, run.env
        self._batches_of: dict[str, list[Batch]] = {}
        self._events_of: dict[str, list[SchemaEvent]] = {}

    def observe(
        self, specs: Sequence[PipelineSpec], named: bool = False
    ) -> list[PipelineObservation]:
        """`named`: the pipelines were asked for by id (apply then runs disabled ones too)."""
        errors: dict[str, list[str]] = {spec.id: [] for spec in specs}
        targets = self._inspect_targets(specs, errors)
        observations = []
        for spec in specs:
            source = self.run.source_for(spec)
            tables = tuple(
                self._table(
                    spec, source, table, targets.get((spec.id, table.name)), errors[spec.id]
                )
                for table in spec.table_specs()
            )
            refused = self._engine_refusals(spec, [t.target.kind for t in tables])
            refused += self._shape_refusals(spec, source, errors[spec.id])
            errors[spec.id] += refused
            if self.spark is not None and not refused and applied_now(spec, named):
                if self.count_changes and spec.load.strategy.changes_key(spec.load):
                    tables = tuple(
                        self._count_changes(spec, source, t, errors[spec.id]) for t in tables
                    )
                elif spec.load.detects_deletes:
                    tables = tuple(
                        self._count_deletes(spec, source, t, errors[spec.id]) for t in tables
                    )
            drift = self._drift(spec, tables, errors[spec.id])
            lost = self._lost(spec, source, tables, drift, errors[spec.id])
            reload = {t.table: t.reload for t in lost}
            tables = tuple(replace(t, reload=reload.get(t.table.name, ())) for t in tables)
            observations.append(
                PipelineObservation(
                    spec.id,
                    spec,
                    self.states.get(spec.id),
                    tables,
                    tuple(dict.fromkeys(errors[spec.id])),
                    has_cursors=source.has_cursors,
                    skipped=not applied_now(spec, named),
                    cdc=self._cdc_lag(source, errors[spec.id]),
                    drift=drift,
                    lost=lost,
                    notes=self._compiled_notes(spec),
                )
            )
        return observations

    def _compiled_notes(self, spec: PipelineSpec) -> tuple[str, ...]:
        """A compiled transforms file older than its module: plan runs the compiled steps."""
        compiled = self.project.compiled.get(spec.id)
        stale = compiled.stale_reason() if compiled is not None else None
        if stale is None:
            return ()
        return (
            f"compiled transforms are stale: {stale}; plan and apply run the compiled steps "
            "until `hakiri compile` writes them again",
        )

    def _drift(
        self, spec: PipelineSpec, tables: Sequence[TableObservation], errors: list[str]
    ) -> tuple[TargetDrift, ...]:
        """The pipeline's targets changed by hand since its last load (none never marked)."""
        seen = {t.table.name: t.target_now for t in tables if t.target_now is not None}
        found = _attempt(
            errors, lambda: target_drift(self.project, spec, self.catalog, self.env, seen)
        )
        return tuple(found or ())

    def _lost(
        self,
        spec: PipelineSpec,
        source: Source,
        tables: Sequence[TableObservation],
        drift: Sequence[TargetDrift],
        errors: list[str],
    ) -> tuple[LostTarget, ...]:
        """The targets dropped since hakiri loaded them, with what apply loads again (the same
        question apply asks, after it enqueued: the queued and the new batches are upcoming)."""
        if not any(d.lost for d in drift):
            return ()
        upcoming: dict[str, list[Batch | NewBatch]] = {
            t.table.name: [
                *(b for b in live_batches(t.batches) if b.status.unfinished),
                *(t.batch_plan.batches if t.batch_plan is not None else ()),
            ]
            for t in tables
        }
        found = _attempt(
            errors,
            lambda: lost_targets(spec, source, drift, self._batches(spec.id), upcoming),
        )
        return tuple(found or ())

    def _cdc_lag(self, source: Any, errors: list[str]) -> CdcLag | None:
        """A change stream's lag behind the WAL; None for other sources."""
        if not isinstance(source, ChangeStream):
            return None
        try:
            found: CdcLag = source.lag(self.catalog, count_pending=True)
        except HakiriError as exc:
            errors.append(exc.reason)
            return None
        return found

    def _engine_refusals(self, spec: PipelineSpec, kinds: Sequence[str]) -> list[str]:
        """What the project's engine cannot do of what the pipeline asks (`spark.engines`)."""
        return [f"{reason} (hint: {hint})" for reason, hint in self.run.refusals(spec, kinds)]

    def _shape_refusals(self, spec: PipelineSpec, source: Source, errors: list[str]) -> list[str]:
        """What the engine refuses of the files as they are (a JSON file that is one array on
        an engine that reads JSON Lines only), from a peek at each: said by plan, not first
        by apply."""
        from hakiri.spark.engines import refusal_message

        if not isinstance(source, ShapeChecked):
            return []
        engine = self.run.engine
        found = []
        for table in spec.table_specs():
            needs = _attempt(errors, lambda t=table: source.shape_needs(t)) or []
            for capability, path in needs:
                message = refusal_message(engine, capability, path)
                if message is not None:
                    found.append(f"{message[0]} (hint: {message[1]})")
        return found

    def _table(
        self,
        spec: PipelineSpec,
        source: Source,
        table: TableSpec,
        target_now: TargetObservation | None,
        errors: list[str],
    ) -> TableObservation:
        cursor = self.catalog.get_cursor(spec.id, table.name)
        observed = _attempt(errors, lambda: source.observe(table, cursor))
        # The same call apply makes before it loads: what plan shows is what apply enqueues.
        batch_plan = _attempt(errors, lambda: source.plan_batches(table, self.catalog))
        return TableObservation(
            table,
            target_of(self.project.settings, spec, table),
            observed,
            target_now,
            self.catalog.committed_hashes(spec.id, table.name),
            cursor,
            tuple(b for b in self._batches(spec.id) if b.table_name == table.name),
            batch_plan,
            frozenset(accepted_changes(self._events(spec.id), table.name)),
        )

    def _count_deletes(
        self, spec: PipelineSpec, source: Source, t: TableObservation, errors: list[str]
    ) -> TableObservation:
        """The next snapshot's deletes, when there is one to load and a target to delete from."""
        found = self._count_next(spec, source, t, errors, count_snapshot_deletes)
        if found is None:
            return t
        batch_id, (rows, scoped) = found
        return replace(t, deletes=(batch_id, rows, scoped))

    def _count_changes(
        self, spec: PipelineSpec, source: Source, t: TableObservation, errors: list[str]
    ) -> TableObservation:
        """What the next batch inserts, updates and deletes, when there is one to load and a
        target it changes. Only the next: a later batch meets the target the earlier ones
        leave, which no count before them can know."""
        found = self._count_next(spec, source, t, errors, count_batch_changes)
        if found is None:
            return t
        batch_id, counted = found
        t = replace(t, changes=(batch_id, counted))
        if counted.delete is None or counted.scoped is None:
            return t
        return replace(t, deletes=(batch_id, counted.delete, counted.scoped))

    def _count_next(
        self,
        spec: PipelineSpec,
        source: Source,
        t: TableObservation,
        errors: list[str],
        count: Callable[..., Any],
    ) -> tuple[str, Any] | None:
        """(the table's next batch, what `count` counted of it), or None: no batch, no target,
        or an error (added to `errors`)."""
        following = _following(t)
        spark = self.spark
        if following is None or spark is None or t.target_now is None or not t.target_now.exists:
            return None
        counted = _attempt(
            errors,
            lambda: count(self.run, spec, source, following),
        )
        return None if counted is None else (following.batch_id, counted)

    def _batches(self, pipeline_id: str) -> list[Batch]:
        """The pipeline's batches, read once for all its tables."""
        if pipeline_id not in self._batches_of:
            self._batches_of[pipeline_id] = self.catalog.batches(pipeline_id)
        return self._batches_of[pipeline_id]

    def _events(self, pipeline_id: str) -> list[SchemaEvent]:
        if pipeline_id not in self._events_of:
            self._events_of[pipeline_id] = self.catalog.schema_events(pipeline_id)
        return self._events_of[pipeline_id]

    def _inspect_targets(
        self, specs: Sequence[PipelineSpec], errors: dict[str, list[str]]
    ) -> dict[tuple[str, str], TargetObservation]:
        """All targets, inspected together per place of each kind (one connection per
        PostgreSQL database, one look per context store)."""
        found: dict[tuple[str, str], TargetObservation] = {}
        by_place: dict[tuple[str, str], list[tuple[str, TableSpec, Target]]] = defaultdict(list)
        for spec in specs:
            for table in spec.table_specs():
                target = target_of(self.project.settings, spec, table)
                kind = kind_of(target.kind)
                place = _attempt(
                    errors[spec.id], lambda k=kind, s=spec: k.place(self.project, s, self.env)
                )
                if place is not None:
                    by_place[(target.kind, place)].append((spec.id, table, target))
        for (kind, place), wanted in by_place.items():
            names = [(target.schema or "public", target.table) for _, _, target in wanted]
            try:
                results = kind_of(kind).inspect(place, names)
            except HakiriError as exc:
                for pid, _, _ in wanted:
                    errors[pid].append(exc.reason)
                continue
            for (pid, table, _), result in zip(wanted, results, strict=True):
                if isinstance(result, HakiriError):
                    errors[pid].append(result.reason)
                else:
                    found[(pid, table.name)] = result
        return found
