"""Delete detection, written once: which target rows a full snapshot no longer has.

upsert with `deletes`: the target rows in `delete_scope` (and not already soft-deleted)
whose key the snapshot lacks are deleted ('hard') or get `deleted_at` = the batch's time
('soft'), after the delete guard weighed them (`delete_guard.check_deletes`) against the
live rows in scope. `plan --count-deletes` counts the same two numbers before any load,
for upsert and for scd2's closes (`planned_live`, `planned_doomed`).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from datetime import datetime

from sqlglot import exp

from hakiri.destinations.base import LoadRequest
from hakiri.destinations.history.render import (
    Dialect,
    all_of,
    column,
    delete_scope,
    keys_equal,
    timestamp,
)
from hakiri.errors import LoadError
from hakiri.spec.load import LoadSpec

__all__ = [
    "absent_rows",
    "batch_time_of",
    "check_deleted_at",
    "deletes_verb",
    "keeps_history",
    "live_rows",
    "planned_doomed",
    "planned_live",
    "snapshot_key",
]


def keeps_history(load: LoadSpec) -> bool:
    """Does the mode write through the `history` primitive (scd2's versions)?"""
    return "history" in load.strategy.needs


def snapshot_key(load: LoadSpec) -> list[str]:
    """The key a snapshot's rows are matched on: the history's record key, else the mode's
    merge key."""
    if keeps_history(load):
        return load.key_columns
    return list(load.strategy.merge_key(load) or ())


def batch_time_of(request: LoadRequest) -> datetime:
    """The time a delete closes a version or marks a row deleted: the batch's."""
    if request.batch_time is None:
        raise LoadError(
            f"batch {request.batch_id} has no batch time", "apply again to re-read the batch"
        )
    return request.batch_time


def deletes_verb(load: LoadSpec) -> str:
    return load.strategy.delete_verb(load)


def check_deleted_at(load: LoadSpec, target_columns: Collection[str], target: str) -> None:
    """deletes = 'soft' needs the column it marks."""
    if load.deletes == "soft" and load.deleted_at_column not in target_columns:
        raise LoadError(
            f"{target} has no column {load.deleted_at_column!r} to mark deletes in",
            "apply again: hakiri adds it with the staged rows (or add it yourself)",
        )


def live_rows(load: LoadSpec, alias: str = "t") -> exp.Expr:
    """The target rows (alias) a snapshot may delete: in scope, not already soft-deleted."""
    conditions = [delete_scope(load, alias)]
    if load.deletes == "soft":
        conditions.append(column(load.deleted_at_column, alias).is_(exp.null()))
    return all_of(conditions)


def absent_rows(
    live: exp.Expr, key: Sequence[str], snapshot: exp.Table, alias: str = "t"
) -> exp.Expr:
    """Those of the `live` rows (alias) whose key the snapshot lacks."""
    present = (
        exp.select(exp.Literal.number(1))
        .from_(snapshot.as_("s", quoted=True))
        .where(keys_equal(key, "s", alias))
    )
    return all_of([live, exp.not_(exp.Exists(this=present))])


def planned_live(load: LoadSpec, columns: Collection[str], alias: str = "t") -> exp.Expr | None:
    """For `plan`: the live rows in scope of a target with `columns` (scd2: its current
    versions; upsert 'soft': not marked yet); None when an scd2 target has no current flag
    (it is no history hakiri wrote: nothing to count)."""
    conditions = [delete_scope(load, alias)]
    if keeps_history(load):
        if load.is_current_column not in columns:
            return None
        conditions.append(column(load.is_current_column, alias))
    elif load.deletes == "soft" and load.deleted_at_column in columns:
        conditions.append(column(load.deleted_at_column, alias).is_(exp.null()))
    return all_of(conditions)


def planned_doomed(
    load: LoadSpec, live: exp.Expr, batch_time: datetime | None, dialect: Dialect, alias: str = "t"
) -> exp.Expr:
    """Those live rows a snapshot may remove: scd2 closes only versions that started by the
    batch's time."""
    if not keeps_history(load) or batch_time is None:
        return live
    started = exp.LTE(
        this=column(load.valid_from_column, alias), expression=timestamp(batch_time, dialect)
    )
    return all_of([live, started])
