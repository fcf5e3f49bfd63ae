"""incremental_watermark: rows past the target's high-water mark are inserted, and the mark
moves with them; batches commit in order."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hakiri.spec.modes.base import LoadStrategy, ModeFinding, Written, register_mode

if TYPE_CHECKING:
    from hakiri.spec.modes.base import LoadSpec, ModeWriter


class IncrementalWatermark(LoadStrategy):
    name = "incremental_watermark"
    summary = "insert the rows past the target's high-water mark"
    needs = ("insert_past_watermark",)
    required = (
        "watermark_column",
        "incremental_watermark needs the column whose high-water mark filters new rows",
    )
    options = ("watermark_column",)
    ordered = True

    def high_water_mark(self, load: LoadSpec) -> str | None:
        return load.watermark_column

    def column_findings(self, load: LoadSpec, columns: Sequence[str]) -> list[ModeFinding]:
        if load.watermark_column and load.watermark_column not in set(columns):
            return [
                ModeFinding(
                    ("load", "watermark_column"),
                    f"watermark column {load.watermark_column} not in the target",
                    f"target columns: {', '.join(columns)}",
                )
            ]
        return []

    def write(self, load: LoadSpec, writer: ModeWriter) -> Written:
        return writer.insert_past_watermark()


register_mode(IncrementalWatermark())
