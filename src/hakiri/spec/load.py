"""How rows are written into the target: the six load modes and their options.

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


# mode -> (key it requires, why). Also exported into the JSON Schema as if/then
# clauses so editors flag the missing key while the file is being written.
REQUIRED_KEYS: dict[LoadMode, tuple[str, str]] = {
    LoadMode.UPSERT: ("upsert_key", "upsert needs the key columns to match rows on"),
    LoadMode.INCREMENTAL_WATERMARK: (
        "watermark_column",
        "incremental_watermark needs the column whose high-water mark filters new rows",
    ),
    LoadMode.CDC_MIRROR: ("cdc_source", "cdc_mirror needs the change stream to mirror"),
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
    fail_on_empty_source: bool = Field(
        True,
        description="truncate/blue_green abort before any destructive statement when the source produced 0 rows.",
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
        return self
