"""ContextDestination: the project's Delta Lake context store as a hakiri destination.

Spark writes a batch's rows as Parquet into a staging area of the store; Spark then commits
them into the target table `<store>/<table>` with delta-spark, in the executors: ONE Delta
commit per batch (append or overwrite by the DataFrame writer, upsert by Delta's MERGE).
The driver only reads the log (delta-rs: the ledger, the table's columns). The commit, in order:

    the mode's gate and the destination's capabilities, the empty-source guard (before
    anything is read)
    -> the batch's app transaction id already in the table's log? drop staging, done
    -> the staged rows' columns against the table's (all of them, or some: a column the
       source no longer sends stays in the table, NULL in the new rows; the mode's control
       columns, cdc_mirror's op, are no columns of the table); the load mode's checks
    -> dataset validators on the staged rows, read back by Spark (an `abort` that
       fails raises, and NOTHING is committed: neither the quarantine records nor the rows)
    -> the quarantine records: one commit to the quarantine table, with the batch's app id
    -> checkpoint('before_dest_commit') -> the data commit, with the batch's app id
       (and, for incremental_watermark, the new mark in its metadata)
    -> drop the staging area -> checkpoint('after_dest_commit')

Delta has no transaction across two tables, so the quarantine commit precedes
the data commit; both carry the batch's transaction identity (`commit.app_id`),
and Delta skips a write whose identity is already in the table's log. A crash
between them leaves the records committed and the rows not: the retried batch
skips the records and commits the rows, so both land exactly once. A validator
`abort` writes neither.

Load modes: append (DataFrame writer, mode append); truncate and blue_green (mode
"overwrite": one new table version replaces every row atomically; blue_green needs no swap
here, the previous version stays readable by time travel); upsert (MERGE on the key);
incremental_watermark (rows past the mark, filtered when staged, see `watermark`);
scd2, upsert with `deletes` and replace_window (one MERGE each, see `history`);
cdc_mirror (one MERGE applying the net changes by key, see `mirror`). A missing table is
created from the staged rows (without a mode's control columns), whatever the mode.
`backup_before_load` needs no copy: the version before the load stays readable until it
is vacuumed. Schema evolution (`evolve`) is one version of its own, committed before the
batch's: see `evolve`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.destinations.base import (
    ChangeCount,
    Checkpoint,
    LoadRequest,
    LoadResult,
    QuarantinedRow,
    QuarantineTable,
    SchemaChange,
    StagedBatch,
    StageProgress,
    TargetColumn,
)
from hakiri.destinations.capabilities import CONTEXT, NO_SQL_HOOKS, NO_SQL_HOOKS_HINT, check_replay
from hakiri.destinations.commit_checks import (
    DUPLICATE_EXAMPLES,
    check_upsert_key,
    check_validators,
    duplicate_keys_error,
    quarantine_of,
)
from hakiri.destinations.context.commit import (
    WATERMARK_COLUMN_KEY,
    WATERMARK_KEY,
    batch_metadata,
    check_staged_schema,
    delta_errors,
    is_committed,
    open_table,
    staged_arrow_schema,
    without_control_columns,
)
from hakiri.destinations.context.evolve import evolve_table
from hakiri.destinations.context.history import (
    count_changes,
    count_deletes,
    merge_replace_window,
    merge_scd2,
    merge_upsert_with_deletes,
)
from hakiri.destinations.context.inspect import table_columns
from hakiri.destinations.context.mirror import mirror_changes
from hakiri.destinations.context.quarantine import quarantine_records, read_quarantined
from hakiri.destinations.context.rs_commit import append_files, merge_files
from hakiri.destinations.context.staging import (
    StagingArea,
    check_table_name,
    new_staging_area,
    read_parquet,
    staged_columns,
    staging_area,
    writable_frame,
    write_parquet,
)
from hakiri.destinations.context.txn import commits_by_delta_rs
from hakiri.destinations.context.watermark import (
    Watermark,
    keep_after_mark,
    mark_of_staged,
    read_mark,
)
from hakiri.destinations.context.writes import merge_rows, write_rows
from hakiri.destinations.gates import check_empty_source, check_mode_available
from hakiri.errors import HookError, LoadError
from hakiri.guards.spark_types import quoted_name
from hakiri.observability import span
from hakiri.quality.rules import RuleCheck
from hakiri.spec.modes import Written

if TYPE_CHECKING:
    import pyarrow as pa
    from deltalake import DeltaTable
    from pyspark.sql import SparkSession

    from hakiri.quality.verdicts import ProbeResult
    from hakiri.spec.hooks import RefreshMatViewHook, SqlHook

__all__ = ["ContextDestination"]


@dataclass(frozen=True)
class _Load:
    """What the commit will do, decided before anything is written."""

    location: Path
    table: DeltaTable | None  # None: the table does not exist yet and the commit creates it
    files: list[Path]  # the staged part files
    rows: int  # the rows in them, counted when they were staged
    merge_key: tuple[str, ...] | None  # the mode's key, checked against the staged rows
    watermark: Watermark | None


class ContextDestination:
    """The context store (Delta tables under `store`) as a hakiri destination
    (`hakiri.destinations.base.Destination`).

    `store` is the store's root, e.g. `<project>/.hakiri/context`; target `t` is the
    Delta table `store/t` (a request's target_schema is ignored). `spark` returns the
    SparkSession, started on first use.
    """

    capabilities = CONTEXT

    def __init__(self, store: Path, spark: Callable[[], SparkSession]) -> None:
        self.store = Path(store)
        self.spark = spark

    # ------------------------------------------------------------------ staging

    def stage_progress(self, request: LoadRequest) -> StageProgress | None:
        """None: Spark's Parquet writer keeps a row group in memory until it is full (128 MB),
        so the staging files show nothing of a write in flight."""
        return None

    def stage(self, rows: RuleCheck, request: LoadRequest) -> StagedBatch:
        """Spark writes the rows as Parquet into a fresh `<store>/_staging/<16 hex>/rows/`, and the
        rule violations (with a quarantine), already in the quarantine table's columns, into
        `.../quarantine/`: two writes, both from the rules' cached evaluation.

        incremental_watermark filters here: only rows past the current mark are staged."""
        check_mode_available(request.load, CONTEXT)
        _refuse_unsupported(request)
        location = self._location(request.target_table, "target table")
        frame, quarantine = rows.split()
        if request.quarantine is None:
            quarantine = None
        else:
            check_table_name(request.quarantine.table, "quarantine table")
        frame = writable_frame(frame)
        columns = staged_columns(frame.schema)
        previous = None
        load = request.load
        incremental = load.strategy.high_water_mark(load) is not None
        if incremental:
            previous = read_mark(self.spark(), open_table(location), location, request)
            frame = keep_after_mark(frame, request, previous)

        area = new_staging_area(self.store, request)
        label = f"staging rows for the Delta table at {location}"
        try:
            with delta_errors(area.root, "create", what="the staging directory"):
                area.root.mkdir(parents=True)
            write_parquet(frame, area.rows_dir, label)
            files = area.part_files(area.rows_dir)
            rows = area.count_rows(files)
            quarantined = 0
            if quarantine is not None and request.quarantine is not None:
                records = quarantine_records(quarantine, request, request.quarantine.node_id)
                write_parquet(records, area.quarantine_dir, label)
                quarantined = area.count_rows(area.part_files(area.quarantine_dir))
            if incremental:
                column = request.load.watermark_column or ""
                mark = (
                    mark_of_staged(read_parquet(self.spark(), files), column, previous)
                    if rows
                    else Watermark(column, previous, previous)
                )
                area.write_manifest({"watermark": mark.as_dict()})
        except BaseException:
            area.remove()
            raise
        return StagedBatch(
            request.batch_id,
            None,
            area.name,
            rows,
            columns,
            quarantine_table=area.name if quarantine is not None else None,
            quarantined=quarantined,
        )

    def discard(self, staged: StagedBatch) -> None:
        """Delete a batch's staging area when it will not be committed (no error if it is gone)."""
        staging_area(self.store, staged.staging_table).remove()

    # ------------------------------------------------------------------ hooks and quarantine

    def run_sql_hooks(
        self, slot: str, hooks: Sequence[SqlHook | RefreshMatViewHook], schema: str | None
    ) -> None:
        """The context store has no SQL engine: SQL-like hooks are refused (webhooks are run by
        the engine, not here)."""
        if hooks:
            raise HookError(f"{slot} hooks: {NO_SQL_HOOKS}", NO_SQL_HOOKS_HINT)

    def quarantined(
        self,
        table: QuarantineTable,
        pipeline_id: str,
        *,
        run_id: str | None = None,
        limit: int = 50,
    ) -> list[QuarantinedRow] | None:
        """A page of quarantined records, newest first; None when the table does not exist yet."""
        location = self._location(table.table, "quarantine table")
        delta = open_table(location)
        if delta is None:
            return None
        return read_quarantined(delta, location, pipeline_id, run_id=run_id, limit=limit)

    def read_for_replay(
        self, spark: Any, table: QuarantineTable, request: LoadRequest, of_run: str
    ) -> Any:
        check_replay(CONTEXT)
        return None

    # ------------------------------------------------------------------ schema evolution

    def target_columns(self, request: LoadRequest) -> tuple[TargetColumn, ...] | None:
        """The target table's columns with Delta's type names (`inspect.type_name`, as the
        commit's schema check and `plan` name them); None when there is no Delta table."""
        location = self._location(request.target_table, "target table")
        table = open_table(location)
        if table is None:
            return None
        with delta_errors(location, "read", reading=True):
            return table_columns(table)

    def count_deletes(self, frame: Any, request: LoadRequest) -> tuple[int, int] | None:
        location = self._location(request.target_table, "target table")
        return count_deletes(self._delta_spark(), location, frame, request)

    def count_changes(self, frame: Any, request: LoadRequest) -> ChangeCount | None:
        location = self._location(request.target_table, "target table")
        return count_changes(self._delta_spark(), location, frame, request)

    def evolve(self, request: LoadRequest, change: SchemaChange) -> None:
        """Apply `change` to the target table as ONE new Delta version (metadata-only when it
        only adds columns, else a rewrite of every row), or raise and leave the table as it was;
        see `evolve.evolve_table`."""
        location = self._location(request.target_table, "target table")
        evolve_table(location, self.spark, request, change)

    # ------------------------------------------------------------------ committing

    def forget_target(self, request: LoadRequest) -> None:
        """Nothing: the ledger (app transaction ids) and the watermark live in the table's own
        Delta log, and went with it."""

    def is_committed(self, request: LoadRequest) -> bool:
        """Is the batch's app transaction id in the target table's Delta log?"""
        return is_committed(self._location(request.target_table, "target table"), request)

    def commit(
        self, staged: StagedBatch, request: LoadRequest, checkpoint: Checkpoint
    ) -> LoadResult:
        location = self._location(request.target_table, "target table")
        area = staging_area(self.store, staged.staging_table)
        try:
            check_mode_available(request.load, CONTEXT)
            check_empty_source(request.load, staged.rows, str(location))
            _refuse_unsupported(request)
            if is_committed(location, request):
                area.remove()
                return LoadResult(rows_loaded=0, already_committed=True)
            if not area.exists():
                raise LoadError(
                    f"the staging area {area.root} of batch {request.batch_id} is gone",
                    "it was deleted before the commit; apply again to re-stage the batch",
                )
            load = self._plan(area, request, location, staged.rows)
            # Write-audit-publish: the staged rows are audited before anything is committed.
            validations = self._audit(load.files, request, location)
            quarantined = self._quarantine(area, staged, request)
            rows, deleted = self._publish(load, request, checkpoint)
        except BaseException:
            area.remove()
            raise
        area.remove()
        checkpoint("after_dest_commit")
        return LoadResult(
            rows_loaded=rows,
            rows_deleted=deleted,
            created_target=load.table is None,
            watermark=load.watermark.mark if load.watermark else None,
            quarantined=quarantined,
            validations=tuple(validations),
        )

    def _plan(self, area: StagingArea, request: LoadRequest, location: Path, rows: int) -> _Load:
        """Check the staged rows against the table and the load mode; nothing is written."""
        files = area.part_files(area.rows_dir)
        if not files:
            raise LoadError(
                f"the staging area {area.root} of batch {request.batch_id} has no data files",
                "it was emptied before the commit; apply again to re-stage the batch",
            )
        load = request.load
        schema = without_control_columns(
            staged_arrow_schema(files), load.mode, load.strategy.control_columns, location
        )
        table = open_table(location)
        if table is not None:
            check_staged_schema(table, schema, location)
        merge_key = None
        if load.strategy.merge_key(load) is not None:
            merge_key = self._check_upsert(files, schema, table, request, location)
        watermark = None
        if load.strategy.high_water_mark(load) is not None:
            recorded = area.manifest().get("watermark")
            if recorded is None:
                raise LoadError(
                    f"batch {request.batch_id} was staged without its watermark",
                    "apply again to re-stage the batch",
                )
            watermark = Watermark.from_dict(recorded)
        return _Load(
            location=location,
            table=table,
            files=files,
            rows=rows,
            merge_key=merge_key,
            watermark=watermark,
        )

    def _check_upsert(
        self,
        files: list[Path],
        schema: pa.Schema,
        table: DeltaTable | None,
        request: LoadRequest,
        location: Path,
    ) -> tuple[str, ...]:
        """The upsert key: set, among the staged columns, not all of the table's columns, and
        unique and not NULL in the batch (a Delta table has no key constraint to enforce either).

        A batch of key columns only is fine when the table has more columns (the source stopped
        sending them): its new keys are inserted with NULL there, matched rows stay as they are."""
        key = check_upsert_key(
            request.load,
            schema.names,
            None if table is None else [c.name for c in table_columns(table)],
            str(location),
            key_only="mirror" in request.load.strategy.needs,
        )
        self._check_unique_key(files, key, location, request.source_label)
        return key

    def _check_unique_key(
        self, files: list[Path], key: Sequence[str], location: Path, source: str
    ) -> None:
        """One Spark aggregation over the staged rows: the key values that are NULL or appear
        more than once (a Delta table has no key constraint to stop a second row)."""
        from pyspark.sql import functions as F

        from hakiri.spark.errors import spark_errors

        count = "_hakiri_rows"
        columns = [F.col(quoted_name(k)) for k in key]
        any_null = F.lit(False)
        for column in columns:
            any_null = any_null | column.isNull()
        frame = read_parquet(self.spark(), files)
        with spark_errors(
            f"checking the upsert key of the rows for {location}", fallback=LoadError
        ):
            grouped = frame.groupBy(*columns).agg(F.count(F.lit(1)).alias(count))
            if grouped.where(any_null | (F.col(count) > 1)).first() is None:
                return  # one job when the key is fine; what is wrong is looked at after
            nulls = grouped.where(any_null).agg(F.sum(count)).first()
            repeated = grouped.where(~any_null & (F.col(count) > 1))
            examples = (
                repeated.orderBy(*columns)
                .select(*[c.cast("string") for c in columns], F.col(count))
                .limit(DUPLICATE_EXAMPLES)
                .collect()
            )
            total = repeated.count() if len(examples) == DUPLICATE_EXAMPLES else len(examples)
        if nulls is not None and nulls[0]:
            raise LoadError(
                f"upsert_key ({', '.join(key)}) is NULL in {nulls[0]:,} rows of {source}; "
                "nothing was loaded",
                "filter those rows out or fill the key in a transform; a NULL key never matches, "
                "so each load would add the row again",
            )
        if examples:
            found = [(list(row)[:-1], int(row[-1])) for row in examples]
            raise duplicate_keys_error(key, found, total, source)

    def _audit(self, files: list[Path], request: LoadRequest, location: Path) -> list[ProbeResult]:
        """Dataset validators on the staged rows; an `abort` that fails raises before any commit."""
        if not request.validators:
            return []
        from hakiri.destinations.context.tables import table_frame
        from hakiri.quality.spark_probes import probe_frame
        from hakiri.spark.errors import spark_errors

        spark = self.spark()
        frame = read_parquet(spark, files)
        with (
            span("hakiri.validate", {"hakiri.validator.count": len(request.validators)}),
            spark_errors(f"checking the validators of the rows for {location}", fallback=LoadError),
        ):
            results = probe_frame(
                frame,
                request.validators,
                ref_table=lambda name: table_frame(spark, self.store, name),
            )
        return check_validators(results, str(location))

    def _quarantine(self, area: StagingArea, staged: StagedBatch, request: LoadRequest) -> int:
        """Commit the staged quarantine records (a retried batch finds its id and skips them)."""
        quarantine = quarantine_of(staged, request)
        files = area.part_files(area.quarantine_dir)
        count = area.count_rows(files) if files else 0
        if quarantine is None or not count:
            return 0
        location = self._location(quarantine.table, "quarantine table")
        table = open_table(location)
        if table is not None:
            if is_committed(location, request):
                return 0
            check_staged_schema(table, staged_arrow_schema(files), location)
        metadata = batch_metadata(request, **{"hakiri.node_id": request.quarantine.node_id})
        if self._commits_by_delta_rs():
            append_files(location, files, overwrite=False, request=request, metadata=metadata)
            return count
        write_rows(
            self._delta_spark(),
            location,
            files,
            overwrite=False,
            request=request,
            metadata=metadata,
        )
        return count

    def _publish(
        self, load: _Load, request: LoadRequest, checkpoint: Checkpoint
    ) -> tuple[int, int]:
        """The data commit, by Spark, with checkpoint('before_dest_commit') just before it;
        (rows written, rows deleted or closed)."""
        metadata = batch_metadata(request)
        if load.watermark is not None:
            metadata[WATERMARK_COLUMN_KEY] = load.watermark.column
            if load.watermark.mark is not None:
                metadata[WATERMARK_KEY] = load.watermark.mark
        checkpoint("before_dest_commit")
        written = request.load.strategy.write(
            request.load, _DeltaWriter(self, load, request, metadata)
        )
        return written.rows, written.deleted

    # ------------------------------------------------------------------ helpers

    def _commits_by_delta_rs(self) -> bool:
        """Does delta-rs commit the batches (an engine whose Delta writer drops txnAppId)?"""
        return commits_by_delta_rs(self.spark())

    def _delta_spark(self) -> SparkSession:
        """The SparkSession, checked to have delta-spark (which commits every batch)."""
        from hakiri.destinations.context.tables import require_delta

        return require_delta(self.spark())

    def _location(self, table: str, what: str) -> Path:
        check_table_name(table, what)
        return self.store / table


class _DeltaWriter:
    """The load modes' write primitives (`spec.modes.ModeWriter`) on a Delta table: each ONE
    commit with the batch's transaction identity. Plain writes and key merges are committed
    by delta-rs on an engine whose Delta writer drops that identity; the history-keeping
    merges (scd2, replace_window, deletes) and cdc_mirror's by Spark (`merge.DeltaMerge`,
    which hands them to delta-rs on an engine whose MERGE drops it)."""

    def __init__(
        self,
        destination: ContextDestination,
        load: _Load,
        request: LoadRequest,
        metadata: dict[str, str],
    ) -> None:
        self.destination = destination
        self.load = load
        self.request = request
        self.metadata = metadata

    def insert(self) -> Written:
        return self._write(overwrite=False)

    def replace(self) -> Written:
        # One new table version replaces every row atomically: readers never see it empty.
        return self._write(overwrite=True)

    def swap(self) -> Written:
        return self._write(overwrite=True)

    def insert_past_watermark(self) -> Written:
        # Only rows past the mark were staged (`stage`); the mark rides in the commit's metadata.
        return self._write(overwrite=False)

    def merge(self, key: Sequence[str], *, update: bool) -> Written:
        load, request = self.load, self.request
        if load.table is None:  # nothing to match: the batch creates the table
            return self._write(overwrite=False)
        if request.load.deletes is not None:
            if not update:
                raise LoadError(
                    f"load mode {request.load.mode} cannot detect deletes in {load.location}",
                    "remove `deletes` from [pipeline.load]",
                )
            rows, deleted = merge_upsert_with_deletes(
                self._spark(), load.location, load.files, key, request, self.metadata
            )
            return Written(rows, deleted)
        if self.destination._commits_by_delta_rs():
            return Written(
                merge_files(load.location, load.files, key, request, self.metadata, update=update)
            )
        rows = merge_rows(
            self._spark(), load.location, load.files, key, request, self.metadata, update=update
        )
        return Written(rows)

    def mirror(self, key: Sequence[str]) -> Written:
        load = self.load
        rows, deleted = mirror_changes(
            self._spark(),
            load.location,
            load.files,
            key,
            self.request,
            self.metadata,
            load.table is not None,
        )
        return Written(rows, deleted)

    def history(self) -> Written:
        load = self.load
        rows, closed = merge_scd2(
            self._spark(),
            load.location,
            load.files,
            self.request,
            self.metadata,
            load.table is not None,
        )
        return Written(rows, closed)

    def replace_window(self) -> Written:
        load = self.load
        if load.table is None:
            return self._write(overwrite=False)
        rows, deleted = merge_replace_window(
            self._spark(), load.location, load.files, self.request, self.metadata
        )
        return Written(rows, deleted)

    def _write(self, *, overwrite: bool) -> Written:
        load, request = self.load, self.request
        if self.destination._commits_by_delta_rs():
            append_files(
                load.location,
                load.files,
                overwrite=overwrite,
                request=request,
                metadata=self.metadata,
            )
        else:
            write_rows(
                self._spark(),
                load.location,
                load.files,
                overwrite=overwrite,
                request=request,
                metadata=self.metadata,
            )
        return Written(load.rows)

    def _spark(self) -> SparkSession:
        return self.destination._delta_spark()


def _refuse_unsupported(request: LoadRequest) -> None:
    """What the engine refuses before a run (`capabilities.refusals`), refused here too for a
    caller that bypasses it."""
    if request.replay_of:
        check_replay(CONTEXT)
    if request.post_hook is not None:
        raise HookError(f"post hooks: {NO_SQL_HOOKS}", NO_SQL_HOOKS_HINT)
