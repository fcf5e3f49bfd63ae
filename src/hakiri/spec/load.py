"""How rows are written into the target: the load modes and their options.

The rules that need only the manifest (a mode's required keys) are enforced here,
when the manifest is parsed, so a JSON document cannot bypass them. The rules that
need the live target's columns live in `hakiri.spec.rules`.
"""

from __future__ import annotations

from enum import StrEnum
from typing import Annotated, Literal, Self

from pydantic import Field, model_validator
from pydantic_core import PydanticCustomError

from hakiri.spec.base import Name, SpecModel


class LoadMode(StrEnum):
    APPEND = "append"
    TRUNCATE = "truncate"
    UPSERT = "upsert"
    BLUE_GREEN = "blue_green"
    INCREMENTAL_WATERMARK = "incremental_watermark"
    CDC_MIRROR = "cdc_mirror"
    SCD2 = "scd2"
    REPLACE_WINDOW = "replace_window"


# mode -> (key it requires, why). Also exported into the JSON Schema as if/then
# clauses so editors flag the missing key while the file is being written.
REQUIRED_KEYS: dict[LoadMode, tuple[str, str]] = {
    LoadMode.UPSERT: ("upsert_key", "upsert needs the key columns to match rows on"),
    LoadMode.INCREMENTAL_WATERMARK: (
        "watermark_column",
        "incremental_watermark needs the column whose high-water mark filters new rows",
    ),
    LoadMode.CDC_MIRROR: ("cdc_source", "cdc_mirror needs the change stream to mirror"),
    LoadMode.SCD2: ("key", "scd2 needs the key columns that identify a record across versions"),
    LoadMode.REPLACE_WINDOW: (
        "window_column",
        "replace_window needs the column whose window each batch replaces",
    ),
}

# The key that tells scd2 to key each row by a hash of all its columns (a keyless source).
ROW_HASH = "row_hash"
# The column that holds that hash in the history table.
ROW_HASH_COLUMN = "_hakiri_row_hash"

# Keys that mean something to these modes only: set under another mode, they are an error
# (a key that silently does nothing is how a delete guard gets lost in a mode switch).
MODE_KEYS: dict[str, tuple[LoadMode, ...]] = {
    "upsert_key": (LoadMode.UPSERT,),
    "watermark_column": (LoadMode.INCREMENTAL_WATERMARK,),
    "cdc_source": (LoadMode.CDC_MIRROR,),
    "key": (LoadMode.SCD2,),
    "track": (LoadMode.SCD2,),
    "change_time_column": (LoadMode.SCD2,),
    "valid_from_column": (LoadMode.SCD2,),
    "valid_to_column": (LoadMode.SCD2,),
    "is_current_column": (LoadMode.SCD2,),
    "deletes": (LoadMode.SCD2, LoadMode.UPSERT),
    "deleted_at_column": (LoadMode.UPSERT,),
    "delete_scope": (LoadMode.SCD2, LoadMode.UPSERT),
    "max_delete_fraction": (LoadMode.SCD2, LoadMode.UPSERT),
    "window_column": (LoadMode.REPLACE_WINDOW,),
    "window": (LoadMode.REPLACE_WINDOW,),
}
# What `deletes` may say under each mode.
DELETES_BY_MODE: dict[LoadMode, tuple[str, ...]] = {
    LoadMode.SCD2: ("close", "ignore"),
    LoadMode.UPSERT: ("hard", "soft"),
}


class LoadSpec(SpecModel):
    """`[pipeline.load]`: the load mode and its options."""

    mode: LoadMode = Field(LoadMode.APPEND, description="How rows land in the target.")
    upsert_key: Annotated[list[Name], Field(min_length=1)] | None = Field(
        None,
        description="Key columns for mode = 'upsert' (also the primary key of an auto-created target).",
    )
    watermark_column: Name | None = Field(
        None,
        description="Column whose high-water mark filters rows for mode = 'incremental_watermark'.",
    )
    cdc_source: str | None = Field(
        None, description="Change stream to mirror for mode = 'cdc_mirror'."
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
        required = REQUIRED_KEYS.get(self.mode)
        if required and getattr(self, required[0]) is None:
            key, why = required
            # `field` in the context lets the loader point at the exact key.
            raise PydanticCustomError(
                "mode_requires_key",
                "load mode '{mode}' requires `{field}`: {why}",
                {"mode": self.mode.value, "field": key, "why": why},
            )
        for key, modes in MODE_KEYS.items():
            # A key written out at its default changes nothing (a normalized spec has them all).
            if (
                getattr(self, key) != type(self).model_fields[key].default
                and self.mode not in modes
            ):
                names = " and ".join(m.value for m in modes)
                raise load_option(
                    f"`{key}` applies to load mode {names}, and the mode is {self.mode.value!r}",
                    f'remove `{key}`, or set mode = "{modes[0].value}"',
                    at=key,
                )
        allowed = DELETES_BY_MODE.get(self.mode, ())
        if self.deletes is not None and self.deletes not in allowed:
            raise load_option(
                f"deletes = {self.deletes!r} is not a choice of load mode {self.mode.value}",
                f"use one of {', '.join(repr(a) for a in allowed)}",
                at="deletes",
            )
        if self.mode is LoadMode.SCD2:
            self._check_scd2()
        if self.delete_scope is not None:
            _check_scope(self.delete_scope)
        return self

    def _check_scd2(self) -> None:
        validity = (self.valid_from_column, self.valid_to_column, self.is_current_column)
        if len({v.lower() for v in validity}) < 3:
            raise load_option(
                "valid_from_column, valid_to_column and is_current_column must be three "
                "different columns",
                "give each validity column its own name",
                at="valid_to_column",
            )
        keys = self.key_columns
        for name, columns in (("key", keys), ("track", self.track or [])):
            clash = [c for c in columns if c.lower() in {v.lower() for v in validity}]
            if clash:
                raise load_option(
                    f"`{name}` names {clash[0]!r}, which is a validity column of the history",
                    "rename the source column in a transform, or the validity column "
                    "(valid_from_column, ...)",
                    at=name,
                )
        overlap = [c for c in self.track or [] if c in keys]
        if overlap:
            raise load_option(
                f"`track` names the key column {overlap[0]!r}: a key never changes within a record",
                "track the non-key columns only",
                at="track",
            )
        if self.key == ROW_HASH and self.track is not None:
            raise load_option(
                "key = 'row_hash' tracks every column (a changed row is a new record), so "
                "`track` has nothing to choose",
                "remove `track`, or key the records by their key columns",
                at="track",
            )
        if self.change_time_column is not None and self.change_time_column in keys:
            raise load_option(
                "`change_time_column` is a key column",
                "name the column that says when the row changed, e.g. updated_at",
                at="change_time_column",
            )

    def primary_key(self) -> list[str] | None:
        """The primary key of a target the first load creates: upsert's key, or scd2's key and
        valid_from (one version of a record starts at a time)."""
        if self.mode is LoadMode.SCD2:
            return [*self.key_columns, self.valid_from_column]
        return list(self.upsert_key) if self.upsert_key else None

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
        if self.mode is LoadMode.SCD2:
            hashed = [(ROW_HASH_COLUMN, "string")] if self.key == ROW_HASH else []
            return [
                *hashed,
                (self.valid_from_column, "timestamp"),
                (self.valid_to_column, "timestamp"),
                (self.is_current_column, "boolean"),
            ]
        if self.mode is LoadMode.UPSERT and self.deletes == "soft":
            return [(self.deleted_at_column, "timestamp")]
        return []

    @property
    def detects_deletes(self) -> bool:
        """Does a load compare the snapshot with the target to delete or close absent keys?"""
        if self.mode is LoadMode.SCD2:
            return self.deletes != "ignore"
        return self.mode is LoadMode.UPSERT and self.deletes is not None


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
