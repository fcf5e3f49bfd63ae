"""One pipeline: where rows come from, where they go, how and when."""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Discriminator, Field, Tag, ValidationInfo, field_validator, model_validator
from pydantic_core import PydanticCustomError

from hakiri.spec.base import Duration, Name, PipelineId, SpecModel
from hakiri.spec.datetime_patterns import pattern_problem
from hakiri.spec.hooks import HooksSpec, SqlHook
from hakiri.spec.load import LoadMode, LoadSpec, ModeName, load_option
from hakiri.spec.modes import ModeOptionError
from hakiri.spec.quality import QuarantineSpec, ValidateSpec
from hakiri.spec.rest import RestConfig
from hakiri.spec.schedule import parse_schedule
from hakiri.spec.shopify import ShopifySource, check_shopify_pipeline
from hakiri.spec.sources import REGISTERED, RegisteredSource, connector_tag
from hakiri.spec.transforms import SparkType, TransformStep

# ---------------------------------------------------------------- sources


class FilesConfig(SpecModel):
    path: str = Field(
        min_length=1,
        description="File or glob, relative to the project directory, e.g. 'data/orders/*.csv'.",
    )
    format: Literal["csv", "json", "jsonl", "parquet"] = "csv"
    changes: Literal["debezium"] | None = Field(
        None,
        description="The files hold change events, not rows: 'debezium' (Debezium's "
        "envelope, JSON Lines), for load mode cdc_mirror.",
    )
    header: bool = Field(True, description="csv: the first line holds column names.")
    delimiter: str = Field(",", min_length=1, max_length=1)
    encoding: str = "utf-8"
    columns: dict[Name, SparkType] | None = Field(
        None, description="Declared schema (column -> Spark SQL type); inferred when absent."
    )
    column_names: list[Name] | None = Field(
        None,
        min_length=1,
        description="csv with header = false: the columns' names, in file order (types are "
        "still inferred); without it they are _c0, _c1, ...",
    )
    null_value: str | None = Field(
        None,
        min_length=1,
        description="csv: the text that stands for NULL, e.g. 'NA' (Spark's nullValue); "
        "an empty field is NULL either way.",
    )
    nan_value: str | None = Field(
        None,
        min_length=1,
        description="csv: the text that stands for NaN in a floating-point column (Spark's "
        "nanValue); 'NaN' when absent.",
    )
    quote: str = Field(
        '"',
        description='csv: the quote character (Spark\'s quote); "" reads every character as data.',
    )
    escape: str = Field(
        '"',
        description="csv: the character that escapes a quote inside a quoted field (Spark's "
        'escape); the default \'"\' reads RFC 4180 doubled quotes, "\\\\" backslash escapes.',
    )
    comment: str | None = Field(
        None, description="csv: lines starting with this character are skipped (Spark's comment)."
    )
    date_format: str | None = Field(
        None,
        min_length=1,
        description="csv, json, jsonl: the pattern of date values, e.g. 'dd/MM/yyyy' (hakiri's "
        "datetime patterns, read the same on every engine: docs/sources.md).",
    )
    timestamp_format: str | None = Field(
        None,
        min_length=1,
        description="csv, json, jsonl: the pattern of timestamp values, e.g. "
        '"dd/MM/yyyy HH:mm:ss" (hakiri\'s datetime patterns; no offset: the session time zone).',
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
        "ignore",
        description="What to do when the glob matches no file: ignore (a note; an emptied drop "
        "folder is routine), alert (an empty_source alert each time) or fail. A path that has "
        "never matched a file is warned about on every plan and apply, and alerted once, "
        "whatever this says.",
    )
    on_empty: Literal["ignore", "alert", "fail"] = Field(
        "ignore",
        description="What to do with a file that holds no data record (a header-only CSV, an empty "
        "JSON array, a 0-row Parquet file): ignore loads it as a batch of 0 rows, alert does that "
        "and raises an empty_source alert, fail fails the batch.",
    )
    provenance: bool = Field(
        False, description="Add _source_file_hash and _hakiri_batch_id columns to the target."
    )

    @field_validator("quote", "escape", "comment")
    @classmethod
    def _one_character(cls, value: str | None, info: ValidationInfo) -> str | None:
        if value is None or len(value) == 1 or (info.field_name == "quote" and value == ""):
            return value
        allowed = (
            'one character, or "" for no quoting' if info.field_name == "quote" else "one character"
        )
        raise _files_option(
            f"`{info.field_name}` must be {allowed}, not {value!r}",
            f'e.g. {info.field_name} = "{_EXAMPLE_CHARACTER[info.field_name]}"',
        )

    @field_validator("date_format", "timestamp_format")
    @classmethod
    def _hakiri_reads(cls, value: str | None, info: ValidationInfo) -> str | None:
        problem = pattern_problem(value) if value is not None else None
        if problem:
            reason, hint = problem
            raise _files_option(f"`{info.field_name}`: {reason}", hint)
        return value

    @field_validator("column_names")
    @classmethod
    def _distinct_names(cls, names: list[str] | None) -> list[str] | None:
        seen: dict[str, str] = {}
        for name in names or []:
            if name.lower() in seen:
                raise _files_option(
                    f"`column_names` names {seen[name.lower()]!r} and {name!r}: Spark compares "
                    "column names without case, so they are one column twice",
                    "give every column a distinct name",
                )
            seen[name.lower()] = name
        return names

    @model_validator(mode="after")
    def _options_fit_the_format(self) -> Self:
        for key, formats in _FORMAT_ONLY.items():
            # A key written out at its default changes nothing: a normalized spec (every key
            # written out) must read back as it was.
            default = type(self).model_fields[key].default
            if getattr(self, key) != default and self.format not in formats:
                raise _files_option(
                    f"`{key}` applies to {' and '.join(formats)} files, and format is {self.format!r}",
                    f"remove `{key}` from the source config",
                    at=key,
                )
        for key in ("quote", "comment"):
            if self.format == "csv" and getattr(self, key) == self.delimiter:
                raise _files_option(
                    f"`{key}` and `delimiter` are both {self.delimiter!r}",
                    f"set `{key}` to the character the files use for it, which cannot be the delimiter",
                    at=key,
                )
        if self.null_value is not None and self.null_value == self.nan_value:
            raise _files_option(
                f"`null_value` and `nan_value` are both {self.null_value!r}: a field cannot mean "
                "NULL and NaN at once",
                "keep the one the files mean",
                at="nan_value",
            )
        if self.column_names is not None and self.header:
            raise _files_option(
                "`column_names` names the columns of a file without a header, and `header` is true",
                "set header = false if the files have no header line; otherwise remove "
                "`column_names` (the header names the columns)",
                at="column_names",
            )
        if self.column_names is not None and self.columns is not None:
            raise _files_option(
                "`column_names` and `columns` both name the columns",
                "remove `column_names`: with header = false, `columns` names and types the "
                "columns in file order",
                at="column_names",
            )
        return self


# Keys that mean something to these formats only (the other formats store types or quoting).
_FORMAT_ONLY: dict[str, tuple[str, ...]] = {
    "changes": ("json", "jsonl"),
    "column_names": ("csv",),
    "null_value": ("csv",),
    "nan_value": ("csv",),
    "quote": ("csv",),
    "escape": ("csv",),
    "comment": ("csv",),
    "date_format": ("csv", "json", "jsonl"),
    "timestamp_format": ("csv", "json", "jsonl"),
}
_EXAMPLE_CHARACTER = {"quote": "'", "escape": "\\\\", "comment": "#"}


def _files_option(reason: str, hint: str, *, at: str | None = None) -> PydanticCustomError:
    # `hint` and `at` (the key to point at, for a check that spans keys) ride along in the
    # context for the diagnostics; the reason is a placeholder so braces in it stay literal.
    context = {"reason": reason, "hint": hint} | ({"at": at} if at else {})
    return PydanticCustomError("files_option", "{reason}", context)


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


_PG_NAME = r"^[a-z_][a-z0-9_]{0,62}$"


class CdcConfig(SpecModel):
    """`cdc = { slot = "…", publication = "…" }`: read the tables' changes from PostgreSQL's
    logical decoding (pgoutput), after a snapshot of them (`load.mode = "cdc_mirror"`)."""

    slot: Annotated[str, Field(pattern=_PG_NAME)] | None = Field(
        None,
        description="The logical replication slot (created on the first apply, or adopted "
        "when it exists and is idle); hakiri_<pipeline id> when absent.",
    )
    publication: Annotated[str, Field(pattern=_PG_NAME)] | None = Field(
        None,
        description="The publication of the pipeline's tables (created on the first apply "
        "when missing); hakiri_<pipeline id> when absent.",
    )
    max_lag_bytes: int | None = Field(
        None,
        ge=1,
        description="Alert when the slot retains more WAL than this (bytes behind the server).",
    )


class PostgresSourceConfig(_ConnectionRef):
    schema_name: Name = Field(
        "public", alias="schema", description="Schema the source tables live in."
    )
    fetch_size: int = Field(10_000, ge=1)
    partition_column: Name | None = Field(
        None, description="Numeric/date column used to split reads into parallel partitions."
    )
    num_partitions: int = Field(1, ge=1, le=256)
    cdc: CdcConfig | None = Field(
        None, description="Mirror the tables' changes (logical decoding) with mode cdc_mirror."
    )


class PostgresSource(SpecModel):
    connector: Literal["postgres"]
    config: PostgresSourceConfig


GITHUB_TABLES = ("issues", "pull_requests", "comments")


class GithubConfig(SpecModel):
    """`connector = "github"`: issues, pull requests and issue comments of one or more
    repositories, through GitHub's REST API (or GitHub Enterprise Server's, or a test
    server's, with `base_url`)."""

    repo: Annotated[str, Field(pattern=r"^[\w.-]+/[\w.-]+$")] | None = Field(
        None, description="The repository, 'owner/name'."
    )
    repos: (
        Annotated[list[Annotated[str, Field(pattern=r"^[\w.-]+/[\w.-]+$")]], Field(min_length=1)]
        | None
    ) = Field(None, description="Several repositories, read side by side (one engine task each).")
    base_url: Annotated[str, Field(pattern=r"^https?://")] = Field(
        "https://api.github.com",
        description="The API's root: GitHub Enterprise Server's is https://HOST/api/v3.",
    )
    token_secret: Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$")] = Field(
        "GITHUB_TOKEN",
        description="The environment variable that holds the API token (never printed).",
    )
    per_page: int = Field(100, ge=1, le=100, description="Records per request (GitHub allows 100).")

    @model_validator(mode="after")
    def _one_way_to_name_repositories(self) -> Self:
        if (self.repo is None) == (self.repos is None):
            raise ValueError("set exactly one of `repo` ('owner/name') or `repos` (a list)")
        return self

    @property
    def repositories(self) -> list[str]:
        return [self.repo] if self.repo is not None else list(self.repos or [])


class GithubSource(SpecModel):
    connector: Literal["github"]
    config: GithubConfig


class RestSource(SpecModel):
    connector: Literal["rest"]
    config: RestConfig


# A built-in connector's branch by its name; any registered one's through RegisteredSource
# (`spec.sources`); the JSON Schema lists each by name (`spec.schema_export`).
SourceSpec = Annotated[
    Annotated[FilesSource, Tag("files")]
    | Annotated[PostgresSource, Tag("postgres")]
    | Annotated[GithubSource, Tag("github")]
    | Annotated[RestSource, Tag("rest")]
    | Annotated[ShopifySource, Tag("shopify")]
    | Annotated[RegisteredSource, Tag(REGISTERED)],
    Discriminator(connector_tag),
]

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


def _cursor_column(cursor: str | IncrementalSpec | None) -> str | None:
    return cursor if isinstance(cursor, str) or cursor is None else cursor.column


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
    def _commit_hooks_can_run_in_a_transaction(self) -> Self:
        # A mode that runs the SQL post hooks inside its commit (blue_green: inside the swap
        # transaction): VACUUM cannot run there.
        if not self.load.strategy.post_hook_in_commit:
            return self
        from hakiri.guards.sql import check_admin_sql

        for hook in self.hooks.post:
            if isinstance(hook, SqlHook) and check_admin_sql(hook.statement).needs_autocommit:
                raise PydanticCustomError(
                    "hook_needs_autocommit",
                    "{mode} runs post hooks inside its swap transaction, where `{statement}` "
                    "cannot run",
                    {
                        "mode": str(self.load.mode),
                        "statement": hook.statement,
                        "hint": "use ANALYZE here, or run VACUUM from a schedule of its own",
                    },
                )
        return self

    @model_validator(mode="after")
    def _github_tables_and_cursor(self) -> Self:
        """The github connector reads its three tables, past the `updated_at` cursor."""
        if not isinstance(self.source, GithubSource):
            return self
        for table in self.table_specs():
            if table.name not in GITHUB_TABLES:
                raise PydanticCustomError(
                    "github_table",
                    "the github connector has no table `{table}`",
                    {"table": table.name, "hint": f"use {', '.join(GITHUB_TABLES)}"},
                )
            if _cursor_column(table.incremental or self.incremental) != "updated_at":
                raise PydanticCustomError(
                    "github_cursor",
                    "the github connector reads `{table}` past its `updated_at` cursor",
                    {"table": table.name, "hint": 'set incremental = "updated_at"'},
                )
        return self

    @model_validator(mode="after")
    def _shopify_tables_cursor_and_token(self) -> Self:
        if isinstance(self.source, ShopifySource):
            tables = [
                (t.name, _cursor_column(t.incremental or self.incremental))
                for t in self.table_specs()
            ]
            check_shopify_pipeline(self.source.config, tables, self.secrets)
        return self

    @model_validator(mode="after")
    def _change_files_are_mirrored(self) -> Self:
        """Change events are not rows: only cdc_mirror loads them."""
        config = self.source.config
        if isinstance(config, FilesConfig) and config.changes and self.load.mode != "cdc_mirror":
            raise load_option(
                f"the files hold {config.changes} change events, and load mode "
                f"{self.load.mode} would load the events as rows",
                'set mode = "cdc_mirror" (with upsert_key), or remove `changes`',
                at="mode",
            )
        return self

    @model_validator(mode="after")
    def _rest_tables_and_secrets(self) -> Self:
        """A rest table is one of its endpoints; its auth's secret is one the pipeline
        declares; its cursor is a time."""
        if not isinstance(self.source, RestSource):
            return self
        config = self.source.config
        for table in self.table_specs():
            if table.name not in config.endpoints:
                raise PydanticCustomError(
                    "rest_table",
                    "the rest source has no endpoint `{table}`",
                    {
                        "table": table.name,
                        "hint": f"add [pipeline.source.config.endpoints.{table.name}], or use "
                        + ", ".join(sorted(config.endpoints)),
                    },
                )
            cursor = table.incremental or self.incremental
            if isinstance(cursor, IncrementalSpec) and cursor.kind is CursorKind.NUMERIC:
                raise PydanticCustomError(
                    "rest_cursor",
                    "a rest table reads past a time field, and `{table}`'s cursor is numeric",
                    {"table": table.name, "hint": "use a field that holds ISO 8601 times"},
                )
        auth = config.auth
        if auth is not None and auth.secret not in self.secrets:
            raise PydanticCustomError(
                "rest_secret",
                "the rest source's auth reads the secret {secret}, which `secrets` does not list",
                {"secret": auth.secret, "hint": f'add secrets = ["{auth.secret}"]'},
            )
        return self

    @model_validator(mode="after")
    def _load_fits_the_source(self) -> Self:
        """What a load mode needs from the source: full snapshots to find deletes in, a cursor
        range to replace."""
        load = self.load
        strategy = load.strategy
        cursors = self.cursor_columns()
        if load.detects_deletes and cursors:
            raise load_option(
                f"load mode {load.mode} finds deleted keys by comparing a full snapshot "
                "with the target, and this source reads increments past a cursor "
                f"({', '.join(sorted(set(cursors)))}): every key it did not re-read would be "
                "deleted",
                strategy.deletes_with_cursor_hint(),
                at="load.deletes" if "deletes" in load.model_fields_set else "load.mode",
            )
        try:
            strategy.check_pipeline(self)
        except ModeOptionError as exc:
            raise load_option(exc.reason, exc.hint, at=exc.at) from None
        return self

    def cursor_columns(self) -> list[str]:
        """The cursor column of each table that reads past a cursor (pipeline or table level)."""
        found = [_cursor_column(t.incremental or self.incremental) for t in self.table_specs()]
        return [column for column in found if column is not None]

    def table_specs(self) -> list[TableSpec]:
        """Every entry of `tables` as a TableSpec (plain names expanded)."""
        return [TableSpec(name=t) if isinstance(t, str) else t for t in self.tables]

    @property
    def mode(self) -> LoadMode | ModeName:
        return self.load.mode
