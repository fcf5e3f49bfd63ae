"""Drift: what changed in a managed target by hand since hakiri last loaded it.

After every run that loaded a target, hakiri marks in the catalog how the target looked
(columns and types, primary key, row count: `catalog.records.TargetMark`). Whatever differs
now was done by someone else: a column added or dropped, a type changed, the key changed,
rows added or deleted, the table dropped. This module only compares a mark with what a
destination shows now; `engine.drift` observes and marks, and plan, status and serve report.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from hakiri.catalog.records import TargetMark
from hakiri.destinations.base import TargetObservation

__all__ = ["TargetDrift", "find_drift"]


@dataclass(frozen=True)
class TargetDrift:
    """One target's changes by hand since its mark; empty when nothing changed."""

    pipeline_id: str
    table: str  # the table entry's name
    target: str  # as plan shows it
    dropped_table: bool = False
    replaced_table: bool = False  # dropped and created again: another table by that name
    added: tuple[tuple[str, str], ...] = ()  # (column, type)
    removed: tuple[str, ...] = ()
    retyped: tuple[tuple[str, str, str], ...] = ()  # (column, type at the mark, type now)
    primary_key: tuple[tuple[str, ...], tuple[str, ...]] | None = None  # (at the mark, now)
    rows: tuple[int, int] | None = None  # (at the mark, now), when they differ
    marked_run: str | None = None

    @property
    def of_schema(self) -> bool:
        """Columns, types, the key or the table itself changed (what `schema_policy` rules)."""
        return bool(self.lost or self.added or self.removed or self.retyped or self.primary_key)

    @property
    def lost(self) -> bool:
        """The table hakiri loaded is gone: what it held must be loaded again."""
        return self.dropped_table or self.replaced_table

    @property
    def empty(self) -> bool:
        return not self.of_schema and self.rows is None

    def changes(self) -> list[str]:
        """One phrase per change: 'column note added (text)', '120 rows deleted', ..."""
        if self.dropped_table:
            return ["the table was dropped"]
        if self.replaced_table:
            return ["the table was dropped and created again"]
        found = [f"column {name} added ({type_})" for name, type_ in self.added]
        found += [f"column {name} dropped" for name in self.removed]
        found += [
            f"column {name} changed type from {old} to {new}" for name, old, new in self.retyped
        ]
        if self.primary_key is not None:
            old, new = self.primary_key
            found.append(f"primary key changed from {_key(old)} to {_key(new)}")
        if self.rows is not None:
            before, now = self.rows
            moved = now - before
            verb = "added" if moved > 0 else "deleted"
            found.append(f"{abs(moved):,} {'row' if abs(moved) == 1 else 'rows'} {verb}")
        return found

    def describe(self) -> str:
        """One line, e.g. 'public.orders changed by hand since hakiri last loaded it: ...'."""
        return f"{self.target} changed by hand since hakiri last loaded it: " + "; ".join(
            self.changes()
        )

    def as_dict(self) -> dict[str, Any]:
        return {
            "table": self.table,
            "target": self.target,
            "dropped_table": self.dropped_table,
            "replaced_table": self.replaced_table,
            "columns_added": [{"name": n, "type": t} for n, t in self.added],
            "columns_dropped": list(self.removed),
            "columns_retyped": [{"name": n, "was": o, "now": t} for n, o, t in self.retyped],
            "primary_key": (
                {"was": list(self.primary_key[0]), "now": list(self.primary_key[1])}
                if self.primary_key is not None
                else None
            ),
            "rows": {"was": self.rows[0], "now": self.rows[1]} if self.rows is not None else None,
            "since_run": self.marked_run,
            "message": self.describe(),
        }

    @property
    def fingerprint(self) -> str:
        """The same drift, the same text: serve alerts once per fingerprint."""
        document = self.as_dict()
        document.pop("since_run")
        document.pop("message")
        text = json.dumps(document, sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def find_drift(
    mark: TargetMark, now: TargetObservation, rows_now: int | None
) -> TargetDrift | None:
    """The changes between `mark` and the target `now`; None when there are none.

    `rows_now` is the target's exact row count now (None: not counted, then rows are not
    compared). Column names compare exactly; types compare as the destination spells them.
    """
    common = {"pipeline_id": mark.pipeline_id, "table": mark.table_name, "target": mark.target}
    if not now.exists:
        return TargetDrift(**common, dropped_table=True, marked_run=mark.run_id)
    if mark.identity is not None and now.identity is not None and mark.identity != now.identity:
        return TargetDrift(**common, replaced_table=True, marked_run=mark.run_id)
    then = dict(mark.columns)
    seen = {c.name: c.type for c in now.columns}
    drift = TargetDrift(
        **common,
        added=tuple((name, type_) for name, type_ in seen.items() if name not in then),
        removed=tuple(name for name in then if name not in seen),
        retyped=tuple(
            (name, then[name], type_)
            for name, type_ in seen.items()
            if name in then and then[name] != type_
        ),
        primary_key=(
            (mark.primary_key, tuple(now.primary_key))
            if tuple(now.primary_key) != mark.primary_key
            else None
        ),
        rows=(
            (mark.row_count, rows_now)
            if mark.row_count is not None and rows_now is not None and rows_now != mark.row_count
            else None
        ),
        marked_run=mark.run_id,
    )
    return None if drift.empty else drift


def _key(columns: Sequence[str]) -> str:
    return "(" + ", ".join(columns) + ")" if columns else "none"
