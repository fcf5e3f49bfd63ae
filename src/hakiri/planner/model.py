"""The Plan: frozen models that `plan` renders and `--json` prints as is.

They double as the contract of `hakiri plan --json`: `schemas/plan.json` is
generated from `PlanDocument` and a test fails when it drifts.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from hakiri.sources.cdc.lag import CdcLag


class _Frozen(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")


class Action(StrEnum):
    ADD = "add"  # in a manifest, never applied
    # the spec or the target's structure differs from what was applied, or a table
    # source's chunks are left unloaded (a backfill in progress): apply has work to finish
    CHANGE = "change"
    # the spec and targets are as applied, but data waits to be loaded (new or changed files,
    # new rows past a cursor) or queued batches to be settled (their files changed or vanished)
    LOAD = "load"
    NO_OP = "no-op"
    RETIRE = "retire"  # applied once, now in no manifest: state kept, tables untouched


class FieldChange(_Frozen):
    path: str = Field(
        description="Key path in the pipeline spec, e.g. 'load.mode' or 'validate.rules[0].on_fail'."
    )
    kind: str = Field(description="'added', 'removed' or 'changed'.")
    before: Any = None
    after: Any = None


class Column(_Frozen):
    name: str
    type: str | None = Field(
        None, description="Destination type; null when only the data will tell (e.g. CSV)."
    )


class TypeWidening(_Frozen):
    name: str
    from_type: str
    to_type: str


class TargetChange(_Frozen):
    table: str = Field(description="Source table name.")
    target: str = Field(
        description="Target as displayed: 'schema.table' (PostgreSQL) or 'context:table'."
    )
    kind: str = Field(description="'postgres' or 'context'.")
    exists: bool
    create: bool = Field(description="The target will be created (with `columns`).")
    waiting: bool = Field(
        False,
        description="Files sources: the path has never matched a file; the target is created "
        "with the first one.",
    )
    create_schema: str | None = Field(
        None, description="PostgreSQL: the schema is missing too; apply creates it first."
    )
    columns: list[Column] = Field(
        default_factory=list, description="Columns of a target to create."
    )
    add_columns: list[Column] = Field(default_factory=list)
    widen_columns: list[TypeWidening] = Field(default_factory=list)
    rename_columns: list[str] = Field(
        default_factory=list, description="Declared renames the target will follow: 'old -> new'."
    )
    retype_columns: list[TypeWidening] = Field(
        default_factory=list, description="Incompatible changes accepted with `schema accept`."
    )
    incompatible: list[str] = Field(
        default_factory=list,
        description="Changes apply will refuse (the schema policy, a type that does not fit, a "
        "key change).",
    )
    row_estimate: int | None = None
    dependent_views: list[str] = Field(default_factory=list)
    transformed: list[Column] | None = Field(
        None,
        description="The columns the pipeline's transforms make of this table, with Spark types "
        "(null: no transforms, or the source's columns show only in its data).",
    )
    inferred: list[Column] | None = Field(
        None,
        description="A source without declared types (CSV): the destination types the columns "
        "to create or add would get, inferred from the first `inferred_rows` records the way "
        "apply infers them from all (null: nothing to infer, or types are declared).",
    )
    inferred_rows: int | None = Field(None, description="Records the inferred types come from.")

    @property
    def changes_structure(self) -> bool:
        return self.create or bool(
            self.add_columns
            or self.widen_columns
            or self.rename_columns
            or self.retype_columns
            or self.incompatible
        )


class DeletePreview(_Frozen):
    """What the next snapshot's delete detection would do, counted before any load."""

    batch: str = Field(description="The snapshot batch counted (the next one to load).")
    verb: str = Field(description="'delete', 'mark deleted' (soft) or 'close' (scd2).")
    rows: int = Field(description="Target rows whose key the snapshot lacks.")
    of: int = Field(description="Live target rows in scope (delete_scope).")
    max_fraction: float = Field(description="The load's max_delete_fraction.")
    refused: bool = Field(description="Over the guard: apply will refuse the whole load.")


class ChangePreview(_Frozen):
    """What the next batch of a keyed load (upsert, scd2) would do to the target's rows,
    counted before any load (`plan --count-changes`)."""

    batch: str = Field(description="The batch counted (the next one to load).")
    insert: int = Field(description="Batch rows whose key the target lacks.")
    update: int = Field(
        description="Batch rows whose key the target has, with a compared column that differs "
        "(scd2: a new version of a current one)."
    )
    delete: int | None = Field(
        description="Target rows it would delete, mark deleted or close; null when the mode "
        "detects no deletes."
    )
    unchanged: int = Field(description="Batch rows equal to the target's row of their key.")
    verb: str | None = Field(
        None, description="What a delete does: 'delete', 'mark deleted' or 'close'."
    )


class PendingWork(_Frozen):
    table: str
    new_files: list[str] = Field(default_factory=list)
    changed_files: list[str] = Field(default_factory=list)
    bytes: int = 0
    estimated_rows: int | None = Field(
        None, description="Table sources: estimated rows past the cursor."
    )
    estimate: str | None = Field(
        None,
        description="Where `estimated_rows` comes from: 'counted' (an exact count when plan "
        "ran), or 'rough: …' (the source's statistics).",
    )
    new_batches: int = Field(0, description="Batches apply will add to the catalog.")
    queued_batches: int = Field(
        0, description="Batches an earlier run left unloaded (a backfill, a failure, a rewind)."
    )
    reload_batches: int = Field(
        0, description="Committed batches loaded again: the target was dropped since they loaded."
    )
    deletes: DeletePreview | None = Field(
        None, description="Delete-detecting loads (upsert deletes, scd2 close): the guard's count."
    )
    changes: ChangePreview | None = Field(
        None,
        description="Keyed loads (upsert, scd2), with --count-changes: the next batch's effect.",
    )

    @property
    def has_work(self) -> bool:
        return bool(self.new_batches or self.queued_batches or self.reload_batches)


# ---------------------------------------------------------------- steps: what apply does, in order


class BatchRef(_Frozen):
    id: str = Field(description="The batch id: deterministic, also the destination ledger's key.")
    table: str
    kind: str = Field(
        description="'file', 'snapshot' (the whole table), 'chunk' (a range) or 'walk' (pages "
        "of an API, in order)."
    )
    file: str | None = Field(None, description="File batches: the file.")
    range: str | None = Field(
        None, description="Chunks: the cursor range they read; walks: the pages they read."
    )
    bytes: int | None = None


class EvolveStep(_Frozen):
    """Create or change one target before its first batch loads (the exact DDL decision)."""

    step: Literal["evolve"] = "evolve"
    table: str
    create: bool = Field(False, description="The target is created with `columns`.")
    columns: list[Column] = Field(default_factory=list)
    add_columns: list[Column] = Field(default_factory=list)
    widen_columns: list[TypeWidening] = Field(default_factory=list)
    rename_columns: list[str] = Field(default_factory=list, description="'old -> new'.")
    retype_columns: list[TypeWidening] = Field(
        default_factory=list, description="Incompatible changes accepted with `schema accept`."
    )
    discard_columns: list[str] = Field(
        default_factory=list, description="schema_policy = 'discard_columns': left out."
    )
    refused: list[str] = Field(
        default_factory=list,
        description="Changes the schema policy refuses: apply stops before loading this table.",
    )


class RetiredRef(_Frozen):
    id: str = Field(description="A queued batch that will never load as planned.")
    status: str = Field(
        description="'superseded' (its file changed before it loaded: the current content is "
        "a new batch) or 'gone' (its file vanished)."
    )
    reason: str


class EnqueueStep(_Frozen):
    """Persist new batches in the catalog before any data moves, and end the queued ones
    whose files no longer hold what they were planned from."""

    step: Literal["enqueue"] = "enqueue"
    table: str
    batches: list[BatchRef]
    retired: list[RetiredRef] = Field(default_factory=list)


class LoadStep(_Frozen):
    """Claim and load batches, in this order, `parallelism` at a time."""

    step: Literal["load"] = "load"
    batches: list[str] = Field(description="Batch ids in claim order.")
    parallelism: int = 1


class RestoreStep(_Frozen):
    """A target dropped (or dropped and created again) since hakiri loaded it: its ledger
    entries are forgotten and the batches that made it are queued again, to load in this run."""

    step: Literal["restore"] = "restore"
    table: str
    target: str = Field(description="As plan shows it: 'public.orders', 'context:orders'.")
    reason: str = Field(description="'the table was dropped', '... and created again'.")
    batches: list[str] = Field(description="The committed batch ids loaded again.")
    lost: list[str] = Field(
        default_factory=list,
        description="What the source cannot give back (`apply --restore-partial` goes on without it).",
    )


class RetireStep(_Frozen):
    """Mark the pipeline retired in the catalog; its state and target tables stay."""

    step: Literal["retire"] = "retire"


Step = Annotated[
    EvolveStep | EnqueueStep | RestoreStep | LoadStep | RetireStep, Field(discriminator="step")
]


class PipelinePlan(_Frozen):
    id: str
    action: Action
    source: str | None = None
    destination: str | None = None
    mode: str | None = None
    diff: list[FieldChange] = Field(default_factory=list)
    targets: list[TargetChange] = Field(default_factory=list)
    pending: list[PendingWork] = Field(default_factory=list)
    steps: list[Step] = Field(
        default_factory=list,
        description="What apply will do, in order: enqueue, restore, evolve, load, retire. "
        "`apply --json` "
        "reports the steps it executed in the same form.",
    )
    warnings: list[str] = Field(default_factory=list)
    errors: list[str] = Field(
        default_factory=list, description="Why (part of) this pipeline could not be planned."
    )
    cdc: CdcLag | None = Field(None, description="cdc_mirror pipelines: the lag behind the WAL.")
    drift: list[dict[str, Any]] = Field(
        default_factory=list,
        description="Targets changed by hand since hakiri last loaded them: per target, "
        "columns added/dropped/retyped, the primary key, rows (was, now), and a message.",
    )


class ViewAction(StrEnum):
    CREATE = "create"  # in a manifest, not live in the catalog
    REPLACE = "replace"  # live, with other SQL or another description
    DROP = "drop"  # live in the catalog, in no manifest any more
    NO_OP = "no-op"


class BrokenColumn(_Frozen):
    """A column a view's SQL names that the table (or view) it reads will not have."""

    table: str = Field(description="The context-store table or view the view reads.")
    column: str
    pipeline: str | None = Field(
        None, description="The pipeline whose planned change takes the column away, if one does."
    )
    change: str = Field(
        description="'drops' (the pipeline no longer loads it: the column stays, NULL in new "
        "rows), 'renames to NEW', or 'missing' (the table or view does not have it)."
    )
    message: str = Field(description="The warning plan prints.")


class ViewPlan(_Frozen):
    """What apply does to one view: the manifests' definition against the catalog's live one."""

    name: str
    action: ViewAction
    reads: list[str] = Field(
        default_factory=list, description="The tables and views its SQL reads (drop: as recorded)."
    )
    sql: str | None = Field(None, description="The SQL apply records (null: drop).")
    description: str | None = None
    version: int | None = Field(
        None,
        description="create and replace: the version apply records; drop and no-op: the live one.",
    )
    before_sql: str | None = Field(
        None, description="replace and drop: the SQL of the live version in the catalog."
    )
    before_description: str | None = None
    sql_diff: list[str] = Field(
        default_factory=list,
        description="replace: a unified diff of the live SQL to the manifest's, one line each.",
    )
    broken: list[BrokenColumn] = Field(
        default_factory=list,
        description="Columns its SQL names that a table or view it reads will not have after "
        "this plan (a pipeline's change, or a column that was never there).",
    )
    warnings: list[str] = Field(
        default_factory=list,
        description="The `broken` no pipeline is to blame for (those are the pipelines' warnings).",
    )


class Summary(_Frozen):
    add: int = 0
    change: int = 0
    load: int = Field(0, description="Pipelines as applied, with data to load.")
    no_op: int = 0
    retire: int = 0
    errors: int = Field(0, description="Pipelines with at least one error.")
    pending: int = Field(0, description="Pipelines with data waiting to be loaded.")
    view_create: int = Field(0, description="Views apply records for the first time (or again).")
    view_replace: int = Field(0, description="Views whose SQL or description changes.")
    view_drop: int = Field(0, description="Views recorded and now in no manifest.")
    view_no_op: int = Field(0, description="Views as recorded.")

    @property
    def view_changes(self) -> int:
        return self.view_create + self.view_replace + self.view_drop

    @property
    def changes(self) -> int:
        return self.add + self.change + self.retire + self.view_changes


class CatalogInfo(_Frozen):
    url: str = Field(description="Catalog URL with any password masked.")
    initialized: bool = Field(description="False when no catalog exists yet (everything is new).")


class SyncPreview(_Frozen):
    """`[sync]`: where apply publishes the context store after loads that change it."""

    bucket: str
    endpoint: str | None = Field(None, description="The S3 API's URL, after HAKIRI_SYNC_ENDPOINT.")
    after_apply: bool
    missing: list[str] = Field(
        default_factory=list,
        description="Credential variables that are not set: the loads would commit, their "
        "sync would fail (and be alerted).",
    )


class PlanDocument(_Frozen):
    """What `hakiri plan --json` prints."""

    format_version: int = 1
    project: str
    catalog: CatalogInfo
    summary: Summary
    pipelines: list[PipelinePlan]
    sync: SyncPreview | None = Field(
        None, description="Where apply publishes the store, if anywhere."
    )
    views: list[ViewPlan] | None = Field(
        None,
        description="Every view of the manifests and the catalog, in the order apply defines "
        "them (drops last); null when plan was given pipeline ids (apply of ids leaves views "
        "alone).",
    )
    hints: list[str] = Field(
        default_factory=list, description="What else plan could show, and the flag that shows it."
    )
