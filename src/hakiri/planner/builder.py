"""Build the Plan from observations. Pure: no I/O, no clock, no JVM."""

from __future__ import annotations

from collections.abc import Sequence

from hakiri.planner.backfill import backfill_progress, parallelism_warnings
from hakiri.planner.diff import spec_diff
from hakiri.planner.model import (
    Action,
    CatalogInfo,
    Column,
    PendingWork,
    PipelinePlan,
    PlanDocument,
    Summary,
    TargetChange,
    TypeWidening,
)
from hakiri.planner.observations import PipelineObservation, TableObservation
from hakiri.planner.transforms import OutputSchema, transform_schema
from hakiri.planner.types import (
    compare_types,
    destination_type,
    source_type_as_spark,
    target_type,
)
from hakiri.sources.cursors import cursor_kind_of
from hakiri.spec.fingerprint import normalized_hash, normalized_spec, read_today, spec_hash
from hakiri.spec.load import LoadMode
from hakiri.spec.pipeline import CursorKind, IncrementalSpec, PipelineSpec
from hakiri.spec.rules import check_load_against_columns

POSTGRES_IDENTIFIER_BYTES = 63
# Columns hakiri itself adds to targets; never reported as drift.
_OWN_COLUMNS = {"_source_file_hash", "_hakiri_batch_id"}


def build_plan(
    project: str, catalog: CatalogInfo, observations: Sequence[PipelineObservation]
) -> PlanDocument:
    pipelines = [plan_pipeline(o) for o in sorted(observations, key=lambda o: o.pipeline_id)]
    summary = Summary(
        add=sum(p.action is Action.ADD for p in pipelines),
        change=sum(p.action is Action.CHANGE for p in pipelines),
        no_op=sum(p.action is Action.NO_OP for p in pipelines),
        retire=sum(p.action is Action.RETIRE for p in pipelines),
        errors=sum(bool(p.errors) for p in pipelines),
        pending=sum(any(w.has_work for w in p.pending) for p in pipelines),
    )
    return PlanDocument(project=project, catalog=catalog, summary=summary, pipelines=pipelines)


def plan_pipeline(obs: PipelineObservation) -> PipelinePlan:
    spec = obs.spec
    if spec is None:
        return PipelinePlan(
            id=obs.pipeline_id,
            action=Action.RETIRE,
            errors=list(obs.errors),
            warnings=["state is kept in the catalog and target tables are left untouched"],
        )
    applied = read_today(obs.state.applied_spec) if obs.state else None
    diff = spec_diff(applied, normalized_spec(spec)) if applied is not None else []
    applied_key = obs.state.applied_spec.get("load", {}).get("upsert_key") if obs.state else None
    targets = [_target_change(spec, t, applied_key) for t in obs.tables]
    pending = [_pending(spec, t) for t in obs.tables]
    warnings = [w for t in obs.tables for w in _warnings(spec, t)]
    warnings += list(
        dict.fromkeys(  # pipeline-wide reasons are found once per table: say them once
            w
            for t in obs.tables
            for w in parallelism_warnings(spec, t.table, _cursor_kind(spec, t))
        )
    )
    # Chunks an earlier run left (max_chunks_per_tick, a failure, a rewind): apply has work to
    # do even though the spec is as applied, so the pipeline has not converged.
    backfilling = [
        p for t in obs.tables if (p := backfill_progress(t.table.name, t.batches)) is not None
    ]
    warnings += [p.describe() for p in backfilling]
    if obs.state is None:
        action = Action.ADD
    elif (
        normalized_hash(applied or {}) != spec_hash(spec)
        or any(t.changes_structure for t in targets)
        or backfilling
    ):
        action = Action.CHANGE
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
        warnings=warnings,
        errors=list(obs.errors),
    )


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


def _source_columns(spec: PipelineSpec, t: TableObservation) -> list[Column] | None:
    """The columns that reach the target: the source's, after the transforms, as target types."""
    if t.source is None:
        return None
    renames = spec.renames
    connector, kind = spec.source.connector, t.target.kind
    transformed = _transform_schema(spec, t)
    if transformed is None:
        if t.source.columns is None:
            return None
        return [
            Column(name=renames.get(c.name, c.name), type=target_type(connector, c.type, kind))
            for c in t.source.columns
        ]
    if transformed.columns is None:
        return None
    source_types = {c.name: c.type for c in t.source.columns or ()}
    return [
        Column(
            name=renames.get(c.name, c.name),
            # A source column the transforms pass through keeps its exact type (PostgreSQL to
            # PostgreSQL); a computed or cast one gets the target type of its Spark type.
            type=target_type(connector, source_types.get(c.source), kind)
            if c.source is not None
            else (destination_type(c.type, kind) if c.type else None),
        )
        for c in transformed.columns
    ]


def _transform_schema(spec: PipelineSpec, t: TableObservation) -> OutputSchema | None:
    """The columns the pipeline's transforms produce from this table; None without transforms."""
    if not spec.transforms or t.source is None:
        return None
    columns = (
        None
        if t.source.columns is None
        else [
            (c.name, source_type_as_spark(spec.source.connector, c.type)) for c in t.source.columns
        ]
    )
    return transform_schema(columns, spec.transforms)


def _transformed(spec: PipelineSpec, t: TableObservation) -> list[Column] | None:
    schema = _transform_schema(spec, t)
    if schema is None or schema.columns is None:
        return None
    return [Column(name=c.name, type=c.type) for c in schema.columns]


def _target_change(
    spec: PipelineSpec, t: TableObservation, applied_key: list[str] | None
) -> TargetChange:
    now = t.target_now
    base = dict(
        table=t.table.name,
        target=t.target.display,
        kind=t.target.kind,
        transformed=_transformed(spec, t),
    )
    columns = _source_columns(spec, t)
    if now is None:  # the target could not be inspected (the error is on the pipeline)
        return TargetChange(**base, exists=False, create=False)
    common = dict(row_estimate=now.row_estimate, dependent_views=list(now.dependent_views))
    if not now.exists:
        return TargetChange(**base, exists=False, create=True, columns=columns or [], **common)
    existing = {c.name: c for c in now.columns}
    add, widen, incompatible = [], [], []
    names = {c.name for c in columns or []}
    # A declared rename whose old column the target still has: the target column follows.
    renames = {
        new: old
        for old, new in spec.renames.items()
        if old in existing and new not in existing and new in names
    }
    for column in columns or []:
        current = existing.get(column.name)
        if current is None and column.name in renames:
            current = existing[renames[column.name]]
        if current is None:
            if column.name not in _OWN_COLUMNS:
                add.append(column)
            continue
        if column.type is None:
            continue
        verdict = compare_types(column.type, current.type)
        if verdict == "widen":
            widen.append(
                TypeWidening(name=column.name, from_type=current.type, to_type=column.type)
            )
        elif verdict == "incompatible":
            incompatible.append(
                f"column {column.name}: source type {column.type} does not fit target type {current.type}"
            )
    rename = [f"{old} -> {new}" for new, old in renames.items()]
    if (add or widen or rename) and spec.schema_policy == "freeze":
        changed = [c.name for c in add] + [w.name for w in widen] + list(renames)
        incompatible.append(
            f"schema_policy = 'freeze' but the source's columns changed: {', '.join(changed)}"
        )
        add, widen, rename = [], [], []
    elif add and spec.schema_policy == "discard_columns":
        add = []  # new source columns are dropped before loading, by policy
    if spec.load.mode is LoadMode.UPSERT and applied_key and applied_key != spec.load.upsert_key:
        incompatible.append(
            f"upsert_key changed from ({', '.join(applied_key)}) on an existing target: needs an explicit migration"
        )
    elif (
        spec.load.mode is LoadMode.UPSERT
        and spec.load.upsert_key
        and now.primary_key
        and list(now.primary_key) != spec.load.upsert_key
    ):
        incompatible.append(
            f"target primary key ({', '.join(now.primary_key)}) differs from upsert_key ({', '.join(spec.load.upsert_key)})"
        )
    return TargetChange(
        **base,
        exists=True,
        create=False,
        add_columns=add,
        widen_columns=widen,
        rename_columns=rename,
        incompatible=incompatible,
        **common,
    )


def _pending(spec: PipelineSpec, t: TableObservation) -> PendingWork:
    source = t.source
    if source is None:
        return PendingWork(table=t.table.name)
    if spec.source.connector == "files":
        new = [f for f in source.files if f.path not in t.committed_files]
        changed = [
            f
            for f in source.files
            if f.path in t.committed_files and t.committed_files[f.path] != f.content_hash
        ]
        if getattr(spec.source.config, "on_change", "reload") == "ignore":
            changed = []
        return PendingWork(
            table=t.table.name,
            new_files=[f.path for f in new],
            changed_files=[f.path for f in changed],
            bytes=sum(f.size for f in [*new, *changed]),
        )
    return PendingWork(table=t.table.name, estimated_rows=source.estimated_rows)


def _warnings(spec: PipelineSpec, t: TableObservation) -> list[str]:
    warnings = list(t.source.notes) if t.source else []
    transformed = _transform_schema(spec, t)
    if transformed is not None:
        warnings += [f"{t.table.name}: {note}" for note in transformed.notes]
    now = t.target_now
    target_columns = (
        now.column_names
        if now is not None and now.exists
        else [c.name for c in _source_columns(spec, t) or []]
    )
    if target_columns:
        warnings += [
            f"{f.message} ({'.'.join(map(str, f.path))})"
            for f in check_load_against_columns(spec.load, target_columns)
        ]
    if t.target.kind == "postgres":
        warnings += _identifier_warnings(
            [t.target.table, *(target_columns or []), *(spec.load.upsert_key or [])]
        )
        if now is not None and now.exists:
            views = (
                f"; views reading it: {', '.join(now.dependent_views)}"
                if now.dependent_views
                else ""
            )
            if spec.load.mode is LoadMode.BLUE_GREEN:
                warnings.append(
                    f"blue_green swap takes an ACCESS EXCLUSIVE lock on {t.target.display} for the rename "
                    f"(readers wait briefly){views} (kept: re-pointed inside the swap)"
                )
            elif spec.load.mode is LoadMode.TRUNCATE:
                warnings.append(
                    f"truncate holds an ACCESS EXCLUSIVE lock on {t.target.display} for the whole load "
                    f"(readers wait until it commits){views}"
                )
    if (
        spec.source.connector == "files"
        and getattr(spec.source.config, "on_change", "reload") == "error"
        and t.source
    ):
        changed = [
            f.path
            for f in t.source.files
            if t.committed_files.get(f.path, f.content_hash) != f.content_hash
        ]
        if changed:
            warnings.append(
                f"on_change = 'error' and these loaded files changed: {', '.join(changed)} (apply will fail)"
            )
    return warnings


def _identifier_warnings(names: Sequence[str]) -> list[str]:
    warnings = []
    seen: dict[bytes, str] = {}
    for name in dict.fromkeys(names):
        encoded = name.encode("utf-8")
        if len(encoded) > POSTGRES_IDENTIFIER_BYTES:
            warnings.append(
                f"identifier {name[:40]!r}… is {len(encoded)} bytes; PostgreSQL's limit is 63 "
                "(apply will refuse it rather than let PostgreSQL truncate it)"
            )
            prefix = encoded[:POSTGRES_IDENTIFIER_BYTES]
            if prefix in seen:
                warnings.append(
                    f"identifiers {seen[prefix][:40]!r}… and {name[:40]!r}… collide after truncation to 63 bytes"
                )
            seen.setdefault(prefix, name)
    return warnings
