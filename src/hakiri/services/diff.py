"""`hakiri diff ID`: does the target hold what the source says it should?

For each table of the pipeline, the source's rows as hakiri would load them now are
compared by key with the target's live rows (scd2: the current versions; upsert with soft
deletes: the rows not marked), by hash bisection (`quality.diff.bisect`): each system sums
its own rows by segments of the key hash, and only the sums, then the keys and row hashes
of the few small segments that disagree, and a sample of differing values, reach hakiri.

The source side is summed in PostgreSQL when it is a PostgreSQL table loaded as it is (no
transforms, renames or row rules); otherwise the engine reads it as apply does (transforms,
renames, row rules: the rules' rejects are the quarantined keys, listed apart) and sums
it. A target's rows come from its destination kind (`destinations.kinds`: `diff_rows`): a
PostgreSQL target is summed by its server, a context-store table by the engine.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Batch, BatchStatus
from hakiri.destinations.kinds import kind_of
from hakiri.engine.prepare import prepared
from hakiri.engine.run_context import RunContext
from hakiri.errors import HakiriError, PipelineNotFound
from hakiri.observability import span
from hakiri.quality.diff.bisect import Bisection, Key, bisect, on_both
from hakiri.quality.diff.sides import Sample, SparkSide
from hakiri.quality.diff.views import (
    DiffSide,
    RowsView,
    connect,
    pg_filters,
    postgres_view,
    same_postgres_types,
)
from hakiri.quality.verdicts import ProbeResult, judge_source_diff
from hakiri.sources.base import Comparable, Compared
from hakiri.spec.connections import target_of
from hakiri.spec.loader import load_project
from hakiri.spec.pipeline import PipelineSpec, TableSpec

__all__ = ["DIFFERENT", "TableDiff", "diff_pipeline", "source_diff_audit"]

DIFFERENT = 2  # the exit code when a table differs (0: identical, 1: an error)
SAMPLE_KEYS = 10  # keys shown per kind of difference, and changed rows shown with values


@dataclass
class TableDiff:
    """One table compared: counts, sampled keys and values, and what crossed."""

    table: str
    target: str
    key: list[str]
    columns: list[str]
    source_system: str  # 'postgres' | 'engine'
    target_system: str
    hashed: str  # 'native' (each PostgreSQL's own row text) | 'canonical'
    source_rows: int
    target_rows: int
    found: Bisection
    changed_values: list[dict[str, Any]] = field(default_factory=list)
    quarantined: list[Key] = field(default_factory=list)
    not_compared: dict[str, str] = field(default_factory=dict)  # column -> why
    moved: dict[str, int] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def identical(self) -> bool:
        return self.found.identical

    def as_dict(self) -> dict[str, Any]:
        found = self.found
        return {
            "table": self.table,
            "target": self.target,
            "key": self.key,
            "columns": self.columns,
            "identical": self.identical,
            "hashed": self.hashed,
            "source": {"system": self.source_system, "rows": self.source_rows},
            "target_rows": {"system": self.target_system, "rows": self.target_rows},
            "only_in_source": len(found.only_in_source),
            "only_in_target": len(found.only_in_target),
            "changed": len(found.changed),
            "truncated": found.truncated,
            "samples": {
                "only_in_source": [list(k) for k in found.only_in_source[:SAMPLE_KEYS]],
                "only_in_target": [list(k) for k in found.only_in_target[:SAMPLE_KEYS]],
                "changed": self.changed_values,
            },
            "quarantined": [list(k) for k in self.quarantined[:SAMPLE_KEYS]],
            "quarantined_count": len(self.quarantined),
            "not_compared": self.not_compared,
            "moved": self.moved,
            "levels": found.levels,
            "seconds": round(self.seconds, 3),
        }


def diff_pipeline(
    root: Path,
    pipeline_id: str,
    *,
    table: str | None = None,
    where: str | None = None,
    env: Mapping[str, str] | None = None,
) -> list[TableDiff]:
    """Compare each table of the pipeline (or `table`) with its target."""
    from hakiri.services.runtime import LazySpark

    env = os.environ if env is None else env
    project = load_project(root, env)
    spec = project.pipelines.get(pipeline_id)
    if spec is None:
        raise PipelineNotFound(f"no pipeline `{pipeline_id}`", "`hakiri validate` lists them")
    project.require_variables([spec.id])
    tables = spec.table_specs()
    if table is not None:
        tables = [t for t in tables if t.name == table]
        if not tables:
            names = ", ".join(t.name for t in spec.table_specs())
            raise PipelineNotFound(
                f"pipeline `{pipeline_id}` has no table `{table}`", f"its tables: {names}"
            )
    if where is not None:
        from hakiri.guards.expressions import check_expression

        check_expression(where, boolean=True)
    spark = LazySpark(project, env=env)
    run = RunContext.of(project, env, spark.get)
    try:
        return [_diff_table(run, spec, t, where) for t in tables]
    finally:
        spark.stop()


def source_diff_audit(run: RunContext, spec: PipelineSpec) -> list[ProbeResult]:
    """The pipeline's `source_diff` validators, after a run's loads: every table compared with
    its target as `hakiri diff` compares them, each validator judging each table's counts."""
    validators = spec.validate_.source_diffs
    if not validators:
        return []
    found = []
    for table in spec.table_specs():
        with span("hakiri.validate.source_diff", {"hakiri.table": table.name}):
            diffed = _diff_table(run, spec, table, None)
        counts = diffed.found
        found += [
            judge_source_diff(
                v,
                diffed.target,
                diffed.source_rows,
                len(counts.only_in_source),
                len(counts.only_in_target),
                len(counts.changed),
            )
            for v in validators
        ]
    return found


def _diff_table(
    run: RunContext, spec: PipelineSpec, table: TableSpec, where: str | None
) -> TableDiff:
    from hakiri.spark.errors import spark_errors

    project, env, spark = run.project, run.env, run.spark
    started = time.monotonic()
    target = target_of(project.settings, spec, table)
    with ExitStack() as stack:
        with spark_errors(f"reading {target.display} to diff it"):
            kind = kind_of(target.kind)
            place = kind.place(project, spec, env)
            target_view = kind.diff_rows(place, spec, target, where, spark, stack)
        with spark_errors(f"reading the source of {table.name} to diff it", side="source"):
            source_view = _source_view(run, spec, table, where, stack)
        key = _key(spec, source_view.columns)
        columns, not_compared = _compared(spec, source_view, target_view, key)
        with spark_errors(f"diffing {table.name} with {target.display}"):
            native = same_postgres_types(source_view, target_view, columns)
            source = source_view.side(columns, key, native)
            target_side = target_view.side(columns, key, native)
            source_rows, target_rows = on_both(lambda side: side.count(), source, target_side)
            found = bisect(source, target_side, max(source_rows, target_rows))
            changed = _changed_values(source, target_side, found.changed[:SAMPLE_KEYS])
            quarantined = source_view.quarantined_keys(key)
            if source_view.release is not None:
                source_view.release()
    moved = {
        f"{name}_{what}": getattr(side.moved, what)
        for name, side in (("source", source), ("target", target_side))
        for what in ("queries", "segments", "rows", "bytes")
    }
    return TableDiff(
        table.name,
        target.display,
        key,
        columns,
        source_view.system,
        target_view.system,
        "native" if native else "canonical",
        source_rows,
        target_rows,
        found,
        changed,
        quarantined,
        not_compared,
        moved,
        time.monotonic() - started,
    )


# -- where the rows are -------------------------------------------------------------------


def _source_view(
    run: RunContext, spec: PipelineSpec, table: TableSpec, where: str | None, stack: ExitStack
) -> RowsView:
    source = run.source_for(spec)
    if not isinstance(source, Comparable):
        raise HakiriError(
            f"`hakiri diff` cannot read a {spec.source.connector} source as its target should "
            "hold it yet",
            "compare the target with the source's records by hand, or with `hakiri runs`",
        )
    compared = source.compared(table, lambda: _committed(run, spec, table))
    plain = not (spec.transforms or spec.renames or spec.validate_.rules)
    if compared.native is not None and plain:
        url, schema, name = compared.native
        conn = stack.enter_context(connect(url, f"source {schema}.{name}"))
        missing = HakiriError(
            f"source table {schema}.{name} does not exist",
            "check the table's name and the source's `schema`",
        )
        return postgres_view(conn, (schema, name), missing, lambda _: pg_filters(None, where))
    return _engine_source(spec, source, compared, where, run)


def _engine_source(
    spec: PipelineSpec,
    source: Any,
    compared: Compared,
    where: str | None,
    run: RunContext,
) -> RowsView:
    """The source read as apply reads it (transforms, renames, rules), in the reads the source
    says reproduce the target (a files source loaded file by file: the files recorded as
    loaded, folded by the load's key)."""
    from hakiri.quality.rules import RuleCheck

    reads = [source.read(run.spark(), b) for b in compared.batches]
    frames = [prepared(spec, r, run.project) for r in reads]
    frame = _latest_by_key(frames, list(compared.fold_by)) if compared.fold_by else frames[0]
    read = reads[-1]
    raw, rules = frame, None
    if spec.validate_.rules:
        rules = RuleCheck(frame, spec.validate_.rules, label=read.label)
        frame, _ = rules.split()
    types = {f.name: f.dataType.simpleString() for f in frame.schema.fields}
    clean = frame
    return RowsView(
        "engine",
        types,
        lambda columns, key, _: SparkSide(clean, columns, key, where),
        (raw, clean) if rules is not None else None,
        rules.release if rules is not None else None,
    )


_ORDER = "_hakiri_diff_load_order"


def _latest_by_key(frames: Sequence[Any], key: list[str]) -> Any:
    """The union of `frames` (in load order) with, per key, the row of the latest frame: what
    an upsert of each in turn leaves. (Within one file, keys are expected to be unique.)"""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    ordered = [f.withColumn(_ORDER, F.lit(i)) for i, f in enumerate(frames)]
    union = ordered[0]
    for f in ordered[1:]:
        union = union.unionByName(f, allowMissingColumns=True)
    newest = Window.partitionBy(*key).orderBy(F.col(_ORDER).desc())
    rank = "_hakiri_diff_rank"
    return (
        union.withColumn(rank, F.row_number().over(newest))
        .where(F.col(rank) == 1)
        .drop(rank, _ORDER)
    )


def _committed(run: RunContext, spec: PipelineSpec, table: TableSpec) -> list[Batch]:
    """The table's live committed batches, from the catalog."""
    from hakiri.catalog.store import Catalog
    from hakiri.catalog.url import catalog_url
    from hakiri.planner.backfill import live_batches

    url = catalog_url(run.project.root, run.settings.catalog.url, run.env)
    with Catalog.open(url, migrate=False) as catalog:
        batches = catalog.batches(spec.id)
    return [
        b
        for b in live_batches(batches)
        if b.table_name == table.name and b.status is BatchStatus.COMMITTED
    ]


# -- what is compared ---------------------------------------------------------------------


def _key(spec: PipelineSpec, columns: Mapping[str, str]) -> list[str]:
    """The mode's key (scd2: the record key), else every source column."""
    from hakiri.destinations.history.deletes import snapshot_key
    from hakiri.spec.modes.scd2 import ROW_HASH_COLUMN

    key = [k for k in snapshot_key(spec.load) if k != ROW_HASH_COLUMN]
    return key or sorted(columns)


def _compared(
    spec: PipelineSpec, source: RowsView, target: RowsView, key: Sequence[str]
) -> tuple[list[str], dict[str, str]]:
    """The columns both sides have (hakiri's own left out), and why any other is not."""
    ours = {c for c, _ in spec.load.added_columns()} | set(spec.load.strategy.control_columns)
    not_compared: dict[str, str] = {}
    for name in source.columns:
        if name not in target.columns:
            not_compared[name] = "only in the source"
    for name in target.columns:
        if name in ours or name.startswith("_hakiri_"):
            continue
        if name not in source.columns:
            not_compared[name] = "only in the target"
    missing = [k for k in key if k not in source.columns or k not in target.columns]
    if missing:
        raise HakiriError(
            f"the key column {missing[0]!r} is not in both the source and the target",
            "apply the pipeline first, or pass --table for a table whose target exists",
        )
    columns = [c for c in source.columns if c in target.columns and c not in ours]
    return columns, not_compared


def _changed_values(
    source: DiffSide, target: DiffSide, keys: Sequence[Key]
) -> list[dict[str, Any]]:
    """For each key, the columns whose values differ, as each side shows them."""
    ours, theirs = source.sample(keys), target.sample(keys)
    shown = []
    for key in keys:
        mine: Sample = ours.get(key, {})
        other: Sample = theirs.get(key, {})
        columns = {
            name: {"source": value[1], "target": other.get(name, (None, None))[1]}
            for name, value in mine.items()
            if value[0] != other.get(name, (None, None))[0]
        }
        shown.append({"key": list(key), "columns": columns})
    return shown
