"""Build the Plan from observations. Pure: no I/O, no clock, no JVM.

Every decision here is the one `apply` makes, by the same code:

- which batches are new: the source's `plan_batches` (observed by the caller, the same
  call apply makes before loading), minus the ones the catalog already has;
- which batches load, in which order and how many at once: `load_order`, `load_parallelism`;
- what happens to the target: `planner.evolution.decide` (apply calls it again with the
  batch's own columns, so a file that differs from what plan saw is judged by the same rules);
- whether the upsert key may change: `planner.evolution.check_upsert_key`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from hakiri.catalog.records import Batch, NewBatch, Retirement
from hakiri.destinations.base import ColumnRetype
from hakiri.destinations.capabilities import refusals
from hakiri.destinations.kinds import kind_of
from hakiri.planner.backfill import (
    backfill_progress,
    live_batches,
    load_parallelism,
    parallelism_warnings,
)
from hakiri.planner.diff import spec_diff
from hakiri.planner.drift import TargetDrift
from hakiri.planner.evolution import (
    SchemaDecision,
    SchemaRefused,
    decide,
    followed_renames,
    upsert_key_change,
)
from hakiri.planner.model import (
    Action,
    BatchRef,
    CatalogInfo,
    ChangePreview,
    Column,
    DeletePreview,
    EnqueueStep,
    EvolveStep,
    LoadStep,
    PendingWork,
    PipelinePlan,
    PlanDocument,
    RestoreStep,
    RetiredRef,
    RetireStep,
    Step,
    Summary,
    SyncPreview,
    TargetChange,
    TypeWidening,
)
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.planner.restore import LostTarget
from hakiri.planner.transforms import OutputSchema, transform_schema
from hakiri.planner.types import destination_type, source_type_as_spark
from hakiri.planner.views import ViewsObservation, plan_views, view_counts
from hakiri.sources.base import MONEY_HINT
from hakiri.sources.cursors.ranges import cursor_kind_of
from hakiri.sources.kinds import batch_files, batch_range
from hakiri.sources.kinds import kind_of as source_kind
from hakiri.spec.fingerprint import normalized_hash, normalized_spec, read_today, spec_hash
from hakiri.spec.pipeline import CursorKind, IncrementalSpec, PipelineSpec
from hakiri.spec.rules import check_load_against_columns

__all__ = [
    "applied_now",
    "batch_ref",
    "build_plan",
    "evolve_step",
    "load_order",
    "plan_pipeline",
    "restore_step",
    "retired_ref",
]


def build_plan(
    project: str,
    catalog: CatalogInfo,
    observations: Sequence[PipelineObservation],
    sync: SyncPreview | None = None,
    views: ViewsObservation | None = None,
    *,
    view_changes: bool = True,
) -> PlanDocument:
    """`views`: the project's views, checked against the tables' planned columns (a view
    whose column a pipeline takes away is a warning on that pipeline); `view_changes`: also
    plan what apply records of them (a whole-project plan; apply of named pipelines leaves
    views alone)."""
    ordered = sorted(observations, key=lambda o: o.pipeline_id)
    pipelines = [plan_pipeline(o) for o in ordered]
    view_plans = None
    if views is not None:
        loaded = [
            [_loaded_columns(o.spec, t) if o.spec is not None else None for t in o.tables]
            for o in ordered
        ]
        pipelines, view_plans = plan_views(views, ordered, pipelines, loaded)
        view_plans = view_plans if view_changes else None
    summary = Summary(
        add=sum(p.action is Action.ADD for p in pipelines),
        change=sum(p.action is Action.CHANGE for p in pipelines),
        load=sum(p.action is Action.LOAD for p in pipelines),
        no_op=sum(p.action is Action.NO_OP for p in pipelines),
        retire=sum(p.action is Action.RETIRE for p in pipelines),
        errors=sum(bool(p.errors) for p in pipelines),
        pending=sum(any(w.has_work for w in p.pending) for p in pipelines),
        **view_counts(view_plans or []),
    )
    hints = []
    if any(_uncounted_changes(o, p) for o, p in zip(ordered, pipelines, strict=True)):
        hints.append(COUNT_CHANGES_HINT)
    return PlanDocument(
        project=project,
        catalog=catalog,
        summary=summary,
        pipelines=pipelines,
        sync=sync,
        views=view_plans,
        hints=hints,
    )


COUNT_CHANGES_HINT = "`hakiri plan --count-changes` counts rows to insert/update/delete"


def _uncounted_changes(obs: PipelineObservation, plan: PipelinePlan) -> bool:
    """A keyed load (upsert, scd2) into an existing target has a batch to load whose effect
    on the target's rows was not counted."""
    spec = obs.spec
    if spec is None or obs.skipped or not spec.load.strategy.changes_key(spec.load):
        return False
    return any(
        work.has_work and work.changes is None and t.target_now is not None and t.target_now.exists
        for t, work in zip(obs.tables, plan.pending, strict=True)
    )


def plan_pipeline(obs: PipelineObservation) -> PipelinePlan:
    spec = obs.spec
    if spec is None:
        return PipelinePlan(
            id=obs.pipeline_id,
            action=Action.RETIRE,
            steps=[RetireStep()],
            errors=list(obs.errors),
            warnings=["state is kept in the catalog and target tables are left untouched"],
        )
    applied = read_today(obs.state.applied_spec) if obs.state else None
    diff = spec_diff(applied, normalized_spec(spec)) if applied is not None else []
    applied_key = obs.state.applied_spec.get("load", {}).get("upsert_key") if obs.state else None
    loads = load_order(spec, obs)
    loading = {t.table.name for t in obs.tables if _loads_table(t, loads)}
    schema = [_schema(spec, t, applied_key) for t in obs.tables]
    targets = [change for change, _ in schema]
    pending = [_pending(spec, t) for t in obs.tables]
    warnings = list(obs.notes)
    warnings += [w for t in obs.tables for w in _warnings(spec, t)]
    warnings += [
        w for t, (change, _) in zip(obs.tables, schema, strict=True) for w in _money(t, change)
    ]
    warnings += [
        f"{p.table}: the rows its next snapshot deletes are counted at load, where "
        f"max_delete_fraction = {spec.load.max_delete_fraction:g} guards them; "
        "`hakiri plan --count-deletes` counts them now"
        for p in pending
        if spec.load.detects_deletes and p.has_work and p.deletes is None
    ]
    warnings += list(
        dict.fromkeys(  # pipeline-wide reasons are found once per table: say them once
            w
            for t in obs.tables
            for w in parallelism_warnings(spec, t.table, _cursor_kind(spec, t), obs.has_cursors)
        )
    )
    # Chunks an earlier run left (max_chunks_per_tick, a failure, a rewind): apply has work to
    # do even though the spec is as applied, so the pipeline has not converged.
    backfilling = [
        p for t in obs.tables if (p := backfill_progress(t.table.name, t.batches)) is not None
    ]
    warnings += [p.describe() for p in backfilling]
    steps: list[Step] = [
        EnqueueStep(
            table=t.table.name,
            batches=[batch_ref(b) for b in t.batch_plan.batches],
            retired=[retired_ref(r) for r in t.batch_plan.retire],
        )
        for t in obs.tables
        if t.batch_plan is not None and (t.batch_plan.batches or t.batch_plan.retire)
    ]
    steps += [restore_step(lost) for lost in obs.lost]
    steps += [
        step
        for t, (_, step) in zip(obs.tables, schema, strict=True)
        if step is not None and t.table.name in loading
    ]
    if loads:
        workers = min(load_parallelism(spec, obs.has_cursors), len(loads))
        steps.append(LoadStep(batches=loads, parallelism=workers))
    errors = list(obs.errors)
    refusals_now = [
        r for t in obs.tables if t.target_now is not None and (r := t.target_now.schema_refusal())
    ]
    errors += list(dict.fromkeys(f"{r.reason} (hint: {r.hint})" for r in refusals_now))
    for kind in dict.fromkeys(t.target.kind for t in obs.tables):
        errors += [e.reason for e in refusals(spec, kind_of(kind).capabilities)]
    if obs.cdc is not None and obs.cdc.over_limit:
        warnings.append(
            f"replication slot {obs.cdc.slot} retains more WAL than max_lag_bytes "
            f"({obs.cdc.describe()}): apply, or drop the slot (`hakiri cdc drop-slot "
            f"{spec.id}`) if the mirror is abandoned"
        )
    # Under freeze, a change of the target's schema by hand stops apply: an error, as it will be.
    frozen = [d for d in obs.drift if d.of_schema and not d.lost and spec.schema_policy == "freeze"]
    warnings += [
        f"drift: {d.describe()} ({_drift_policy(spec, d)})"
        for d in obs.drift
        if not d.lost and d not in frozen
    ]
    errors += [f"drift: {d.describe()} ({_drift_policy(spec, d)})" for d in frozen]
    warnings += [lost.describe() for lost in obs.lost if not lost.lost]
    for lost in obs.lost:
        if lost.lost:
            refused = lost.refusal()
            errors.append(f"{refused.reason} (hint: {refused.hint})")
    if obs.skipped:
        steps = []
        warnings.append("enabled = false: apply skips it unless it is named (hakiri apply ID)")
    if obs.state is None:
        action = Action.ADD
    elif (
        normalized_hash(applied or {}) != spec_hash(spec)
        or any(t.changes_structure for t in targets)
        or backfilling
        or obs.lost
    ):
        action = Action.CHANGE
    elif any(w.has_work for w in pending) or any(
        t.batch_plan is not None and t.batch_plan.retire for t in obs.tables
    ):
        action = Action.LOAD
    else:
        action = Action.NO_OP
    return PipelinePlan(
        id=spec.id,
        action=action,
        source=spec.source.connector,
        destination=obs.tables[0].target.kind if obs.tables else None,
        mode=spec.load.mode.value,
        diff=diff,
        targets=targets,
        pending=pending,
        steps=steps,
        warnings=warnings,
        errors=errors,
        cdc=obs.cdc,
        drift=[d.as_dict() for d in obs.drift],
    )


def _drift_policy(spec: PipelineSpec, drift: TargetDrift) -> str:
    """What apply does about a drift, as plan's warning says it."""
    if not drift.of_schema:
        return "apply loads as usual; the next load marks the new count"
    if spec.schema_policy == "freeze":
        return "schema_policy = 'freeze': apply refuses to load it until the change is undone"
    return f"schema_policy = '{spec.schema_policy}': apply loads the target as it is now"


# ---------------------------------------------------------------- batches


def applied_now(spec: PipelineSpec, named: bool) -> bool:
    """Does `apply` run this pipeline? Every enabled one, and a disabled one only by name."""
    return spec.enabled or named


def load_order(spec: PipelineSpec, obs: PipelineObservation) -> list[str]:
    """The batch ids apply claims, in order: what earlier runs left (by catalog order), then
    the new ones as the tables list them; at most `max_chunks_per_tick`."""
    queued = sorted((b for t in obs.tables for b in _queued(t)), key=lambda b: (b.seq, b.batch_id))
    ids = list(dict.fromkeys(b.batch_id for b in queued))
    for t in obs.tables:
        if t.batch_plan is not None:
            ids += [b.batch_id for b in t.batch_plan.batches if b.batch_id not in ids]
    limit = spec.backfill.max_chunks_per_tick if spec.backfill else None
    return ids[:limit] if limit else ids


def _queued(t: TableObservation) -> list[Batch]:
    """Batches of an earlier plan not committed yet: pending, failed (tried again) or left
    processing by a process that died; not the ones this plan retires."""
    leaving = {r.batch_id for r in t.batch_plan.retire} if t.batch_plan is not None else set()
    queued = [
        b for b in live_batches(t.batches) if b.status.unfinished and b.batch_id not in leaving
    ]
    return queued + list(t.reload)  # a lost target's batches are queued again first thing


def _loads_table(t: TableObservation, loads: Sequence[str]) -> bool:
    wanted = set(loads)
    new = t.batch_plan.batches if t.batch_plan is not None else []
    return any(b.batch_id in wanted for b in [*_queued(t), *new])


def batch_ref(batch: NewBatch) -> BatchRef:
    """A batch as a plan step names it."""
    described = batch_range(batch)
    return BatchRef(
        id=batch.batch_id,
        table=batch.table_name,
        kind=batch.kind,
        file=batch.file_path,
        range=described,
        bytes=batch.size_bytes,
    )


def restore_step(lost: LostTarget) -> RestoreStep:
    """A lost target's restore, as a plan step names it."""
    return RestoreStep(
        table=lost.table,
        target=lost.drift.target,
        reason=lost.drift.changes()[0],
        batches=[b.batch_id for b in lost.reload],
        lost=list(lost.lost),
    )


def retired_ref(retirement: Retirement) -> RetiredRef:
    """A queued batch ended by a plan, as a plan step names it."""
    return RetiredRef(
        id=retirement.batch_id, status=retirement.status.value, reason=retirement.reason
    )


def _pending(spec: PipelineSpec, t: TableObservation) -> PendingWork:
    new = t.batch_plan.batches if t.batch_plan is not None else []
    files = [pair for b in new for pair in batch_files(b)]
    return PendingWork(
        table=t.table.name,
        new_files=[path for path, _ in files if path not in t.committed_files],
        changed_files=[path for path, _ in files if path in t.committed_files],
        bytes=sum(b.size_bytes or 0 for b in new),
        estimated_rows=t.source.estimated_rows if t.source is not None and new else None,
        estimate=t.source.estimate_source if t.source is not None and new else None,
        new_batches=len(new),
        queued_batches=len(_queued(t)) - len(t.reload),
        reload_batches=len(t.reload),
        deletes=_delete_preview(spec, t),
        changes=_change_preview(spec, t),
    )


def _change_preview(spec: PipelineSpec, t: TableObservation) -> ChangePreview | None:
    if t.changes is None:
        return None
    batch, counted = t.changes
    load = spec.load
    detects = counted.delete is not None
    return ChangePreview(
        batch=batch,
        insert=counted.insert,
        update=counted.update,
        delete=counted.delete,
        unchanged=counted.unchanged,
        verb=load.strategy.delete_verb(load) if detects else None,
    )


def _delete_preview(spec: PipelineSpec, t: TableObservation) -> DeletePreview | None:
    if t.deletes is None:
        return None
    batch, rows, scoped = t.deletes
    load = spec.load
    verb = load.strategy.delete_verb(load)
    limit = load.max_delete_fraction
    return DeletePreview(
        batch=batch,
        verb=verb,
        rows=rows,
        of=scoped,
        max_fraction=limit,
        refused=bool(scoped) and rows > limit * scoped,
    )


# ---------------------------------------------------------------- the target


def _schema(
    spec: PipelineSpec, t: TableObservation, applied_key: list[str] | None
) -> tuple[TargetChange, EvolveStep | None]:
    """What happens to the target when this table's next batch loads, as `decide` rules it."""
    now = t.target_now
    base = dict(
        table=t.table.name,
        target=t.target.display,
        kind=t.target.kind,
        transformed=_transformed(spec, t),
    )
    if now is None:  # the target could not be inspected (the error is on the pipeline)
        return TargetChange(**base, exists=False, create=False), None
    common = dict(row_estimate=now.row_estimate, dependent_views=list(now.dependent_views))
    columns = _loaded_columns(spec, t)
    if not now.exists and t.batch_plan is not None and t.batch_plan.never_matched:
        # Nothing to create it from: it is created with its first file.
        return TargetChange(**base, exists=False, create=False, waiting=True, **common), None
    if not now.exists:
        created = [Column(name=n, type=_destination(s, t.target.kind)) for n, s in columns or []]
        step = EvolveStep(table=t.table.name, create=True, columns=created) if columns else None
        inferred = _inferred(spec, t, None)
        schema = now.schema if now.schema_missing else None
        return TargetChange(
            **base,
            exists=False,
            create=True,
            create_schema=schema,
            columns=created,
            **inferred,
            **common,
        ), step
    where = f"pipeline `{spec.id}`, table {t.table.name} -> {t.target.table}"
    refused: list[str] = []
    decision = SchemaDecision()
    key_change = upsert_key_change(applied_key, spec.load.upsert_key)
    if spec.load.strategy.merge_key(spec.load) is not None and key_change is not None:
        refused.append(key_change)
    if columns is not None and not refused:
        try:
            decision = decide(
                [(n, s or "") for n, s in columns],
                now.columns,
                destination_kind=t.target.kind,
                policy=spec.schema_policy,
                renames=spec.renames,
                accepted=set(t.accepted),
                where=where,
            )
        except SchemaRefused as exc:
            refused += [b.refusal(spec.schema_policy) for b in exc.blocked]
    step = evolve_step(t.table.name, decision)
    target = TargetChange(
        **base,
        exists=True,
        create=False,
        add_columns=step.add_columns,
        widen_columns=step.widen_columns,
        rename_columns=step.rename_columns,
        retype_columns=step.retype_columns,
        incompatible=refused,
        **_inferred(spec, t, {c.name for c in step.add_columns if c.type is None}),
        **common,
    )
    if refused:
        return target, EvolveStep(table=t.table.name, refused=refused)
    if decision.change.empty and not decision.discard:
        return target, None
    return target, step


def evolve_step(table: str, decision: SchemaDecision) -> EvolveStep:
    """A schema decision as a plan step: what `plan` shows and `apply --json` reports."""
    change = decision.change
    return EvolveStep(
        table=table,
        add_columns=[Column(name=c.name, type=c.type or None) for c in change.add],
        widen_columns=[_widening(w) for w in change.widen],
        rename_columns=[f"{old} -> {new}" for old, new in change.rename],
        retype_columns=[_widening(w) for w in change.retype],
        discard_columns=list(decision.discard),
    )


def _widening(retype: ColumnRetype) -> TypeWidening:
    return TypeWidening(name=retype.column, from_type=retype.old_type, to_type=retype.new_type)


def _destination(spark_type: str | None, kind: str) -> str | None:
    return destination_type(spark_type, kind) if spark_type else None


def _money(t: TableObservation, change: TargetChange) -> list[str]:
    """A hint per column about to be created as a float from data that looks like money."""
    sample = t.source.sample if t.source is not None else None
    if sample is None or not change.inferred:
        return []
    return [
        f"{t.table.name}: column {c.name} infers as {c.type} from the data "
        f"({sample.rows:,} records sampled): " + MONEY_HINT.format(column=c.name)
        for c in change.inferred
        if c.name in sample.money
    ]


def _inferred(spec: PipelineSpec, t: TableObservation, added: set[str] | None) -> dict[str, Any]:
    """TargetChange's `inferred` types (of every column, or of the `added` ones), when the
    source's types come from its data and the sample tells them."""
    sample = t.source.sample if t.source is not None else None
    if sample is None or (added is not None and not added):
        return {}
    columns = _loaded_columns(spec, t, sampled=True) or []
    kind = t.target.kind
    return {
        "inferred": [
            Column(name=n, type=_destination(s, kind))
            for n, s in columns
            if added is None or n in added
        ],
        "inferred_rows": sample.rows,
    }


def _loaded_columns(
    spec: PipelineSpec, t: TableObservation, *, sampled: bool = False
) -> list[tuple[str, str | None]] | None:
    """(name, Spark type) of the columns that reach the target: the source's, after the
    transforms and the renames it follows; a type None is one only the data will tell
    (`sampled`: the type the source's sample infers instead, when there is one)."""
    if t.source is None or t.source.columns is None:
        return None
    sample = t.source.sample if sampled else None
    # A text column a custom date_format/timestamp_format may type is typed by hakiri's parse
    # of the pattern in the engine at load: plan does not guess it ("(type from data)").
    guessed = (
        {n: s for n, s in sample.types if n not in sample.unjudged} if sample is not None else {}
    )
    transformed = _transform_schema(spec, t, guessed)
    if transformed is None:
        columns = [
            (c.name, source_type_as_spark(source_kind(spec).types, c.type) or guessed.get(c.name))
            for c in t.source.columns
        ]
    elif transformed.columns is None:
        return None
    else:
        columns = [(c.name, c.type) for c in transformed.columns]
    renamed = followed_renames([n for n, _ in columns], spec.renames)
    added: list[tuple[str, str | None]] = list(spec.load.added_columns())
    return [(renamed.get(n, n), s) for n, s in columns] + added


def _transform_schema(
    spec: PipelineSpec, t: TableObservation, guessed: dict[str, str] | None = None
) -> OutputSchema | None:
    """The columns the pipeline's transforms produce from this table; None without transforms.
    `guessed`: types for the source's untyped columns (a sample's)."""
    if not spec.transforms or t.source is None:
        return None
    guessed = guessed or {}
    columns = (
        None
        if t.source.columns is None
        else [
            (c.name, source_type_as_spark(source_kind(spec).types, c.type) or guessed.get(c.name))
            for c in t.source.columns
        ]
    )
    return transform_schema(columns, spec.transforms)


def _transformed(spec: PipelineSpec, t: TableObservation) -> list[Column] | None:
    schema = _transform_schema(spec, t)
    if schema is None or schema.columns is None:
        return None
    return [Column(name=c.name, type=c.type) for c in schema.columns]


def _cursor_kind(spec: PipelineSpec, t: TableObservation) -> CursorKind | None:
    """The table's cursor kind: declared, else from the source column's type, else as stored."""
    incremental = t.table.incremental or spec.incremental
    if incremental is None:
        return None
    if isinstance(incremental, IncrementalSpec):
        if incremental.kind is not None:
            return incremental.kind
        column = incremental.column
    else:
        column = incremental
    for c in (t.source.columns or ()) if t.source else ():
        if c.name == column and c.type is not None:
            return cursor_kind_of(c.type)
    if t.cursor and t.cursor.get("column") == column and t.cursor.get("kind"):
        return CursorKind(t.cursor["kind"])
    return None


# ---------------------------------------------------------------- warnings


def _warnings(spec: PipelineSpec, t: TableObservation) -> list[str]:
    # The batch planner's notes say what apply will note (a glob that matched no file);
    # the inspection's own say the rest (a header with no record to read names from).
    if t.batch_plan is not None and t.batch_plan.notes:
        warnings = list(t.batch_plan.notes)
    else:
        warnings = list(t.source.notes) if t.source else []
    transformed = _transform_schema(spec, t)
    if transformed is not None:
        warnings += [f"{t.table.name}: {note}" for note in transformed.notes]
    now = t.target_now
    target_columns = (
        now.column_names
        if now is not None and now.exists
        else [n for n, _ in _loaded_columns(spec, t) or []]
    )
    if target_columns:
        warnings += [
            f"{f.message} ({'.'.join(map(str, f.path))})"
            for f in check_load_against_columns(spec.load, target_columns)
        ]
    merge_key = spec.load.strategy.merge_key(spec.load)
    if (
        now is not None
        and now.exists
        and merge_key
        and now.primary_key
        and list(now.primary_key) != merge_key
    ):
        warnings.append(
            f"target primary key ({', '.join(now.primary_key)}) differs from upsert_key "
            f"({', '.join(merge_key)})"
        )
    limit = kind_of(t.target.kind).capabilities.max_identifier_bytes
    if limit is not None:
        warnings += _identifier_warnings(
            [t.target.table, *(target_columns or []), *(spec.load.upsert_key or [])], limit
        )
    if now is not None and now.exists:
        warnings += kind_of(t.target.kind).plan_warnings(spec, t.target, now)
    return warnings


def _identifier_warnings(names: Sequence[str], limit: int) -> list[str]:
    warnings = []
    seen: dict[bytes, str] = {}
    for name in dict.fromkeys(names):
        encoded = name.encode("utf-8")
        if len(encoded) > limit:
            warnings.append(
                f"identifier {name[:40]!r}… is {len(encoded)} bytes; PostgreSQL's limit is {limit} "
                "(apply will refuse it rather than let PostgreSQL truncate it)"
            )
            prefix = encoded[:limit]
            if prefix in seen:
                warnings.append(
                    f"identifiers {seen[prefix][:40]!r}… and {name[:40]!r}… collide after truncation to {limit} bytes"
                )
            seen.setdefault(prefix, name)
    return warnings
