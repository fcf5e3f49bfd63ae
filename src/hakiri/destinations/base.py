"""The destination interface: what an inspection reports, and how a batch is staged and committed.

Plain data and a Protocol; no I/O here."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from hakiri.errors import DestinationUnreachable
from hakiri.spec.load import LoadSpec
from hakiri.spec.quality import DatasetValidator

if TYPE_CHECKING:  # kept out of import time: `plan` imports this module and must stay light
    from hakiri.quality.rules import RuleCheck
    from hakiri.quality.validators import ProbeResult
    from hakiri.spec.hooks import RefreshMatViewHook, SqlHook


@dataclass(frozen=True)
class KeptLeftover:
    """A leftover `hakiri gc` found and kept: `why` is `running` (its run is still running),
    `young` (younger than --older-than: a run may still be using it) or `locked` (in use)."""

    name: str
    why: str


@dataclass
class Garbage:
    """What `hakiri gc` did at one place: the names it dropped, and the leftovers it kept."""

    dropped: list[str] = field(default_factory=list)
    kept: list[KeptLeftover] = field(default_factory=list)

    def add(self, other: Garbage) -> None:
        self.dropped += other.dropped
        self.kept += other.kept


@dataclass(frozen=True)
class TargetColumn:
    name: str
    type: str  # the destination's type as it would be written in DDL: 'bigint', 'character varying(20)', 'text'
    nullable: bool = True


@dataclass(frozen=True)
class StageProgress:
    """What a staging write in flight has written so far, as the destination sees it."""

    rows: int
    bytes: int  # the staging data's size in the destination


@dataclass(frozen=True)
class TargetObservation:
    """One target table as it is now."""

    table: str  # unqualified name
    schema: str | None  # PostgreSQL schema; None for the context store
    exists: bool
    columns: tuple[TargetColumn, ...] = ()
    primary_key: tuple[str, ...] = ()
    dependent_views: tuple[
        str, ...
    ] = ()  # qualified names of views (and materialized views) that read the table
    row_estimate: int | None = None  # from statistics; never a full count
    # Which table this is, beyond its name: PostgreSQL's OID, a Delta table's id. A table
    # dropped and created again (by hand, or by a restore) has another identity.
    identity: str | None = None
    # PostgreSQL: the schema the table goes in does not exist (apply creates it), and whether
    # the connection's role may create it.
    schema_missing: bool = False
    may_create_schema: bool = True

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]

    def schema_refusal(self) -> DestinationUnreachable | None:
        """The schema is missing and the role may not create it: apply would fail at its
        first staging table, so plan says so and apply stops before anything happens."""
        if not self.schema_missing or self.may_create_schema:
            return None
        return DestinationUnreachable(
            f"schema {self.schema} does not exist, and the connection's role may not create it",
            f"create it (CREATE SCHEMA {self.schema}), or grant CREATE on the database to "
            "the connection's user",
        )


# ---------------------------------------------------------------- schema evolution


@dataclass(frozen=True)
class ColumnRetype:
    column: str
    old_type: str  # the target's type now
    new_type: str  # the destination type it becomes


@dataclass(frozen=True)
class SchemaChange:
    """The DDL schema evolution decided for one existing target, before any row of the batch moves.

    Columns the source no longer sends need no DDL: they stay, NULL in new rows.
    """

    add: tuple[TargetColumn, ...] = ()  # new source columns, with the destination's type
    widen: tuple[
        ColumnRetype, ...
    ] = ()  # int -> bigint, varchar(n) -> text, date -> timestamp, ...
    rename: tuple[tuple[str, str], ...] = ()  # declared renames (old, new)
    retype: tuple[
        ColumnRetype, ...
    ] = ()  # incompatible changes accepted with `hakiri schema accept`

    @property
    def empty(self) -> bool:
        return not (self.add or self.widen or self.rename or self.retype)


# ---------------------------------------------------------------- loading (used by the engine)


REPLAY_ROW_COLUMN = "_hakiri_quarantined_row"


@dataclass(frozen=True)
class QuarantineTable:
    """Where rows that broke a warn/skip rule are kept, and the node (table entry) they came from."""

    schema: str | None  # None: the target's schema (PostgreSQL) / the context store
    table: str
    node_id: str


@dataclass(frozen=True)
class QuarantinedRow:
    id: int | str  # PostgreSQL: a bigserial; the context store: a UUID
    pipeline_id: str
    run_id: str
    node_id: str
    rule_id: str
    on_fail: str
    dropped: bool
    row: dict[str, Any]
    created_at: datetime
    replayed_by: str | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "pipeline_id": self.pipeline_id,
            "run_id": self.run_id,
            "node_id": self.node_id,
            "rule_id": self.rule_id,
            "on_fail": self.on_fail,
            "dropped": self.dropped,
            "row": self.row,
            "created_at": self.created_at.isoformat(),
            "replayed_by": self.replayed_by,
        }


@dataclass(frozen=True)
class Window:
    """The rows of the target one replace_window batch replaces: `lo <(=) column <(=) hi`
    (None: unbounded on that side), OR the column IS NULL when `nulls`. Bounds are text,
    cast to the column's type by the destination."""

    column: str
    lo: str | None
    hi: str | None
    lo_inclusive: bool = True
    hi_inclusive: bool = False
    nulls: bool = False

    def describe(self) -> str:
        left = "[" if self.lo_inclusive else "("
        right = "]" if self.hi_inclusive else ")"
        lo = "-inf" if self.lo is None else self.lo
        hi = "+inf" if self.hi is None else self.hi
        return f"{self.column} in {left}{lo}, {hi}{right}" + (" or NULL" if self.nulls else "")


@dataclass(frozen=True)
class LoadRequest:
    """Everything a destination needs to commit one batch; built by the engine."""

    project: str
    pipeline_id: str
    run_id: str
    batch_id: str  # deterministic: recorded in the destination's ledger in the same transaction as the rows
    target_schema: str | None  # None for the context store
    target_table: str
    load: LoadSpec
    post_hook: Callable[[Any], None] | None = (
        None  # blue_green: runs inside the swap transaction, before the rename
    )
    # Probed against the staged rows inside the commit transaction, before the load mode runs.
    validators: tuple[DatasetValidator, ...] = ()
    quarantine: QuarantineTable | None = None  # where stage(..., quarantine=) rows are committed
    # `hakiri replay`: the run whose quarantined rows this batch reloads. The staged frame then has
    # a REPLAY_ROW_COLUMN (the quarantined JSON); those records get `replayed_by` in the same commit.
    replay_of: str | None = None
    # Bytes of input the whole run reads (its pending file batches); None when unknown (tables).
    # A destination may pick how it stages by it (PostgreSQL: JDBC for a small run, see
    # `PostgresDestination`).
    run_bytes: int | None = None
    # When the batch's data was taken (a file's modification time, else when the batch was
    # planned): scd2's version start without a change-time column, and the time a delete
    # closes a version or sets deleted_at. Deterministic across retries of the batch.
    batch_time: datetime | None = None
    # replace_window with window = 'range': the batch's cursor range.
    window: Window | None = None
    # What the batch read, for messages: its file(s), or `schema.table (range)`.
    source: str | None = None

    @property
    def source_label(self) -> str:
        return self.source or f"batch {self.batch_id}"


@dataclass(frozen=True)
class StagedBatch:
    """Rows of one batch written to a staging area in the destination, not yet visible in the target."""

    batch_id: str
    staging_schema: str | None
    staging_table: str
    rows: int
    columns: tuple[TargetColumn, ...]  # staged columns with destination types
    quarantine_table: str | None = None  # staged rule violations, committed with the rows
    quarantined: int = 0
    # The staging table was created like the target (blue_green can swap it in as it is).
    like_target: bool = False


@dataclass(frozen=True)
class ChangeCount:
    """What one batch of a keyed load would do to the target (`plan --count-changes`), counted
    by the engine before any load: batch rows whose key the target lacks, batch rows that
    differ from the target's row of their key, batch rows equal to it, and (when the mode
    detects deletes) the target rows it would delete or close and the live rows in scope, the
    delete guard's two numbers."""

    insert: int
    update: int
    unchanged: int
    delete: int | None = None
    scoped: int | None = None


@dataclass(frozen=True)
class LoadResult:
    rows_loaded: int  # rows the load mode inserted or updated in the target
    already_committed: bool = False  # the ledger already had this batch: nothing was written
    created_target: bool = False
    backup_table: str | None = None
    watermark: str | None = None  # incremental_watermark: the mark after this load
    quarantined: int = 0  # rule-violation records written to the quarantine table
    # Rows the load removed or closed: deleted (upsert deletes = 'hard'), marked deleted
    # ('soft'), versions closed because their key left the snapshot (scd2), or replaced
    # (replace_window: the window's rows before the load).
    rows_deleted: int = 0
    validations: tuple[
        ProbeResult, ...
    ] = ()  # every dataset validator's result (all passed or warned)


# A named point in the commit protocol; the engine passes a callback that may end
# the process there (HAKIRI_CRASH_AT) to prove exactly-once.
Checkpoint = Callable[[str], None]


class Destination(Protocol):
    """Stage a DataFrame, then commit it under a load spec in ONE destination transaction."""

    def stage(self, rows: RuleCheck, request: LoadRequest) -> StagedBatch:
        """Write the rows that pass the rules into a fresh staging table (Spark runs the write)
        and, when `request.quarantine` is set, the rule violations (rule_id, on_fail, dropped,
        row) too, to be committed into it in the same transaction as the rows. The rules are
        judged by `rows.finish()` after this returns."""
        ...

    def stage_progress(self, request: LoadRequest) -> StageProgress | None:
        """While `stage(…, request)` runs in another thread: what it has written so far; None
        before the write starts, after it ends, or where the destination cannot see a write in
        flight. Cheap and read-only: a progress display polls it every few seconds."""
        ...

    def commit(
        self, staged: StagedBatch, request: LoadRequest, checkpoint: Checkpoint
    ) -> LoadResult:
        """Dataset validators + quarantine rows + load mode + ledger row + watermark in one
        transaction, for this target (a failed `abort` validator rolls it all back); calls
        checkpoint('before_dest_commit') just before COMMIT and checkpoint('after_dest_commit') right
        after it; drops the staging table. A batch the ledger already has for this target returns
        `already_committed` without touching the target or calling the checkpoints."""
        ...

    def is_committed(self, request: LoadRequest) -> bool:
        """Is this batch id in the destination's load ledger for this target (committed earlier,
        maybe before a crash)?"""
        ...

    def discard(self, staged: StagedBatch) -> None:
        """Drop a staging table whose batch will not be committed."""
        ...

    def forget_target(self, request: LoadRequest) -> None:
        """The target `request` names was dropped (or dropped and created again) since hakiri
        loaded it: forget the ledger entries and watermark kept for it, so the batches that
        made it load again. (A ledger kept inside the target goes with it: nothing to do.)"""
        ...

    def run_sql_hooks(
        self, slot: str, hooks: Sequence[SqlHook | RefreshMatViewHook], schema: str | None
    ) -> None:
        """Run SQL-like pre/post hooks in a session of their own (guarded again before running)."""
        ...

    def quarantined(
        self,
        table: QuarantineTable,
        pipeline_id: str,
        *,
        run_id: str | None = None,
        limit: int = 50,
    ) -> list[QuarantinedRow] | None:
        """A page of quarantined records, newest first; None when the table does not exist yet."""
        ...

    def target_columns(self, request: LoadRequest) -> tuple[TargetColumn, ...] | None:
        """The target's columns now, with the destination's type names; None when there is no target."""
        ...

    def evolve(self, request: LoadRequest, change: SchemaChange) -> None:
        """Apply `change` to the existing target, all of it or nothing (renames first, then
        added columns, widened and retyped ones). Existing rows get NULL in added columns; a
        retype converts the values (a value that cannot convert fails the whole change)."""
        ...

    def count_deletes(self, frame: Any, request: LoadRequest) -> tuple[int, int] | None:
        """For `plan`, read-only: (target rows the snapshot `frame` would delete or close, the
        live target rows in scope), the delete guard's numbers; None without a target."""
        ...

    def count_changes(self, frame: Any, request: LoadRequest) -> ChangeCount | None:
        """For `plan`, read-only: what the batch `frame` (shaped for the load) would insert,
        update, leave unchanged and (when the mode detects deletes) delete, matched on the
        mode's `changes_key` (`history.changes`); None without a target or a key to match on.
        The target's rows are read into the engine and compared there: only counts return."""
        ...

    def read_for_replay(
        self, spark: Any, table: QuarantineTable, request: LoadRequest, of_run: str
    ) -> Any:
        """A DataFrame of `of_run`'s dropped, not yet replayed rows in the target's columns, plus
        REPLAY_ROW_COLUMN; None when there is no quarantine table."""
        ...
