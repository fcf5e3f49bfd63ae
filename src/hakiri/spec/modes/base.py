"""What a load mode is: a strategy that says what it needs, how it shapes the staged rows,
what it asks of the destination, and how `plan` describes it.

A mode is one class in its own module of this package, registered by name. The manifest's
validation, the planner, the engine and the destinations ask the mode's strategy
(`strategy_of(load)`) instead of testing `mode == ...`; a destination offers the modes a
small set of write primitives (`ModeWriter`), each run inside the batch's one commit.
Adding a mode is its module here, the primitives it needs, and its tests.

No I/O and no Spark at import time: `plan` and the manifest loader import this package.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

__all__ = [
    "WRITE_PRIMITIVES",
    "LoadStrategy",
    "ModeFinding",
    "ModeOptionError",
    "ModeWriter",
    "Written",
    "register_mode",
    "registered_modes",
    "strategy_named",
    "strategy_of",
    "unregister_mode",
]


class LoadSpec(Protocol):
    """What the strategies read of `[pipeline.load]` (`spec.load.LoadSpec`, which imports this
    package: a Protocol here keeps the two acyclic)."""

    @property
    def mode(self) -> str: ...

    upsert_key: list[str] | None
    watermark_column: str | None
    key: list[str] | str | None
    track: list[str] | None
    change_time_column: str | None
    valid_from_column: str
    valid_to_column: str
    is_current_column: str
    deletes: str | None
    deleted_at_column: str
    window_column: str | None
    window: str

    @property
    def key_columns(self) -> list[str]: ...


class PipelineSpec(Protocol):
    """What the strategies read of a pipeline (`spec.pipeline.PipelineSpec`)."""

    @property
    def load(self) -> LoadSpec: ...

    @property
    def source(self) -> Any: ...

    @property
    def tables(self) -> Sequence[Any]: ...

    def cursor_columns(self) -> list[str]: ...


@dataclass(frozen=True)
class Written:
    """What one load wrote: rows inserted or updated, rows deleted or closed, and the
    high-water mark after it (incremental_watermark)."""

    rows: int
    deleted: int = 0
    watermark: str | None = None


class ModeWriter(Protocol):
    """The write primitives a destination offers the load modes. Each runs inside the batch's
    one commit (a PostgreSQL transaction, one Delta commit) from the staged rows."""

    def insert(self) -> Written:
        """Add the staged rows to the target."""
        ...

    def replace(self) -> Written:
        """Replace every row of the target with the staged rows (readers may wait)."""
        ...

    def swap(self) -> Written:
        """Replace the target with the staged rows atomically, readers never blocked for the
        load (blue_green), the SQL post hook inside the swap."""
        ...

    def merge(self, key: Sequence[str], *, update: bool) -> Written:
        """Rows whose key is in the target replace it (`update`) or are skipped (not
        `update`); the others are inserted. With `load.deletes`, the target rows in scope
        whose key the snapshot lacks are deleted or marked (after the delete guard)."""
        ...

    def history(self) -> Written:
        """Place the staged versions in the history (scd2); closes absent keys per `deletes`."""
        ...

    def replace_window(self) -> Written:
        """Delete the batch's window of the target, insert the staged rows."""
        ...

    def insert_past_watermark(self) -> Written:
        """Insert the staged rows past the target's high-water mark; the mark after it."""
        ...

    def mirror(self, key: Sequence[str]) -> Written:
        """Apply the staged net changes by `key` (cdc_mirror): a row whose op is 'd' deletes
        its key, the others replace or insert it; a column the row lists as unchanged keeps
        the target's value."""
        ...


# The primitives' names: what a strategy's `needs` may list, and a destination offers.
WRITE_PRIMITIVES = frozenset(
    name for name, value in vars(ModeWriter).items() if callable(value) and name[0] != "_"
)


class ModeOptionError(ValueError):
    """A mode's option that does not fit the manifest; `spec.load` turns it into a
    validation error pointing at `at`."""

    def __init__(self, reason: str, hint: str, *, at: str) -> None:
        super().__init__(reason)
        self.reason = reason
        self.hint = hint
        self.at = at


@dataclass(frozen=True)
class ModeFinding:
    """A warning about the load options (path under `load`, message, hint)."""

    path: tuple[str, ...]
    message: str
    hint: str | None = None


class LoadStrategy:
    """One load mode. The defaults describe a mode that adds rows and removes none."""

    name: ClassVar[str]
    summary: ClassVar[str]  # one line for `plan` and the docs
    # The `ModeWriter` primitives `write` calls: a destination that lacks one cannot load the
    # mode (`destinations.capabilities`).
    needs: ClassVar[tuple[str, ...]] = ()
    # The option the mode cannot work without, and why (also a JSON Schema if/then clause).
    required: ClassVar[tuple[str, str] | None] = None
    # Options of `[pipeline.load]` that mean something to this mode (set under a mode that does
    # not list them, they are refused: an option that silently does nothing is how a delete
    # guard gets lost in a mode switch).
    options: ClassVar[tuple[str, ...]] = ()
    deletes_choices: ClassVar[tuple[str, ...]] = ()  # what `deletes` may say
    # Every batch is the whole source and replaces the target: a files source loads all its
    # files as one batch, a table is read whole, and nothing is split or parallel.
    snapshot: ClassVar[bool] = False
    # The verb of the empty-source refusal ("refusing to truncate ..."), for modes that would
    # empty the target on an empty source.
    empties_target_as: ClassVar[str | None] = None
    # Batches must commit in order (a high-water mark): one chunk at a time.
    ordered: ClassVar[bool] = False
    # Loading a range of the source again leaves the target as it was (rewind).
    rewindable: ClassVar[bool] = False
    # A row loaded twice lands twice (append): whatever re-reads rows is refused or warned of.
    duplicates_reloaded_rows: ClassVar[bool] = False
    # Changes or removes rows already in the target (backup_before_load snapshots first).
    destructive: ClassVar[bool] = False
    # The SQL post hooks run inside the commit (blue_green: inside the swap).
    post_hook_in_commit: ClassVar[bool] = False
    # PostgreSQL: an empty string bound for a text column is staged as NULL (what an empty
    # CSV field means, docs/types.md); a mirror keeps the source's values as they are.
    empty_strings_as_null: ClassVar[bool] = True
    # Columns of the staged rows that tell the write what to do and never reach the target
    # (cdc_mirror's op): the schema guard leaves them out of the target's columns.
    control_columns: ClassVar[tuple[str, ...]] = ()

    # ------------------------------------------------------------ the manifest

    def check(self, load: LoadSpec) -> None:
        """Rules on this mode's options that need the manifest only; raise ModeOptionError."""

    def check_pipeline(self, spec: PipelineSpec) -> None:
        """Rules on how the mode fits the pipeline's source; raise ModeOptionError (its `at`
        under the pipeline, e.g. 'load.window')."""

    def findings(self, spec: PipelineSpec) -> list[ModeFinding]:
        """Warnings about a valid pipeline that is probably not what its author wants."""
        return []

    def column_findings(self, load: LoadSpec, columns: Sequence[str]) -> list[ModeFinding]:
        """Warnings that need the target's column names."""
        return []

    # ------------------------------------------------------------ what the mode needs

    def merge_key(self, load: LoadSpec) -> list[str] | None:
        """The key on which a row loaded again replaces (or skips) itself; None when rows
        are added as they come."""
        return None

    def primary_key(self, load: LoadSpec) -> list[str] | None:
        """The primary key of a target the first load creates."""
        return self.merge_key(load)

    def detects_deletes(self, load: LoadSpec) -> bool:
        """Does a load compare the snapshot with the target to delete or close absent keys?"""
        return False

    def changes_key(self, load: LoadSpec) -> list[str] | None:
        """The key `plan --count-changes` matches a batch's rows with the target's on, to
        count inserts, updates and unchanged rows; None: the mode's effect is not counted."""
        return None

    def delete_verb(self, load: LoadSpec) -> str:
        """What the delete guard says the load does to a target row the snapshot lacks."""
        return "delete"

    def compares_with_target(self, load: LoadSpec) -> bool:
        """Does the write read the target to decide what to change (a conditional MERGE)?"""
        return self.detects_deletes(load)

    def deletes_with_cursor_hint(self) -> str:
        """The hint when delete detection meets a source read past a cursor."""
        return "remove `deletes`, or read the table whole (no `incremental`) to compare it"

    def high_water_mark(self, load: LoadSpec) -> str | None:
        """The column whose high-water mark the target keeps (incremental_watermark)."""
        return None

    def replaces_cursor_range(self, load: LoadSpec) -> bool:
        """Does each batch replace its cursor range of the target (replace_window 'range')?"""
        return False

    # ------------------------------------------------------------ the staged rows

    def added_columns(self, load: LoadSpec) -> list[tuple[str, str]]:
        """(name, Spark type) of the columns the mode adds to every staged row, after the
        source's; the target is created and evolved with them like any source column."""
        return []

    def added_values(
        self, frame: DataFrame, load: LoadSpec, batch_time: datetime
    ) -> dict[str, Column]:
        """The values of `added_columns` as Spark columns over `frame` (lazy)."""
        from pyspark.sql import functions as F

        return {name: F.lit(None) for name, _ in self.added_columns(load)}

    # ------------------------------------------------------------ the write

    def refuse(self, load: LoadSpec) -> None:
        """A mode that cannot load in this runtime refuses here, before anything is staged."""

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        """The batch's write, in the destination's primitives."""
        raise NotImplementedError(f"load mode {self.name} has no write")

    def describe(self, load: LoadSpec) -> str:
        """How `plan` names the load: the mode and what it keys on."""
        key = self.merge_key(load)
        return f"{self.name} on ({', '.join(key)})" if key else self.name


_REGISTRY: dict[str, LoadStrategy] = {}


def register_mode(strategy: LoadStrategy) -> LoadStrategy:
    """Make `strategy` a load mode the manifest can name; refused for a name taken."""
    if strategy.name in _REGISTRY:
        raise ValueError(f"load mode {strategy.name!r} is registered already")
    unknown = sorted(set(strategy.needs) - WRITE_PRIMITIVES)
    if unknown:  # no destination would ever offer it: the mode could never load
        raise ValueError(
            f"load mode {strategy.name!r} needs {unknown}, which are not write primitives "
            f"({', '.join(sorted(WRITE_PRIMITIVES))})"
        )
    _REGISTRY[strategy.name] = strategy
    return strategy


def unregister_mode(name: str) -> None:
    """Remove a mode registered by `register_mode` (a test's own mode, when it is done)."""
    _REGISTRY.pop(name, None)


def registered_modes() -> dict[str, LoadStrategy]:
    return dict(_REGISTRY)


def strategy_named(name: str) -> LoadStrategy | None:
    return _REGISTRY.get(str(name))


def strategy_of(load: LoadSpec | str | Any) -> LoadStrategy:
    """The strategy of a load spec's mode, or of a mode's name (validated when the spec was
    built)."""
    mode = str(load if isinstance(load, str) else load.mode)
    found = _REGISTRY.get(mode)
    if found is None:  # a spec built without validation, naming a mode nobody registered
        raise ValueError(f"load mode {mode!r} is not registered")
    return found
