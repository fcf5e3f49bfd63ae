"""One pipeline: where rows come from, where they go, how and when."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Field, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hakiri.spec.base import Duration, Name, PipelineId, SpecModel
from hakiri.spec.hooks import HooksSpec, SqlHook
from hakiri.spec.load import LoadMode, LoadSpec
from hakiri.spec.quality import QuarantineSpec, ValidateSpec
from hakiri.spec.schedule import parse_schedule
from hakiri.spec.transforms import TransformStep

# ---------------------------------------------------------------- sources


class FilesConfig(SpecModel):
    path: str = Field(
        min_length=1,
        description="File or glob, relative to the project directory, e.g. 'data/orders/*.csv'.",
    )
    format: Literal["csv", "json", "jsonl", "parquet"] = "csv"
    header: bool = Field(True, description="csv: the first line holds column names.")
    delimiter: str = Field(",", min_length=1, max_length=1)
    encoding: str = "utf-8"
    columns: dict[Name, str] | None = Field(
        None, description="Declared schema (column -> Spark SQL type); inferred when absent."
    )
    on_malformed: Literal["fail", "drop"] = Field(
        "fail",
        description="fail names the file and line of the first bad record; drop skips and counts them.",
    )
    on_change: Literal["reload", "ignore", "error"] = Field(
        "reload",
        description="What to do when a file already loaded changes content at the same path.",
    )
    on_miss: Literal["ignore", "alert", "fail"] = Field(
        "ignore", description="What to do when the glob matches no file."
    )
    provenance: bool = Field(
        False, description="Add _source_file_hash and _hakiri_batch_id columns to the target."
    )


class FilesSource(SpecModel):
    connector: Literal["files"]
    config: FilesConfig


class _ConnectionRef(SpecModel):
    """Either a named connection from hakiri.toml or an inline URL (exactly one)."""

    connection: str | None = Field(
        None, description="Name of a [connections.<name>] entry in hakiri.toml."
    )
    url: str | None = Field(None, description="postgresql:// URL; use ${VAR} for the password.")

    @model_validator(mode="after")
    def _exactly_one(self) -> Self:
        if (self.connection is None) == (self.url is None):
            raise ValueError("set exactly one of `connection` (a named connection) or `url`")
        return self


class PostgresSourceConfig(_ConnectionRef):
    schema_name: Name = Field(
        "public", alias="schema", description="Schema the source tables live in."
    )
    fetch_size: int = Field(10_000, ge=1)
    partition_column: Name | None = Field(
        None, description="Numeric/date column used to split reads into parallel partitions."
    )
    num_partitions: int = Field(1, ge=1, le=256)


class PostgresSource(SpecModel):
    connector: Literal["postgres"]
    config: PostgresSourceConfig


SourceSpec = Annotated[FilesSource | PostgresSource, Field(discriminator="connector")]

# ---------------------------------------------------------------- destinations


class ContextDestinationConfig(SpecModel):
    path: str | None = Field(
        None, description="Override the context store location for this pipeline."
    )


class ContextDestination(SpecModel):
    connector: Literal["context"]
    config: ContextDestinationConfig = Field(default_factory=ContextDestinationConfig)


class PostgresDestinationConfig(_ConnectionRef):
    schema_name: Name = Field(
        "public", alias="schema", description="Schema the target tables live in."
    )
    batch_size: int = Field(10_000, ge=1, description="JDBC batch size when staging rows.")


class PostgresDestination(SpecModel):
    connector: Literal["postgres"]
    config: PostgresDestinationConfig


DestinationSpec = Annotated[
    ContextDestination | PostgresDestination, Field(discriminator="connector")
]

# ---------------------------------------------------------------- tables and cursors


class CursorKind(StrEnum):
    TIMESTAMP = "timestamp"
    NUMERIC = "numeric"


class IncrementalSpec(SpecModel):
    column: Name = Field(description="Cursor column: only rows past the stored cursor are read.")
    kind: CursorKind | None = Field(
        None, description="timestamp or numeric; discovered from the column type when absent."
    )
    lag: Duration | None = Field(
        None,
        description="timestamp cursors: re-read this far behind the cursor to catch late rows (deduplicated on the key).",
    )
    on_null_cursor: Literal["include", "skip"] = Field(
        "include",
        description="Rows whose cursor value is NULL: load them (include) or ignore them (skip).",
    )


Incremental = Annotated[
    Name | IncrementalSpec,
    Field(description="Cursor column name, or an object with the cursor's options."),
]


class TableSpec(SpecModel):
    name: Name = Field(description="Source table (or, for files, the logical table name).")
    target: Name | None = Field(None, description="Target table name; defaults to `name`.")
    path: str | None = Field(
        None, description="files source: glob for this table, overriding config.path."
    )
    incremental: Incremental | None = None


TableEntry = Annotated[
    Name | TableSpec, Field(description="A table name, or an object with per-table overrides.")
]

# ---------------------------------------------------------------- backfill


class BackfillSpec(SpecModel):
    window: Duration | Annotated[int, Field(ge=1)] | None = Field(
        None,
        description="Chunk size: a time window ('30d') for timestamp cursors or an id range (10000) for numeric ones.",
    )
    parallelism: int = Field(1, ge=1, le=64, description="Chunks in flight at once.")
    rate_budget: str | None = Field(
        None, pattern=r"^[1-9][0-9]*/(s|min|h)$", description="Cap on source reads, e.g. '60/min'."
    )
    start_from: str | int | None = Field(None, description="Oldest cursor value to backfill from.")
    max_chunks_per_tick: int | None = Field(
        None, ge=1, description="Chunks one scheduler tick may dispatch."
    )


# ---------------------------------------------------------------- the pipeline


class PipelineSpec(SpecModel):
    """One pipeline, as written in `[[pipeline]]` in hakiri.toml or in pipelines/<id>.toml|json."""

    id: PipelineId
    description: str | None = None
    enabled: bool = True
    source: SourceSpec
    tables: Annotated[list[TableEntry], Field(min_length=1)]
    destination: DestinationSpec | None = Field(
        None,
        description="Where rows land; defaults to the project's [context] default_destination.",
    )
    schedule: str | None = Field(
        None, description="Cron expression ('0 */2 * * *') or 'every <n>s|m|h|d'."
    )
    incremental: Incremental | None = None
    load: LoadSpec = Field(default_factory=LoadSpec)
    hooks: HooksSpec = Field(default_factory=HooksSpec)
    validate_: ValidateSpec = Field(default_factory=ValidateSpec, alias="validate")
    quarantine: QuarantineSpec = Field(default_factory=QuarantineSpec)
    backfill: BackfillSpec | None = None
    transforms: list[TransformStep] = Field(default_factory=list)
    schema_policy: Literal["evolve", "freeze", "discard_columns"] = Field(
        "evolve", description="How source schema changes reach the target."
    )
    renames: dict[Name, Name] = Field(
        default_factory=dict, description="Declared column renames (old -> new)."
    )
    secrets: list[Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")]] = Field(
        default_factory=list, description="Environment variables this pipeline needs at run time."
    )

    @field_validator("schedule")
    @classmethod
    def _schedule_parses(cls, value: str | None) -> str | None:
        if value is not None:
            parse_schedule(value)
        return value

    @model_validator(mode="after")
    def _swap_hooks_can_run_in_a_transaction(self) -> Self:
        # blue_green runs SQL post hooks inside its swap transaction; VACUUM cannot run there.
        if self.load.mode is not LoadMode.BLUE_GREEN:
            return self
        from hakiri.guards.sql import check_admin_sql

        for hook in self.hooks.post:
            if isinstance(hook, SqlHook) and check_admin_sql(hook.statement).needs_autocommit:
                raise PydanticCustomError(
                    "hook_needs_autocommit",
                    "blue_green runs post hooks inside its swap transaction, where `{statement}` "
                    "cannot run",
                    {
                        "statement": hook.statement,
                        "hint": "use ANALYZE here, or run VACUUM from a schedule of its own",
                    },
                )
        return self

    def table_specs(self) -> list[TableSpec]:
        """Every entry of `tables` as a TableSpec (plain names expanded)."""
        return [TableSpec(name=t) if isinstance(t, str) else t for t in self.tables]

    @property
    def mode(self) -> LoadMode:
        return self.load.mode
