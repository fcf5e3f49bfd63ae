"""How rows are written into the target: `[pipeline.load]`, the mode and its options.

Each mode is a strategy (`hakiri.spec.modes`, one module per mode); `LoadSpec.strategy`
is the one the rest of hakiri asks. The rules that need only the manifest (a mode's
required option, the options that belong to other modes, the mode's own checks) are
enforced here, when the manifest is parsed, so a JSON document cannot bypass them. The
rules that need the live target's columns live in `hakiri.spec.rules`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Any, Literal, Self

from pydantic import Field, PlainSerializer, PlainValidator, model_validator
from pydantic_core import PydanticCustomError

from hakiri.spec.base import Name, SpecModel
from hakiri.spec.modes import (
    LoadStrategy,
    ModeOptionError,
    registered_modes,
    strategy_named,
    strategy_of,
)
from hakiri.spec.modes import scd2 as _scd2


class LoadMode(StrEnum):
    APPEND = "append"
    TRUNCATE = "truncate"
    UPSERT = "upsert"
    BLUE_GREEN = "blue_green"
    INCREMENTAL_WATERMARK = "incremental_watermark"
    CDC_MIRROR = "cdc_mirror"
    SCD2 = "scd2"
    REPLACE_WINDOW = "replace_window"


# ROW_HASH, ROW_HASH_COLUMN: scd2's keyless records (defined with the mode).
ROW_HASH = _scd2.ROW_HASH
ROW_HASH_COLUMN = _scd2.ROW_HASH_COLUMN


_BUILT_IN = frozenset(m.value for m in LoadMode)


class ModeName(str):
    """A load mode registered beyond the built-in ones (`spec.modes.register_mode`); it reads
    like a LoadMode (`.value`)."""

    @property
    def value(self) -> str:
        return str(self)


def mode_names() -> list[str]:
    """The modes a manifest may name: the built-in ones in their order, then any registered."""
    return [*(m.value for m in LoadMode), *(n for n in registered_modes() if n not in _BUILT_IN)]


def required_keys() -> dict[str, tuple[str, str]]:
    """mode -> (the option it requires, why); also exported into the JSON Schema as if/then
    clauses so editors flag the missing option while the file is being written."""
    found = {}
    for name in mode_names():
        strategy = strategy_named(name)
        if strategy is not None and strategy.required:
            found[name] = strategy.required
    return found


def mode_keys() -> dict[str, tuple[str, ...]]:
    """option -> the modes it means something to (set under another mode, it is an error)."""
    found: dict[str, tuple[str, ...]] = {}
    for name in mode_names():
        for option in strategy_of(name).options:
            found[option] = (*found.get(option, ()), name)
    return found


def _parse_mode(value: Any) -> LoadMode | ModeName:
    if isinstance(value, LoadMode | ModeName):
        return value
    text = value if isinstance(value, str) else None
    if text is not None and text in LoadMode._value2member_map_:
        return LoadMode(text)
    if text is not None and strategy_named(text) is not None:
        return ModeName(text)
    names = [repr(n) for n in mode_names()]
    raise PydanticCustomError(
        "enum",
        "Input should be {expected}",
        {"expected": f"{', '.join(names[:-1])} or {names[-1]}"},
    )


Mode = Annotated[
    LoadMode | ModeName,
    PlainValidator(_parse_mode, json_schema_input_type=LoadMode),
    PlainSerializer(str, return_type=str),
]


class LoadSpec(SpecModel):
    """`[pipeline.load]`: the load mode and its options."""

    mode: Mode = Field(LoadMode.APPEND, description="How rows land in the target.")
    upsert_key: Annotated[list[Name], Field(min_length=1)] | None = Field(
        None,
        description="Key columns for mode = 'upsert' (also the primary key of an auto-created target).",
    )
    watermark_column: Name | None = Field(
        None,
        description="Column whose high-water mark filters rows for mode = 'incremental_watermark'.",
    )
    key: Annotated[list[Name], Field(min_length=1)] | Literal["row_hash"] | None = Field(
        None,
        description="scd2: the columns that identify a record across its versions, or "
        "'row_hash' for a keyless source (each distinct row is a record, keyed by a hash of "
        "all its columns in `_hakiri_row_hash`).",
    )
    track: Annotated[list[Name], Field(min_length=1)] | None = Field(
        None,
        description="scd2: the columns whose change opens a new version; all non-key columns "
        "when absent.",
    )
    change_time_column: Name | None = Field(
        None,
        description="scd2: the source column that says when a row changed (a timestamp or "
        "date). A version starts then, so a late batch lands at its place in history; without "
        "it a version starts at the batch's time.",
    )
    valid_from_column: Name = Field("valid_from", description="scd2: when a version starts.")
    valid_to_column: Name = Field(
        "valid_to",
        description="scd2: when a version ends (the next version's start, or when its key "
        "left the snapshot); NULL for the current version.",
    )
    is_current_column: Name = Field(
        "is_current", description="scd2: true on the one open version of a key."
    )
    deletes: Literal["close", "ignore", "hard", "soft"] | None = Field(
        None,
        description="Keys absent from a full snapshot. scd2: 'close' their current version "
        "(the default for sources without a cursor) or 'ignore' them. upsert: 'hard' deletes "
        "the target rows, 'soft' sets `deleted_at_column` (cleared if the key returns); absent: "
        "nothing is deleted.",
    )
    deleted_at_column: Name = Field(
        "deleted_at", description="upsert with deletes = 'soft': the column a delete sets."
    )
    delete_scope: str | None = Field(
        None,
        min_length=1,
        description="The target rows this source owns, as a filter on the target's columns "
        "(e.g. \"region = 'EU'\"): only they can be deleted or closed, and the guard's "
        "fraction is of them.",
    )
    max_delete_fraction: float = Field(
        0.2,
        ge=0,
        le=1,
        description="Refuse the whole load (nothing deleted, an alert) when the rows to delete "
        "or close exceed this fraction of the (scoped) target; 1.0 turns the guard off.",
    )
    window_column: Name | None = Field(
        None,
        description="replace_window: the column whose window each batch replaces (e.g. a date).",
    )
    window: Literal["values", "range"] = Field(
        "values",
        description="replace_window: 'values' replaces the rows whose window_column holds a "
        "value the batch has (dbt's insert_overwrite); 'range' replaces the batch's cursor "
        "range (chunked table sources whose cursor is window_column), so a range the source "
        "emptied is emptied too.",
    )
    fail_on_empty_source: bool = Field(
        True,
        description="truncate/blue_green abort before any destructive statement when the source "
        "produced 0 rows; scd2 (deletes = 'close'), upsert with deletes, and replace_window "
        "(window = 'range') refuse an empty snapshot or window the same way.",
    )
    backup_before_load: bool = Field(
        False, description="Snapshot the target into a timestamped table before a destructive load."
    )
    expected_row_count_delta: float | None = Field(
        None,
        gt=0,
        description="Warn (never fail) when a load's row count is more than this many percent away "
        "from the mean of the last `window_runs` successful runs.",
    )
    window_runs: int = Field(
        7, ge=3, le=1000, description="How many past successful runs the anomaly band averages."
    )
    writer: Literal["auto", "copy", "jdbc"] = Field(
        "auto",
        description="PostgreSQL destinations: how Spark stages the rows: COPY from each "
        "partition (copy), Spark's JDBC writer (jdbc), or COPY except for a run that reads "
        "under 64 MiB of files (auto). The context store ignores it.",
    )

    @model_validator(mode="after")
    def _mode_requires_its_key(self) -> Self:
        strategy = self.strategy
        if strategy.required and getattr(self, strategy.required[0]) is None:
            key, why = strategy.required
            # `field` in the context lets the loader point at the exact key.
            raise PydanticCustomError(
                "mode_requires_key",
                "load mode '{mode}' requires `{field}`: {why}",
                {"mode": str(self.mode), "field": key, "why": why},
            )
        for key, modes in mode_keys().items():
            # A key written out at its default changes nothing (a normalized spec has them all).
            if (
                getattr(self, key) != type(self).model_fields[key].default
                and key not in strategy.options
            ):
                names = " and ".join(modes)
                raise load_option(
                    f"`{key}` applies to load mode {names}, and the mode is {str(self.mode)!r}",
                    f'remove `{key}`, or set mode = "{modes[0]}"',
                    at=key,
                )
        allowed = strategy.deletes_choices
        if self.deletes is not None and self.deletes not in allowed:
            raise load_option(
                f"deletes = {self.deletes!r} is not a choice of load mode {self.mode}",
                f"use one of {', '.join(repr(a) for a in allowed)}",
                at="deletes",
            )
        try:
            strategy.check(self)
        except ModeOptionError as exc:
            raise load_option(exc.reason, exc.hint, at=exc.at) from None
        if self.delete_scope is not None:
            _check_scope(self.delete_scope)
        return self

    @property
    def strategy(self) -> LoadStrategy:
        """The mode's strategy: what it needs, how it shapes the rows, how it writes."""
        return strategy_of(self)

    def primary_key(self) -> list[str] | None:
        """The primary key of a target the first load creates (upsert's key; scd2's key and
        valid_from)."""
        return self.strategy.primary_key(self)

    @property
    def key_columns(self) -> list[str]:
        """scd2's key columns as they are in the target (row_hash: the hash column)."""
        if self.key == ROW_HASH:
            return [ROW_HASH_COLUMN]
        return list(self.key or [])

    def added_columns(self) -> list[tuple[str, str]]:
        """(name, Spark type) of the columns this mode adds to every staged row, after the
        source's: scd2's row hash and validity columns, upsert's deleted_at for soft deletes.
        The target is created (and evolved) with them like any source column."""
        return self.strategy.added_columns(self)

    @property
    def detects_deletes(self) -> bool:
        """Does a load compare the snapshot with the target to delete or close absent keys?"""
        return self.strategy.detects_deletes(self)


def _check_scope(text: str) -> None:
    from hakiri.errors import UnsafeExpression
    from hakiri.guards.expressions import check_expression

    try:
        check_expression(text, boolean=True)
    except UnsafeExpression as exc:
        raise load_option(
            f"`delete_scope`: {exc.reason}", exc.hint or "write a filter", at="delete_scope"
        ) from None


def load_option(reason: str, hint: str, *, at: str) -> PydanticCustomError:
    return PydanticCustomError(
        "load_option", "{reason}", {"reason": reason, "hint": hint, "at": at}
    )
