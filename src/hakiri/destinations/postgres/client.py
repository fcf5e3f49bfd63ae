"""PostgresDestination: stage a DataFrame, then commit it under a load spec in ONE transaction.

The commit, in order, inside one transaction on one connection:

    ledger tables exist? -> claim the batch in _hakiri.load_ledger (already there: drop staging, done)
    -> dataset validators probe the staged rows (an `abort` that fails rolls everything back)
    -> create a missing target (PRIMARY KEY from upsert_key) -> backup_before_load snapshot
    -> the load mode -> rule violations into the quarantine table (replay: mark them replayed)
    -> ledger row gets its row count -> drop the staging tables
    -> checkpoint('before_dest_commit') -> COMMIT -> checkpoint('after_dest_commit')

The empty-source guard and the mode check (a mode it has no primitives for) run before
the connection is even opened, so a refused load cannot have run a single statement. Any failure rolls
back and drops the staging table; a lock not granted in time (blue_green's swap
against a busy target) retries the whole transaction a few times first.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any, TypeVar

from psycopg import sql

from hakiri.destinations.base import (
    REPLAY_ROW_COLUMN,
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
from hakiri.destinations.capabilities import POSTGRES
from hakiri.destinations.commit_checks import check_validators, quarantine_of
from hakiri.destinations.gates import check_empty_source, check_mode_available
from hakiri.destinations.postgres.copy_writer import (
    CopyStageWriter,
    QuarantineSplit,
    copy_statement,
)
from hakiri.destinations.postgres.evolve import evolve_target
from hakiri.destinations.postgres.history import count_changes, count_deletes
from hakiri.destinations.postgres.inspect import inspect_postgres_target, observe_targets
from hakiri.destinations.postgres.ledger import LoadLedger, ensure_ledger_tables
from hakiri.destinations.postgres.load_modes import (
    LoadContext,
    backup_target,
    create_target,
    is_text_type,
    relation_exists,
)
from hakiri.destinations.postgres.names import check_identifier
from hakiri.destinations.postgres.progress import staging_progress
from hakiri.destinations.postgres.quarantine import (
    QUARANTINE_STAGED,
    insert_quarantined,
    mark_replayed,
    quarantine_location,
    read_quarantined,
    replay_query,
)
from hakiri.destinations.postgres.replace import swappable
from hakiri.destinations.postgres.sql_client import (
    TransientLoadError,
    Where,
    connect,
    driver_errors,
    translate_spark_write_error,
)
from hakiri.destinations.postgres.staging import (
    JdbcStageWriter,
    StageWriter,
    create_staging_table,
    create_table_like,
    finish_staging_table,
    positional_names,
    staged_columns,
    staging_name,
    writable_frame,
)
from hakiri.destinations.postgres.writer import PostgresWriter
from hakiri.errors import HakiriError, LoadError
from hakiri.hooks.runner import SqlLikeHook, run_sql_hooks
from hakiri.observability import span
from hakiri.quality.rules import RuleCheck, TaggedRows
from hakiri.quality.validators import ProbeResult, probe_staged
from hakiri.spark.engines import engine_of_session, support

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "COPY_MIN_RUN_BYTES",
    "COPY_MIN_RUN_BYTES_ENV",
    "PostgresDestination",
    "copy_min_run_bytes",
]

# Below this much input in a whole run, COPY's one-off cost (starting Spark's Python workers,
# about 0.9 s here) outweighs what it saves over JDBC (about 13 ms per MB of CSV here).
COPY_MIN_RUN_BYTES = 64 * 1024 * 1024
COPY_MIN_RUN_BYTES_ENV = "HAKIRI_COPY_MIN_RUN_BYTES"


def copy_min_run_bytes(env: Mapping[str, str]) -> int:
    """HAKIRI_COPY_MIN_RUN_BYTES tunes when `writer = "auto"` switches to COPY."""
    text = env.get(COPY_MIN_RUN_BYTES_ENV, "").strip()
    try:
        return max(0, int(text)) if text else COPY_MIN_RUN_BYTES
    except ValueError:
        raise HakiriError(
            f"{COPY_MIN_RUN_BYTES_ENV}={text!r} is not a number of bytes",
            f"set {COPY_MIN_RUN_BYTES_ENV} to an integer such as 67108864, or unset it",
        ) from None


T = TypeVar("T")

_RELATION = """
SELECT c.oid, c.relkind FROM pg_catalog.pg_class c
JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace
WHERE n.nspname = %s AND c.relname = %s
"""


class PostgresDestination:
    """A PostgreSQL database as a hakiri destination (`hakiri.destinations.base.Destination`).

    `schema` is used when a request names no target schema. `writer` is how Spark
    writes the staging table (`[pipeline.load] writer`): "copy" from each partition,
    "jdbc" with Spark's JDBC writer, or "auto": COPY, except for a run that reads less
    than `copy_min_run_bytes` of files, which JDBC stages sooner (COPY's Python
    workers take about a second to start; measured in docs/performance.md).
    `stage_writer`, when given, replaces that choice. `lock_timeout` bounds how long
    blue_green's swap and schema evolution wait for the target; a transaction that
    times out is tried `commit_attempts` times in all, `retry_backoff_seconds` apart (growing).
    """

    capabilities = POSTGRES

    def __init__(
        self,
        url: str,
        schema: str,
        *,
        batch_size: int = 10_000,
        writer: str = "auto",
        copy_min_run_bytes: int = COPY_MIN_RUN_BYTES,
        stage_writer: StageWriter | None = None,
        lock_timeout: str = "5s",
        commit_attempts: int = 3,
        retry_backoff_seconds: float = 0.5,
    ) -> None:
        self.url = url
        self.schema = schema
        self._schemas_seen: set[str] = set()  # schemas known to exist (`_ensure_schema`)
        self.batch_size = batch_size
        self.stage_writer = stage_writer
        self.writer = writer
        self.copy_min_run_bytes = copy_min_run_bytes
        self._copy, self._jdbc = CopyStageWriter(url), JdbcStageWriter(url, batch_size=batch_size)
        self.lock_timeout = lock_timeout
        self.commit_attempts = max(1, commit_attempts)
        self.retry_backoff_seconds = retry_backoff_seconds
        # (batch id, target table) -> the staging table being written, for `stage_progress`
        self._writing: dict[tuple[str, str], tuple[str, str]] = {}

    # ------------------------------------------------------------------ staging

    def stage(self, rows: RuleCheck, request: LoadRequest) -> StagedBatch:
        """Write the rows into a fresh `_hakiri_stg_…` table in the target schema, and their rule
        violations (with a quarantine) into a second one, committed with the rows.

        The staging table is UNLOGGED with the rows' columns, except for blue_green into an
        existing target with the COPY writer: then it is created like the target and becomes
        the target at the swap, so the commit copies nothing. An empty string in a column the
        target stores as text is staged as NULL. The COPY writer sorts rows and violations in
        the one pass that reads them; the JDBC writer writes the two from the rules' cached
        evaluation."""
        check_mode_available(request.load, POSTGRES)
        schema = self._schema(request)
        check_identifier(request.target_table, "target table")
        self._ensure_schema(schema)
        keep = request.quarantine is not None
        writer = self.writer_for(request, rows.frame)
        target = self.target_columns(request)
        if rows.has_rules and isinstance(writer, CopyStageWriter):
            tagged = rows.tagged(keep_quarantine=keep)
            if tagged is not None:
                return self._stage_tagged(rows, tagged, request, schema, writer, target)
        frame, quarantine = rows.split()
        layout = self._layout(frame.schema.fields, request, schema, writer, target)
        staged = self._stage_layout(frame, layout, request, schema, writer)
        if quarantine is None or not keep:
            return staged
        try:
            q_name, q_rows, _ = self._stage_frame(quarantine, request, schema)
        except BaseException:
            self._discard_quietly(staged, schema)
            raise
        return replace(staged, quarantine_table=q_name, quarantined=q_rows)

    def _layout(
        self,
        fields: Sequence[Any],
        request: LoadRequest,
        schema: str,
        writer: StageWriter,
        target: tuple[TargetColumn, ...] | None,
    ) -> _Layout:
        """How the rows with these Spark fields are staged for this target (see `_Layout`)."""
        from pyspark.sql.types import StructType

        columns = staged_columns(StructType(list(fields)))
        types = {column.name: column.type for column in target or ()}
        blank = tuple(
            c.name
            for c in columns
            if c.type == "text"
            and (c.name not in types or is_text_type(types[c.name]))
            and request.load.strategy.empty_strings_as_null
        )
        like = None
        needs = request.load.strategy.needs
        if (
            isinstance(writer, CopyStageWriter)
            and target is not None
            and not request.replay_of
            # staged like the target, swapped in as is: blue_green always, truncate when
            # nothing is bound to the target's identity (`replace`)
            and ("swap" in needs or ("replace" in needs and self._swappable(request, schema)))
        ):
            shared = tuple(c for c in columns if c.name in types)
            if shared and all(_copies_into(c.type, types[c.name]) for c in shared):
                binary = all(c.type == types[c.name] for c in shared)
                like = sql.Identifier(schema, request.target_table)
                return _Layout(shared, blank, like, binary)
        return _Layout(columns, blank, like)

    def _swappable(self, request: LoadRequest, schema: str) -> bool:
        conn = connect(self.url, autocommit=True)
        where = Where(self.url, schema, request.target_table, "read", conn.info.user)
        try:
            with driver_errors(where):
                return swappable(conn, schema, request.target_table)
        finally:
            conn.close()

    def _stage_layout(
        self, frame: Any, layout: _Layout, request: LoadRequest, schema: str, writer: StageWriter
    ) -> StagedBatch:
        name = staging_name(request)

        def write() -> list[int | None]:
            writable = writable_frame(frame, layout.columns, blank=layout.blank)
            if layout.like is None:
                return [writer.write(writable, schema, name)]
            assert isinstance(writer, CopyStageWriter)  # _layout chose a table like the target
            names = [c.name for c in layout.columns]
            return [writer.write_into(writable, schema, name, names, binary=layout.binary)]

        (count,) = self._stage_tables(request, schema, [(name, layout.columns, layout.like)], write)
        return StagedBatch(
            request.batch_id,
            schema,
            name,
            count,
            layout.columns,
            like_target=layout.like is not None,
        )

    def _stage_frame(
        self, frame: Any, request: LoadRequest, schema: str
    ) -> tuple[str, int, tuple[TargetColumn, ...]]:
        """The frame as it is, into a fresh UNLOGGED staging table (the JDBC path's quarantine)."""
        columns = staged_columns(frame.schema)
        name = staging_name(request)
        writer = self.writer_for(request, frame)

        def write() -> list[int | None]:
            return [writer.write(writable_frame(frame, columns), schema, name)]

        (rows,) = self._stage_tables(request, schema, [(name, columns, None)], write)
        return name, rows, columns

    def _stage_tagged(
        self,
        rows: RuleCheck,
        tagged: TaggedRows,
        request: LoadRequest,
        schema: str,
        writer: CopyStageWriter,
        target: tuple[TargetColumn, ...] | None,
    ) -> StagedBatch:
        fields = tagged.frame.schema.fields
        layout = self._layout(fields[: tagged.width], request, schema, writer, target)
        tags = [tagged.broke, *([tagged.row] if tagged.row else [])]
        width = len(layout.columns)
        name = staging_name(request)
        tables = [(name, layout.columns, layout.like)]
        q_name = None
        if tagged.aside_bits:
            q_name = staging_name(request)
            tables.append((q_name, QUARANTINE_STAGED, None))
        split = QuarantineSplit(
            width=width,
            broke=width,
            row=width + 1 if tagged.row else None,
            skip_bits=tagged.skip_bits,
            aside_bits=tagged.aside_bits,
            rule_ids=tagged.rule_ids,
            on_fails=tagged.on_fails,
            statement=copy_statement(schema, q_name, positional_names(QUARANTINE_STAGED))
            if q_name
            else None,
        )
        into = [c.name for c in layout.columns] if layout.like else positional_names(layout.columns)

        def write() -> list[int | None]:
            frame = writable_frame(tagged.frame, layout.columns, blank=layout.blank, tags=tags)
            counts = writer.write_tagged(frame, schema, name, into, split, binary=layout.binary)
            rows.counted(counts.rows_in, counts.rows, counts.broke, counts.quarantined)
            return [counts.rows, counts.quarantined] if q_name else [counts.rows]

        counts = self._stage_tables(request, schema, tables, write)
        return StagedBatch(
            request.batch_id,
            schema,
            name,
            counts[0],
            layout.columns,
            q_name,
            counts[1] if q_name else 0,
            like_target=layout.like is not None,
        )

    def _stage_tables(
        self,
        request: LoadRequest,
        schema: str,
        tables: list[tuple[str, tuple[TargetColumn, ...], sql.Identifier | None]],
        write: Callable[[], list[int | None]],
    ) -> list[int]:
        """Create the staging tables (UNLOGGED with positional columns, or like a target), run
        `write` (Spark fills them; the rows each got, when the writer counts them), give the
        positional columns their real names; the rows in each. Any failure drops them all."""
        conn = connect(self.url)
        first = tables[0][0]
        where = Where(self.url, schema, first, "create a staging table", conn.info.user)
        try:
            with driver_errors(where):
                for name, columns, like in tables:
                    if like is None:
                        create_staging_table(conn, schema, name, columns, request)
                    else:
                        create_table_like(conn, schema, name, like, request)
                conn.commit()
            flight = (request.batch_id, request.target_table)
            self._writing[flight] = (schema, first)
            try:
                written = write()
            except HakiriError:
                raise
            except Exception as exc:
                raise translate_spark_write_error(exc, where) from exc
            finally:
                self._writing.pop(flight, None)
            with driver_errors(where):
                counts = [
                    finish_staging_table(conn, schema, name, () if like else columns, rows)
                    for (name, columns, like), rows in zip(tables, written, strict=True)
                ]
                conn.commit()
        except BaseException:
            for name, _, _ in tables:
                _drop_quietly(conn, schema, name)
            raise
        finally:
            conn.close()
        return counts

    def stage_progress(self, request: LoadRequest) -> StageProgress | None:
        """Rows and bytes in the staging table `stage` is writing for `request` (see
        `destinations.postgres.progress`)."""
        writing = self._writing.get((request.batch_id, request.target_table))
        if writing is None:
            return None
        return staging_progress(self.url, *writing)

    def writer_for(self, request: LoadRequest, frame: Any = None) -> StageWriter:
        """The stage writer for this request: the one given, else as `writer` says; COPY on an
        engine without Spark's JDBC writer (Sail), whatever `writer` says (`frame`: the rows,
        whose session names the engine)."""
        if self.stage_writer is not None:
            return self.stage_writer
        spark = getattr(frame, "sparkSession", None)
        if (
            spark is not None
            and support(engine_of_session(spark), "postgres_jdbc_writer").status != "works"
        ):
            return self._copy
        if self.writer == "auto":
            small = request.run_bytes is not None and request.run_bytes < self.copy_min_run_bytes
            return self._jdbc if small else self._copy
        return self._jdbc if self.writer == "jdbc" else self._copy

    def discard(self, staged: StagedBatch) -> None:
        """Drop a batch's staging tables when it will not be committed (no error if they are gone)."""
        schema = staged.staging_schema or self.schema
        conn = connect(self.url, autocommit=True)
        try:
            for table in _staging_tables(staged):
                with driver_errors(Where(self.url, schema, table, "drop", conn.info.user)):
                    _drop_staging(conn, schema, table)
        finally:
            conn.close()

    # ------------------------------------------------------------------ hooks and quarantine

    def run_sql_hooks(self, slot: str, hooks: Sequence[SqlLikeHook], schema: str | None) -> None:
        """Run SQL-like hooks in their own autocommit session (pre hooks; post hooks after commit)."""
        schema = schema or self.schema
        conn = connect(self.url, autocommit=True)
        try:
            with driver_errors(Where(self.url, schema, None, f"run {slot} hooks", conn.info.user)):
                run_sql_hooks(conn, slot, hooks, default_schema=schema, in_transaction=False)
        finally:
            conn.close()

    def quarantined(
        self,
        table: QuarantineTable,
        pipeline_id: str,
        *,
        run_id: str | None = None,
        limit: int = 50,
    ) -> list[QuarantinedRow] | None:
        """A page of quarantined records, newest first; None when the table does not exist yet."""
        schema, name = quarantine_location(table, self.schema)
        conn = connect(self.url, autocommit=True)
        try:
            with driver_errors(Where(self.url, schema, name, "read", conn.info.user)):
                if not relation_exists(conn, schema, name):
                    return None
                return read_quarantined(
                    conn, sql.Identifier(schema, name), pipeline_id, run_id=run_id, limit=limit
                )
        finally:
            conn.close()

    def read_for_replay(
        self, spark: Any, table: QuarantineTable, request: LoadRequest, of_run: str
    ) -> Any:
        """The rows of `of_run` that were dropped and not replayed yet, as a Spark DataFrame with
        the target's columns (PostgreSQL converts each JSON row to the target's row type) plus
        REPLAY_ROW_COLUMN; None when the quarantine or the target table does not exist. Read
        by the engine's task with COPY (`pg_reader`), typed from the target's columns."""
        from hakiri.spark.pg_reader import as_text, columns_of, read_query, spark_type

        schema = self._schema(request)
        location = quarantine_location(table, schema)
        conn = connect(self.url, autocommit=True)
        try:
            with driver_errors(Where(self.url, schema, request.target_table, "read", None)):
                if not relation_exists(conn, *location):
                    return None
                if not relation_exists(conn, schema, request.target_table):
                    raise LoadError(
                        f"the target {schema}.{request.target_table} does not exist, so there is "
                        "nothing to replay into",
                        "apply the pipeline first; replay adds quarantined rows to an existing target",
                    )
                replayed = replay_query(
                    sql.Identifier(*location),
                    sql.Identifier(schema, request.target_table),
                    request.pipeline_id,
                    of_run,
                    REPLAY_ROW_COLUMN,
                )
                columns = columns_of(self.url, schema, request.target_table)
                query = (
                    sql.SQL("SELECT {}, {} FROM ({}) r")
                    .format(
                        sql.SQL(", ").join(as_text(name, kind) for name, kind in columns),
                        sql.Identifier(REPLAY_ROW_COLUMN),
                        replayed,
                    )
                    .as_string(conn)
                )
        finally:
            conn.close()
        typed = [(name, spark_type(kind)) for name, kind in columns]
        return read_query(spark, self.url, query, [*typed, (REPLAY_ROW_COLUMN, "string")])

    # ------------------------------------------------------------------ committing

    def forget_target(self, request: LoadRequest) -> None:
        """Delete the target's rows in `_hakiri.load_ledger` and `pipeline_watermarks` (one
        transaction): they describe a table that is not there any more."""
        conn = connect(self.url, autocommit=False)
        where = Where(self.url, "_hakiri", "load_ledger", "write", conn.info.user)
        try:
            with driver_errors(where), conn.transaction():
                LoadLedger(conn).forget(request, self._schema(request))
        finally:
            conn.close()

    def is_committed(self, request: LoadRequest) -> bool:
        conn = connect(self.url, autocommit=True)
        where = Where(self.url, "_hakiri", "load_ledger", "read", conn.info.user)
        try:
            with driver_errors(where):
                return LoadLedger(conn).contains(request, self._schema(request))
        finally:
            conn.close()

    def commit(
        self, staged: StagedBatch, request: LoadRequest, checkpoint: Checkpoint
    ) -> LoadResult:
        schema = self._schema(request)
        try:
            check_mode_available(request.load, POSTGRES)
            check_empty_source(request.load, staged.rows, f"{schema}.{request.target_table}")
            return self._retrying(lambda: self._commit_once(staged, request, schema, checkpoint))
        except BaseException:
            # Rolled back (or committed with the staging table already dropped): drop it if still there.
            self._discard_quietly(staged, schema)
            raise

    def _commit_once(
        self, staged: StagedBatch, request: LoadRequest, schema: str, checkpoint: Checkpoint
    ) -> LoadResult:
        conn = connect(self.url)
        where = Where(self.url, schema, request.target_table, "load", conn.info.user)
        try:
            try:
                with driver_errors(where):
                    result = self._load(conn, staged, request, schema)
                if result.already_committed:
                    with driver_errors(where):
                        conn.commit()
                    return result
                checkpoint("before_dest_commit")
                with driver_errors(where):
                    conn.commit()
            except BaseException:
                _rollback_quietly(conn)
                raise
            checkpoint("after_dest_commit")
            return result
        finally:
            conn.close()

    def _load(
        self,
        conn: psycopg.Connection[Any],
        staged: StagedBatch,
        request: LoadRequest,
        schema: str,
    ) -> LoadResult:
        table = request.target_table
        staging_schema = staged.staging_schema or schema
        ensure_ledger_tables(conn)
        ledger = LoadLedger(conn)
        if not ledger.claim(request, schema):
            for staging_table in _staging_tables(staged):
                _drop_staging(conn, staging_schema, staging_table)
            return LoadResult(rows_loaded=0, already_committed=True)

        staging_obs, target_obs = observe_targets(
            conn, [(staging_schema, staged.staging_table), (schema, table)]
        )
        if not staging_obs.exists:
            raise LoadError(
                f"the staging table {staging_schema}.{staged.staging_table} of batch {request.batch_id} is gone",
                "it was dropped (by `hakiri gc`?) before the commit; apply again to re-stage the batch",
            )
        staging = sql.Identifier(staging_schema, staged.staging_table)
        # Write-audit-publish: the staged rows are audited before the load mode publishes them.
        validations = self._audit(conn, staging, staging_obs.columns, request, schema)
        created = not target_obs.exists
        if created and request.replay_of:
            raise LoadError(
                f"the target {schema}.{table} does not exist, so there is nothing to replay into",
                "apply the pipeline first; replay adds quarantined rows to an existing target",
            )
        if created:
            control = set(request.load.strategy.control_columns)  # cdc_mirror's op
            target_columns = create_target(
                conn,
                schema,
                table,
                [c for c in staging_obs.columns if c.name not in control],
                request.load.primary_key(),
            )
        else:
            target_columns = target_obs.columns
        target_oid = self._table_oid(conn, schema, table)
        ctx = LoadContext(
            conn,
            request,
            schema,
            staging,
            target_oid,
            target_columns,
            staging_obs.columns,
        )
        strategy = request.load.strategy
        backup = None
        if request.load.backup_before_load and not created and strategy.destructive:
            backup = backup_target(ctx)
        writer = PostgresWriter(
            ctx,
            created=created,
            lock_timeout=self.lock_timeout,
            staged_like_target=staged.rows if staged.like_target else None,
        )
        written = strategy.write(request.load, writer)
        rows, deleted, watermark = written.rows, written.deleted, written.watermark

        quarantined = self._quarantine(conn, staged, staging_schema, request, schema)
        if request.replay_of and request.quarantine is not None:
            mark_replayed(
                conn,
                sql.Identifier(*quarantine_location(request.quarantine, schema)),
                staging,
                REPLAY_ROW_COLUMN,
                request,
                request.replay_of,
            )
        ledger.record_rows(request, schema, rows)
        # Dropped inside the transaction: committed together with the rows, so a crash
        # right after COMMIT leaves no staging table behind.
        for staging_table in _staging_tables(staged):
            _drop_staging(conn, staging_schema, staging_table)
        return LoadResult(
            rows_loaded=rows,
            rows_deleted=deleted,
            created_target=created,
            backup_table=backup,
            watermark=watermark,
            quarantined=quarantined,
            validations=tuple(validations),
        )

    @staticmethod
    def _audit(
        conn: psycopg.Connection[Any],
        staging: sql.Identifier,
        staged_columns: Sequence[TargetColumn],
        request: LoadRequest,
        schema: str,
    ) -> list[ProbeResult]:
        """Dataset validators on the staged rows; an `abort` that fails rolls the load back."""
        if not request.validators:
            return []
        with span("hakiri.validate", {"hakiri.validator.count": len(request.validators)}):
            results = probe_staged(
                conn,
                staging,
                request.validators,
                default_schema=schema,
                text_columns=[c.name for c in staged_columns if is_text_type(c.type)],
            )
        return check_validators(results, f"{schema}.{request.target_table}")

    @staticmethod
    def _quarantine(
        conn: psycopg.Connection[Any],
        staged: StagedBatch,
        staging_schema: str,
        request: LoadRequest,
        schema: str,
    ) -> int:
        quarantine = quarantine_of(staged, request)
        if quarantine is None or staged.quarantine_table is None:
            return 0
        return insert_quarantined(
            conn,
            quarantine_location(quarantine, schema),
            sql.Identifier(staging_schema, staged.quarantine_table),
            request,
            quarantine.node_id,
        )

    # ------------------------------------------------------------------ schema evolution

    def count_deletes(self, frame: Any, request: LoadRequest) -> tuple[int, int] | None:
        return count_deletes(self.url, self._schema(request), frame, request)

    def count_changes(self, frame: Any, request: LoadRequest) -> ChangeCount | None:
        return count_changes(self.url, self._schema(request), frame, request)

    def _ensure_schema(self, schema: str) -> None:
        """Create the target schema when it is missing (plan showed `+ create schema`), before
        the first staging table goes into it. A role that may not create it gets the error
        plan already gave. Once per schema and destination: a schema is not dropped mid-run."""
        if schema in self._schemas_seen:
            return
        conn = connect(self.url, autocommit=True)
        where = Where(self.url, schema, None, "create the schema", conn.info.user)
        try:
            with driver_errors(where):
                found = conn.execute("SELECT to_regnamespace(%s) IS NOT NULL", (schema,))
                row = found.fetchone()
                if not (row and row[0]):
                    conn.execute(
                        sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(schema))
                    )
        finally:
            conn.close()
        self._schemas_seen.add(schema)

    def target_columns(self, request: LoadRequest) -> tuple[TargetColumn, ...] | None:
        """The target's columns as `plan` sees them (format_type spelling); None without a target."""
        seen = inspect_postgres_target(self.url, self._schema(request), request.target_table)
        return seen.columns if seen.exists else None

    def evolve(self, request: LoadRequest, change: SchemaChange) -> None:
        """Apply `change` to the live target in one transaction of its own (see evolve.py)."""
        if change.empty:
            return
        schema = self._schema(request)
        check_identifier(request.target_table, "target table")
        self._retrying(lambda: self._evolve_once(request, schema, change))

    def _evolve_once(self, request: LoadRequest, schema: str, change: SchemaChange) -> None:
        conn = connect(self.url)
        where = Where(self.url, schema, request.target_table, "alter", conn.info.user)
        try:
            with driver_errors(where):
                try:
                    evolve_target(conn, schema, request.target_table, change, self.lock_timeout)
                    conn.commit()
                except BaseException:
                    _rollback_quietly(conn)
                    raise
        finally:
            conn.close()

    # ------------------------------------------------------------------ helpers

    def _schema(self, request: LoadRequest) -> str:
        return request.target_schema or self.schema

    def _retrying(self, transaction: Callable[[], T]) -> T:
        """Run `transaction`; one that found the target busy (TransientLoadError) runs again, a few times."""
        for attempt in range(1, self.commit_attempts + 1):
            try:
                return transaction()
            except TransientLoadError as exc:
                if attempt == self.commit_attempts:
                    raise LoadError(
                        f"{exc.reason} (gave up after {attempt} attempts)",
                        "find the session holding the lock (pg_stat_activity, pg_locks) and let it "
                        "finish or end it, then apply again; the target was left as it was",
                    ) from exc
                time.sleep(self.retry_backoff_seconds * attempt)
        raise AssertionError("unreachable")  # pragma: no cover

    @staticmethod
    def _table_oid(conn: psycopg.Connection[Any], schema: str, table: str) -> int:
        row = conn.execute(_RELATION, (schema, table)).fetchone()
        if row is None:  # pragma: no cover - observed or created just above
            raise LoadError(f"target {schema}.{table} vanished during the load", "apply again")
        oid, relkind = row
        if relkind not in ("r", "p"):
            kind = {"v": "a view", "m": "a materialized view", "f": "a foreign table"}.get(
                relkind, "not a table"
            )
            raise LoadError(
                f"the target {schema}.{table} is {kind}, not a table",
                "point the pipeline at a table (or drop the object so hakiri creates the table)",
            )
        return int(oid)

    def _discard_quietly(self, staged: StagedBatch, schema: str) -> None:
        try:
            conn = connect(self.url, autocommit=True)
        except HakiriError:
            return  # the server is gone; `hakiri gc` drops the tables later
        for table in _staging_tables(staged):
            _drop_quietly(conn, staged.staging_schema or schema, table)
        conn.close()


def _staging_tables(staged: StagedBatch) -> list[str]:
    return [t for t in (staged.staging_table, staged.quarantine_table) if t]


def _drop_staging(conn: psycopg.Connection[Any], schema: str, table: str) -> None:
    conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(sql.Identifier(schema, table)))


def _rollback_quietly(conn: psycopg.Connection[Any]) -> None:
    import psycopg

    with contextlib.suppress(psycopg.Error):
        conn.rollback()


def _drop_quietly(conn: psycopg.Connection[Any], schema: str, table: str) -> None:
    """Best-effort cleanup while another error is on its way up; gc catches what this misses."""
    import psycopg

    try:
        conn.rollback()
        conn.autocommit = True
        _drop_staging(conn, schema, table)
    except psycopg.Error:
        pass


@dataclass(frozen=True)
class _Layout:
    """How a batch's rows are staged: `columns` (in this order) into an UNLOGGED table of their
    own, or, with `like`, into a table created like that target (blue_green swaps it in);
    the string columns `blank` have '' staged as NULL."""

    columns: tuple[TargetColumn, ...]
    blank: tuple[str, ...]
    like: sql.Identifier | None
    # PostgreSQL's binary COPY carries no types: it fits a table made from the rows' own
    # types, or a target whose columns have exactly those types; CSV text otherwise.
    binary: bool = True


def _copies_into(staged: str, target: str) -> bool:
    """Does COPY read a staged value of type `staged` into a `target` column exactly as the
    commit's INSERT … SELECT would cast it? Same base type, or text into a text-like column."""
    if staged == "text":
        return is_text_type(target)
    return staged.split("(")[0] == target.split("(")[0]
