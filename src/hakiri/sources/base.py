"""The source interface: what an inspection reports, the batches planned, one batch read,
and what a connector is (`SourceKind`).

Plain data and Protocols; no I/O here. Each connector's package (`files/`, `postgres/`,
`rest/`) implements `Source` and describes itself as a `SourceKind`; `sources.kinds` holds
them by name and opens the one a pipeline declares.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Literal, Protocol, runtime_checkable

from hakiri.catalog.records import Batch, BatchStatus, NewBatch, Retirement

if TYPE_CHECKING:
    from collections.abc import Mapping
    from pathlib import Path

    from hakiri.catalog.store import Catalog
    from hakiri.spec.pipeline import CursorKind, PipelineSpec, TableSpec
    from hakiri.spec.project import ProjectFile

# `plan`'s hint for a column a sample infers as a float from values that look like money.
MONEY_HINT = (
    "a binary float cannot hold every cent exactly (sums drift: 249751489.08999926); "
    "declare the source's `columns` with a decimal for money, e.g. "
    '{{ {column} = "decimal(18,2)" }}'
)


@dataclass(frozen=True)
class SourceColumn:
    name: str
    type: str | None = (
        None  # the source's own type name ('bigint', 'text'); None when unknown (e.g. CSV)
    )


@dataclass(frozen=True)
class SourceFile:
    path: str  # relative to the project directory, '/'-separated
    size: int
    content_hash: str  # 'sha256:<hex>' of the file's bytes: the batch id of a file batch


@dataclass(frozen=True)
class TypeSample:
    """The Spark types a file source's columns infer as on a sample (`sources.files.csv_sample`)."""

    types: tuple[tuple[str, str], ...]  # (column, Spark type), in file order
    rows: int  # records sampled
    money: tuple[str, ...] = ()  # columns inferred as double that look like money
    unjudged: tuple[str, ...] = ()  # text columns a custom date/timestamp format might type


@dataclass(frozen=True)
class SourceObservation:
    """One source table as seen now, before any data moves."""

    table: str
    columns: tuple[SourceColumn, ...] | None = None  # None = could not be told without reading data
    files: tuple[SourceFile, ...] = ()  # file sources: every file the glob matches
    estimated_rows: int | None = (
        None  # table sources: estimated rows past the cursor (all rows without one)
    )
    # Where `estimated_rows` comes from: 'counted' (exact, when it was taken) or 'rough: …'.
    estimate_source: str | None = None
    notes: tuple[str, ...] = field(default=())  # e.g. "glob matched no file"
    # Columns without declared types: the types apply will infer, guessed from a sample.
    sample: TypeSample | None = None


@dataclass
class TablePlan:
    """The batches to add to the catalog for one table now, decided by the source's planner."""

    batches: list[NewBatch] = field(default_factory=list)
    cursor: dict[str, Any] | None = None  # the table's cursor to store with the batches
    planning: bool = False  # a first chunk plan was made (phase planning -> backfilling)
    notes: list[str] = field(default_factory=list)
    # A files source matched nothing and asks for an alert (on_miss = "alert"): its message.
    empty_source: str | None = None
    # A files source whose path has matched no file, ever (a typo, a missing mount): warned
    # about on every plan and apply whatever on_miss says, and alerted once.
    never_matched: bool = False
    # Queued batches that will never load as planned (their file changed or vanished first).
    retire: list[Retirement] = field(default_factory=list)


def _nothing_left_out() -> int:
    return 0


def _nothing_to_explain(exc: BaseException) -> Exception | None:
    return None


@dataclass
class BatchRead:
    """One batch as a lazy Spark DataFrame, ready for the rules and the destination."""

    frame: Any
    # After the frame was consumed (staged): the malformed records the read left out, or raises
    # (files: `FileRead.verify`, then `SourceChanged` when a file changed while it was read;
    # a table read leaves nothing out).
    verify: Callable[[], int] = _nothing_left_out
    label: str = ""  # names the batch in messages: a file, or `table (predicate)`
    empty: bool = False  # files: no file of the batch holds a data record
    # What an empty batch asks for: "ignore" (load it as 0 rows), "alert", or "fail" (a files
    # source's `on_empty`).
    on_empty: str = "ignore"
    # False for an empty batch whose columns were not declared: it tells nothing of its columns.
    evidence: bool = True
    # (name, Spark type) of the columns whose type Spark inferred from the values (files without
    # declared `columns`, except Parquet): a guess, see `engine.evidence`.
    inferred: tuple[tuple[str, str], ...] = ()
    # When the data was taken, if the source knows (files: the newest modification time of
    # the batch's files); None: the batch's planned time stands for it.
    taken_at: datetime | None = None
    # A pass over the frame failed: the error that says why in the source's terms (files: the
    # record an engine's parser stopped at, by file and line), or None.
    explain: Callable[[BaseException], Exception | None] = _nothing_to_explain
    # About how many records the batch holds, when the source can tell cheaply (files: see
    # `sources.files.estimate_records`): the 100% of a progress display.
    expected_rows: int | None = None


@contextlib.contextmanager
def explained_by(read: BatchRead) -> Iterator[None]:
    """A pass over `read.frame` inside the block that fails raises what the source explains of
    it (`BatchRead.explain`), when it explains it."""
    try:
        yield
    except Exception as exc:
        explained = read.explain(exc)
        if explained is None:
            raise
        raise explained from exc


@dataclass(frozen=True)
class Reload:
    """What a source can load again of a target that was lost (`Source.reloadable`)."""

    batches: tuple[Batch, ...] = ()  # committed batches to load again, in commit order
    lost: tuple[str, ...] = ()  # one phrase per part the source cannot give back
    hint: str | None = None  # the explicit choice that goes on without it


class Source(Protocol):
    """One pipeline's source: observed by `plan`, cut into batches and read by `apply`.

    `plan` and `apply` call the same `plan_batches`, so what plan shows as data to load
    is what apply enqueues.
    """

    # Table sources keep a cursor per table (advanced as chunks commit) and may load
    # chunks in parallel; file sources do neither.
    has_cursors: bool

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None) -> SourceObservation:
        """The table's columns, files or row estimate as they are now; reads no data."""
        ...

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        """The batches to add for `table` given what the catalog has; writes nothing."""
        ...

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        """The batch's rows as a lazy DataFrame (Spark runs the read when it is staged)."""
        ...

    def requests_per_read(self) -> int:
        """Source queries one batch read issues: what `rate_budget` counts."""
        ...

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        """The target of `table` was lost: which of its `committed` (live) batches the source
        can read again as they were, and what it cannot give back; `upcoming` is the table's
        work already queued or planned (a new snapshot makes the old batches history)."""
        ...

    def refresh(self) -> None:
        """Forget what was observed, so the next `plan_batches` looks again (a run re-plans a
        table whose batch was superseded while it loaded)."""
        ...


def latest_committed(batches: Iterable[Batch], kind: str, path: str | None = None) -> Batch | None:
    """The table's most recently committed batch of `kind` (of `path`, for file batches)."""
    done = [
        b
        for b in batches
        if b.status is BatchStatus.COMMITTED
        and b.kind == kind
        and (path is None or b.file_path == path)
    ]
    return max(done, key=commit_order, default=None)


def commit_order(batch: Batch) -> tuple[datetime, int]:
    """Sorts batches in the order they committed (claim order among equal times)."""
    return (batch.committed_at or datetime.min.replace(tzinfo=UTC), batch.seq)


# ---------------------------------------------------------------- what a connector is


@dataclass(frozen=True)
class Compared:
    """How `hakiri diff` reads a source table as its target should hold it now."""

    # Read in this order (one, unless `fold_by` is given).
    batches: tuple[Batch, ...]
    # The load's key: the batches' rows are folded by it, the latest batch's row winning
    # (what an upsert of each in turn leaves).
    fold_by: tuple[str, ...] = ()
    # (url, schema, table) when the server can sum the rows itself (a plain table, loaded
    # with no transform, rename or rule), so no row crosses to the engine.
    native: tuple[str, str, str] | None = None


@runtime_checkable
class ShapeChecked(Protocol):
    """A source whose data's own shape may need something of the engine (a files source: a
    JSON file that is one array), told by `plan` from a peek, before apply reads it."""

    def shape_needs(self, table: TableSpec) -> list[tuple[str, str]]:
        """(engine capability, what needs it: a file) for the table's data as it is now."""
        ...


@runtime_checkable
class Comparable(Protocol):
    """A source `hakiri diff` can read as the target should hold it."""

    def compared(self, table: TableSpec, committed: Callable[[], Sequence[Batch]]) -> Compared:
        """The reads that reproduce the target of `table` now (`committed()`: the table's
        live committed batches, read from the catalog when asked); raises HakiriError when
        the source cannot reproduce it."""
        ...


def _no_needs(spec: PipelineSpec) -> list[str]:
    return []


def _never(spec: PipelineSpec) -> bool:
    return False


def _nothing_collected(project_root: Path, older_than_seconds: float) -> list[str]:
    return []


@dataclass(frozen=True)
class SourceKind:
    """One connector: everything hakiri outside `sources` needs to know of it, so nothing
    there names a connector (modelled on `destinations.kinds.DestinationKind`).

    Adding a connector is a package beside `files/` and `postgres/` that implements `Source`
    and one `sources.kinds.register(SourceKind(...))`."""

    name: str  # the manifest's `connector`
    config: type[Any]  # the model `config` is validated with (a `spec.base.SpecModel`)
    # The Source a pipeline reads: (project root, hakiri.toml, the pipeline, environment).
    open: Callable[[Path, ProjectFile, PipelineSpec, Mapping[str, str]], Source]
    # Its tables keep a cursor (chunks, rewinds, parallel loads), of these kinds.
    cursor_kinds: frozenset[CursorKind] = frozenset()
    # Without a cursor, a table's batches are pages walked in order (a page token cannot be
    # followed in parallel): `backfill.parallelism` does not apply.
    pages_in_order: bool = False
    # The vocabulary of its columns' own type names (`SourceColumn.type`): PostgreSQL's, or
    # Spark SQL's and Arrow's.
    types: Literal["postgres", "spark"] = "spark"
    # The engine capabilities a pipeline reading it needs (`spark.engines.CAPABILITIES`).
    engine_needs: Callable[[PipelineSpec], list[str]] = _no_needs
    # The jars Apache Spark loads for it ("jdbc").
    spark_jars: frozenset[str] = frozenset()
    # OpenLineage's (namespace, name) of the datasets one table reads, without credentials
    # (https://openlineage.io/docs/spec/naming).
    lineage: Callable[
        [Path, ProjectFile, PipelineSpec, TableSpec, Mapping[str, str]], list[tuple[str, str]]
    ] = lambda root, settings, spec, table, env: []
    # Does the pipeline follow a change stream (its Source is a `sources.cdc.lag.ChangeStream`)?
    follows_changes: Callable[[PipelineSpec], bool] = _never
    # What `hakiri gc` removes of its own under the project (crashed reads' leftovers).
    collect_garbage: Callable[[Path, float], list[str]] = _nothing_collected
    # `hakiri pipeline create`'s config from its options (path, format, connection).
    starter: Callable[[str, Mapping[str, str | None]], dict[str, Any]] = (
        lambda pipeline_id, options: {}
    )

    @property
    def has_cursors(self) -> bool:
        return bool(self.cursor_kinds)


def whole_batch(pipeline_id: str, table: str, kind: str, predicate: str | None) -> Batch:
    """A batch no plan made: a whole table read at once (`hakiri diff`'s reads)."""
    return Batch(
        f"diff:{table}",
        pipeline_id,
        table,
        kind,
        BatchStatus.PENDING,
        attempt=0,
        seq=0,
        predicate=predicate,
    )


def listed(phrases: Sequence[str]) -> str:
    """The first three phrases, '; '-joined, and how many more there are."""
    shown = "; ".join(phrases[:3])
    return shown + (f" (and {len(phrases) - 3} more)" if len(phrases) > 3 else "")
