"""What a target inspection reports to the planner. Plain frozen data; no I/O here."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TargetColumn:
    name: str
    type: str  # the destination's type as it would be written in DDL: 'bigint', 'character varying(20)', 'text'
    nullable: bool = True


@dataclass(frozen=True)
class TargetObservation:
    """One target table as it is now."""

    table: str  # unqualified name
    schema: str | None  # PostgreSQL schema; None for the context store
    exists: bool
    columns: tuple[TargetColumn, ...] = ()
    primary_key: tuple[str, ...] = ()
    dependent_views: tuple[
        str, ...
    ] = ()  # qualified names of views (and materialized views) that read the table
    row_estimate: int | None = None  # from statistics; never a full count

    @property
    def column_names(self) -> list[str]:
        return [c.name for c in self.columns]
