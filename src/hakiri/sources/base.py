"""What a source inspection reports to the planner. Plain frozen data; no I/O here."""

from __future__ import annotations

from dataclasses import dataclass, field


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
class SourceObservation:
    """One source table as seen now, before any data moves."""

    table: str
    columns: tuple[SourceColumn, ...] | None = None  # None = could not be told without reading data
    files: tuple[SourceFile, ...] = ()  # file sources: every file the glob matches
    estimated_rows: int | None = (
        None  # table sources: estimated rows past the cursor (all rows without one)
    )
    notes: tuple[str, ...] = field(default=())  # e.g. "glob matched no file"
