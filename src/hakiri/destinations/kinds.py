"""The destination kinds, registered once: everything outside `hakiri.destinations` asks here.

A kind (`postgres`, `context`) is one `DestinationKind`: its capabilities, how the planner
types its columns, where its targets live (a connection URL, a store directory), how `plan`
inspects them, how `apply` opens one, what `gc` collects there, what it needs of the engine,
and the warnings `plan` adds for its targets. The planner, the services and the engine look a
kind up by the name `spec.connections.Target.kind` gives and never test it themselves, so a
new destination is a new entry here and a package beside `postgres/` and `context/`.

The loading modules are imported on first use: `plan` inspects without them.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.destinations.base import Destination, Garbage, TargetObservation
from hakiri.destinations.capabilities import CONTEXT, POSTGRES, Capabilities
from hakiri.destinations.context.types import spark_to_delta
from hakiri.destinations.postgres.types import postgres_to_spark, spark_to_postgres
from hakiri.errors import HakiriError
from hakiri.spec.connections import Target, context_store_path, destination_url, lineage_place
from hakiri.spec.pipeline import PipelineSpec, PostgresDestination

if TYPE_CHECKING:
    from hakiri.quality.diff.views import RowsView
    from hakiri.spec.loader import Project

__all__ = ["KINDS", "DestinationKind", "engine_needs", "kind_of"]


@dataclass(frozen=True)
class DestinationKind:
    capabilities: Capabilities
    # Where a pipeline's targets of this kind live: a connection URL, a store directory.
    place: Callable[[Project, PipelineSpec, Mapping[str, str]], str]
    # (schema, table) of targets at one place -> what each looks like now, in that order (or
    # why that one could not be inspected); raises when the place cannot be reached at all.
    inspect: Callable[[str, Sequence[tuple[str, str]]], list[TargetObservation | HakiriError]]
    # The destination one target loads through; `spark` starts the engine on first use.
    open: Callable[
        [Project, PipelineSpec, Target, Mapping[str, str], Callable[[], Any]], Destination
    ]
    # Drop what crashed runs left at one place (in these schemas); the names dropped and kept.
    collect_garbage: Callable[[str, Sequence[str], set[str], float], Garbage]
    # A Spark SQL type -> the column type a target gets; a target column's type -> Spark's.
    column_type: Callable[[str], str | None]
    type_as_spark: Callable[[str], str | None]
    # What the engine must have for a pipeline loading here (`spark.engines` capabilities),
    # and the jars it loads with (Apache Spark): "jdbc", "delta".
    engine_needs: Callable[[PipelineSpec], list[str]]
    spark_jars: frozenset[str]
    # Warnings `plan` shows for a target that exists (`now`).
    plan_warnings: Callable[[PipelineSpec, Target, TargetObservation], list[str]]
    # `hakiri diff`: a target's live rows (what the mode promises), where they are summed:
    # (place, pipeline, target, --where, engine, the diff's open connections).
    diff_rows: Callable[
        [str, PipelineSpec, Target, str | None, Callable[[], Any], ExitStack], RowsView
    ]
    # Drift: the exact row count of targets at one place, in that order (None: no such table,
    # or the destination cannot count it without reading every row through the engine).
    count_rows: Callable[[str, Sequence[tuple[str, str]]], list[int | None]]
    # OpenLineage's (namespace, name) of a target at a place (https://openlineage.io/docs/spec/naming).
    lineage_dataset: Callable[[str, Target], tuple[str, str]]

    @property
    def name(self) -> str:
        return self.capabilities.kind


# ---------------------------------------------------------------- postgres


def _pg_place(project: Project, spec: PipelineSpec, env: Mapping[str, str]) -> str:
    return destination_url(project.settings, spec, env)


def _pg_inspect(
    url: str, tables: Sequence[tuple[str, str]]
) -> list[TargetObservation | HakiriError]:
    from hakiri.destinations.postgres import inspect_postgres_targets

    return list(inspect_postgres_targets(url, tables))


def _pg_open(
    project: Project,
    spec: PipelineSpec,
    target: Target,
    env: Mapping[str, str],
    spark: Callable[[], Any],
) -> Destination:
    from hakiri.destinations.postgres.client import PostgresDestination as PostgresLoader
    from hakiri.destinations.postgres.client import copy_min_run_bytes

    batch_size = (
        spec.destination.config.batch_size
        if isinstance(spec.destination, PostgresDestination)
        else 10_000
    )
    return PostgresLoader(
        destination_url(project.settings, spec, env),
        target.schema or "public",
        batch_size=batch_size,
        writer=spec.load.writer,
        copy_min_run_bytes=copy_min_run_bytes(env),
    )


def _pg_garbage(url: str, schemas: Sequence[str], live: set[str], older: float) -> Garbage:
    from hakiri.destinations.postgres import gc

    return gc(url, schemas, live_runs=live, older_than_seconds=older)


def _pg_warnings(spec: PipelineSpec, target: Target, now: TargetObservation) -> list[str]:
    """The locks a replacing load takes on an existing table, and the views that wait on it."""
    views = f"; views reading it: {', '.join(now.dependent_views)}" if now.dependent_views else ""
    needs = spec.load.strategy.needs
    if "swap" in needs:
        return [
            f"{spec.load.mode} swap takes an ACCESS EXCLUSIVE lock on {target.display} for the rename "
            f"(readers wait briefly){views} (kept: re-pointed inside the swap)"
        ]
    if "replace" in needs:
        return [
            f"{spec.load.mode} holds an ACCESS EXCLUSIVE lock on {target.display} for the whole load "
            f"(readers wait until it commits){views}"
        ]
    return []


def _pg_diff_rows(
    url: str,
    spec: PipelineSpec,
    target: Target,
    where: str | None,
    spark: Callable[[], Any],
    stack: ExitStack,
) -> RowsView:
    from hakiri.destinations.history.deletes import planned_live
    from hakiri.errors import DestinationUnreachable
    from hakiri.quality.diff.views import connect, pg_filters, postgres_view

    conn = stack.enter_context(connect(url, f"target {target.display}", DestinationUnreachable))
    return postgres_view(
        conn,
        (target.schema or "public", target.table),
        _no_target(spec, target),
        lambda types: pg_filters(planned_live(spec.load, types), where),
        alias="t",
    )


def _pg_count_rows(url: str, tables: Sequence[tuple[str, str]]) -> list[int | None]:
    from hakiri.destinations.postgres.inspect import count_postgres_rows

    return count_postgres_rows(url, tables)


def _pg_lineage(url: str, target: Target) -> tuple[str, str]:
    namespace, database = lineage_place(url)
    return namespace, f"{database}.{target.schema or 'public'}.{target.table}"


def _no_target(spec: PipelineSpec, target: Target) -> HakiriError:
    return HakiriError(
        f"target {target.display} does not exist",
        f"`hakiri apply {spec.id}` creates and loads it",
    )


# ---------------------------------------------------------------- context


def _ctx_place(project: Project, spec: PipelineSpec, env: Mapping[str, str]) -> str:
    return str(context_store_path(project.root, project.settings, spec))


def _ctx_inspect(
    store: str, tables: Sequence[tuple[str, str]]
) -> list[TargetObservation | HakiriError]:
    from hakiri.destinations.context import inspect_context_target

    found: list[TargetObservation | HakiriError] = []
    for _, table in tables:
        try:
            found.append(inspect_context_target(Path(store), table))
        except HakiriError as exc:  # one unreadable table is that pipeline's error only
            found.append(exc)
    return found


def _ctx_count_rows(store: str, tables: Sequence[tuple[str, str]]) -> list[int | None]:
    """From the Delta log's file stats (exact; None when a file was written without them)."""
    from hakiri.destinations.context import inspect_context_target

    return [inspect_context_target(Path(store), table).row_estimate for _, table in tables]


def _ctx_open(
    project: Project,
    spec: PipelineSpec,
    target: Target,
    env: Mapping[str, str],
    spark: Callable[[], Any],
) -> Destination:
    from hakiri.destinations.context.client import ContextDestination

    return ContextDestination(context_store_path(project.root, project.settings, spec), spark)


def _ctx_garbage(store: str, schemas: Sequence[str], live: set[str], older: float) -> Garbage:
    from hakiri.destinations.context.garbage import gc_context

    return gc_context(Path(store), live_runs=live, older_than_seconds=older)


def _ctx_engine_needs(spec: PipelineSpec) -> list[str]:
    """History-keeping modes merge into the Delta table (delta-rs on an engine without Delta's
    idempotent writes)."""
    if spec.load.strategy.compares_with_target(spec.load):
        return ["context_history"]
    return []


def _ctx_diff_rows(
    store: str,
    spec: PipelineSpec,
    target: Target,
    where: str | None,
    spark: Callable[[], Any],
    stack: ExitStack,
) -> RowsView:
    from hakiri.destinations.context.commit import delta_uri
    from hakiri.destinations.context.inspect import is_delta_table
    from hakiri.destinations.history.deletes import planned_live
    from hakiri.quality.diff.views import spark_view

    location = Path(store) / target.table
    if not is_delta_table(location):
        raise _no_target(spec, target)
    frame = spark().read.format("delta").load(delta_uri(location)).alias("t")
    live = planned_live(spec.load, frame.columns)
    if live is not None:
        frame = frame.where(live.sql(dialect="spark"))
    return spark_view(frame, where)


def _ctx_lineage(store: str, target: Target) -> tuple[str, str]:
    return "file", str((Path(store) / target.table).absolute())


KINDS: dict[str, DestinationKind] = {
    "postgres": DestinationKind(
        capabilities=POSTGRES,
        place=_pg_place,
        inspect=_pg_inspect,
        open=_pg_open,
        collect_garbage=_pg_garbage,
        column_type=spark_to_postgres,
        type_as_spark=postgres_to_spark,
        engine_needs=lambda spec: [],
        spark_jars=frozenset({"jdbc"}),
        plan_warnings=_pg_warnings,
        diff_rows=_pg_diff_rows,
        count_rows=_pg_count_rows,
        lineage_dataset=_pg_lineage,
    ),
    "context": DestinationKind(
        capabilities=CONTEXT,
        place=_ctx_place,
        inspect=_ctx_inspect,
        open=_ctx_open,
        collect_garbage=_ctx_garbage,
        column_type=spark_to_delta,
        type_as_spark=lambda type_name: type_name,  # Delta's names are Spark's
        engine_needs=_ctx_engine_needs,
        spark_jars=frozenset({"delta"}),
        plan_warnings=lambda spec, target, now: [],
        diff_rows=_ctx_diff_rows,
        count_rows=_ctx_count_rows,
        lineage_dataset=_ctx_lineage,
    ),
}


def kind_of(name: str) -> DestinationKind:
    """The registered kind `name` (as `Target.kind` spells it)."""
    try:
        return KINDS[name]
    except KeyError:
        raise HakiriError(
            f"unknown destination kind {name!r}",
            f"use one of: {', '.join(sorted(KINDS))}",
        ) from None


def engine_needs(spec: PipelineSpec, kinds: Collection[str]) -> list[str]:
    """What the engine must have for `spec` to load into targets of these kinds."""
    return [need for name in sorted(set(kinds)) for need in kind_of(name).engine_needs(spec)]
