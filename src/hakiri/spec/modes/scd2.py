"""scd2: every staged row is a version of a record; the destination places the versions in
its history (`destinations/history`): a changed record opens a new version and ends the one
before, a late row lands at its place by change time, a key a full snapshot lacks is closed
(deletes = 'close'), and a batch loaded twice changes nothing.

Staged rows get the record's key (a hash of the row for `key = "row_hash"`), `valid_from`
(the row's change time, else the batch's time), `valid_to` NULL and `is_current` true.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from hakiri.errors import TransformError
from hakiri.guards.spark_types import quoted_name
from hakiri.spec.modes.base import LoadStrategy, ModeOptionError, Written, register_mode
from hakiri.spec.modes.upsert import DELETE_OPTIONS

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame

    from hakiri.spec.modes.base import LoadSpec, ModeWriter

# The key that tells scd2 to key each row by a hash of all its columns (a keyless source).
ROW_HASH = "row_hash"
# The column that holds that hash in the history table.
ROW_HASH_COLUMN = "_hakiri_row_hash"


class Scd2(LoadStrategy):
    name = "scd2"
    summary = "keep every version of each record, with its validity"
    needs = ("history",)
    required = ("key", "scd2 needs the key columns that identify a record across versions")
    options = (
        "key",
        "track",
        "change_time_column",
        "valid_from_column",
        "valid_to_column",
        "is_current_column",
        *DELETE_OPTIONS,
    )
    deletes_choices = ("close", "ignore")
    rewindable = True
    destructive = True

    def check(self, load: LoadSpec) -> None:
        validity = (load.valid_from_column, load.valid_to_column, load.is_current_column)
        folded = {v.lower() for v in validity}
        if len(folded) < 3:
            raise ModeOptionError(
                "valid_from_column, valid_to_column and is_current_column must be three "
                "different columns",
                "give each validity column its own name",
                at="valid_to_column",
            )
        keys = load.key_columns
        for name, columns in (("key", keys), ("track", load.track or [])):
            clash = [c for c in columns if c.lower() in folded]
            if clash:
                raise ModeOptionError(
                    f"`{name}` names {clash[0]!r}, which is a validity column of the history",
                    "rename the source column in a transform, or the validity column "
                    "(valid_from_column, ...)",
                    at=name,
                )
        overlap = [c for c in load.track or [] if c in keys]
        if overlap:
            raise ModeOptionError(
                f"`track` names the key column {overlap[0]!r}: a key never changes within a record",
                "track the non-key columns only",
                at="track",
            )
        if load.key == ROW_HASH and load.track is not None:
            raise ModeOptionError(
                "key = 'row_hash' tracks every column (a changed row is a new record), so "
                "`track` has nothing to choose",
                "remove `track`, or key the records by their key columns",
                at="track",
            )
        if load.change_time_column is not None and load.change_time_column in keys:
            raise ModeOptionError(
                "`change_time_column` is a key column",
                "name the column that says when the row changed, e.g. updated_at",
                at="change_time_column",
            )

    def primary_key(self, load: LoadSpec) -> list[str] | None:
        # One version of a record starts at a time.
        return [*load.key_columns, load.valid_from_column]

    def detects_deletes(self, load: LoadSpec) -> bool:
        return load.deletes != "ignore"

    def changes_key(self, load: LoadSpec) -> list[str] | None:
        # Matched with the current versions: a changed one closes and a new version opens.
        return load.key_columns

    def delete_verb(self, load: LoadSpec) -> str:
        return "close"

    def compares_with_target(self, load: LoadSpec) -> bool:
        return True

    def deletes_with_cursor_hint(self) -> str:
        return 'set deletes = "ignore": an incremental batch is not a full snapshot'

    def describe(self, load: LoadSpec) -> str:
        return f"{self.name} on ({', '.join(load.key_columns)})"

    def added_columns(self, load: LoadSpec) -> list[tuple[str, str]]:
        hashed = [(ROW_HASH_COLUMN, "string")] if load.key == ROW_HASH else []
        return [
            *hashed,
            (load.valid_from_column, "timestamp"),
            (load.valid_to_column, "timestamp"),
            (load.is_current_column, "boolean"),
        ]

    def added_values(
        self, frame: DataFrame, load: LoadSpec, batch_time: datetime
    ) -> dict[str, Column]:
        from pyspark.sql import functions as F

        values: dict[str, Column] = {}
        if load.key == ROW_HASH:
            # Values only (not names), as text: a declared rename keeps every record's hash.
            cells = [F.col(quoted_name(c)).cast("string") for c in frame.columns]
            values[ROW_HASH_COLUMN] = F.sha2(F.to_json(F.array(*cells)), 256)
        # As text: hakiri's sessions read timestamps in UTC (a datetime would go through the
        # Python process's local zone).
        utc = batch_time.astimezone(UTC).replace(tzinfo=None).isoformat(sep=" ")
        taken: Any = F.lit(utc).cast("timestamp")
        if load.change_time_column is not None:
            column = _column(frame, load.change_time_column)
            # A row without a change time starts at the batch's time.
            taken = F.coalesce(F.col(quoted_name(column)).cast("timestamp"), taken)
        values[load.valid_from_column] = taken
        values[load.valid_to_column] = F.lit(None)
        values[load.is_current_column] = F.lit(True)
        return values

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.history()


def _column(frame: DataFrame, name: str) -> str:
    found = next((c for c in frame.columns if c.lower() == name.lower()), None)
    if found is None:
        raise TransformError(
            f"change_time_column {name!r} is not a column of the rows "
            f"(they have: {', '.join(frame.columns)})",
            "name the column that says when a row changed, or select it in the transforms",
        )
    return found


register_mode(Scd2())
