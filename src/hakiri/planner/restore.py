"""Targets lost since hakiri loaded them: what plan says and apply does about them. Pure.

The destination's load ledger and the catalog's committed batches describe what a target
holds. When the table itself is gone (dropped by hand, or dropped and created again: its
identity, PostgreSQL's OID or the Delta table's id, is not the one marked after the last
load), they describe rows that are nowhere. Apply then forgets the target's ledger entries,
queues again the batches that made the table and loads them, so the table comes back as
the source still has it (`engine.restore`); plan says so first.

What the source cannot give back (a file deleted or edited since it loaded, the changes a
CDC mirror read once from its slot) is named by the source (`Source.reloadable`); apply
then stops before anything moves, unless told to go on with what remains.
"""

from __future__ import annotations

from dataclasses import dataclass

from hakiri.catalog.records import Batch
from hakiri.errors import TargetLost
from hakiri.planner.drift import TargetDrift
from hakiri.sources.base import listed

__all__ = ["LostTarget", "listed"]


@dataclass(frozen=True)
class LostTarget:
    drift: TargetDrift  # dropped_table or replaced_table
    reload: tuple[Batch, ...]  # committed batches apply loads again, in claim order
    lost: tuple[str, ...] = ()  # what the source cannot give back, one phrase each
    hint: str | None = None  # the explicit choice that goes on without it

    @property
    def table(self) -> str:
        return self.drift.table

    @property
    def _how(self) -> str:
        return "is missing" if self.drift.dropped_table else "was dropped and created again"

    def describe(self) -> str:
        """'public.customers is missing since hakiri loaded it: apply creates it and reloads
        3 batch(es)', and what cannot come back."""
        creates = "creates it and " if self.drift.dropped_table else ""
        count = len(self.reload)
        text = (
            f"{self.drift.target} {self._how} since hakiri loaded it: apply {creates}reloads "
            f"{count} batch{'' if count == 1 else 'es'}"
        )
        if self.lost:
            text += f"; the source cannot give back: {listed(self.lost)}"
        return text

    def refusal(self) -> TargetLost:
        """Why apply stops (before anything moves) when part of the target cannot come back."""
        return TargetLost(
            f"{self.drift.target} {self._how} since hakiri loaded it, and the source cannot give "
            f"all of it back: {listed(self.lost)}",
            self.hint or "restore the table from a backup",
        )
