"""`plan --count-changes`, written once: what a batch of a keyed load (upsert, scd2) would do
to the target's rows, counted by the engine before any load.

The batch's rows are matched on the mode's key (`LoadStrategy.changes_key`) against the rows
a load matches them with (`matched_rows`: scd2's current versions, upsert's rows not marked
deleted): a row without a match is an insert; with one, an update when a compared column
differs (NULL-safe, on the columns both have less the key and the columns the mode adds
itself; scd2's `track` when it has one), else unchanged. The target's rows that no batch row
matched and that the snapshot's delete detection would remove (`deletes.planned_doomed`) are
its deletes, the number `plan --count-deletes` gives. One FULL OUTER JOIN, one row of counts.
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

from sqlglot import exp

from hakiri.destinations.history.deletes import keeps_history
from hakiri.destinations.history.render import all_of, column, keys_equal, null_safe_equal
from hakiri.spec.load import LoadSpec

__all__ = [
    "DOOMED",
    "ChangeColumns",
    "batch_rows",
    "change_columns",
    "count_changes_query",
    "matched_rows",
    "target_rows",
]

# Marks a row's side of the join (the other side's columns are all NULL where it has no match).
_IN_BATCH, _IN_TARGET = "_hakiri_in_batch", "_hakiri_in_target"
DOOMED = "_hakiri_doomed"  # 1 on a target row the snapshot's delete detection may remove


@dataclass(frozen=True)
class ChangeColumns:
    key: tuple[str, ...]
    compared: tuple[str, ...]


def change_columns(
    load: LoadSpec, batch: Sequence[str], target: Collection[str]
) -> ChangeColumns | None:
    """The key and the compared columns of a batch with columns `batch` against a target with
    `target`; None when the mode counts no changes or a key column is missing on either side
    (the load itself says why)."""
    key = load.strategy.changes_key(load)
    if not key or any(k not in batch or k not in target for k in key):
        return None
    own = {name for name, _ in load.added_columns()}
    shared = [c for c in batch if c in target and c not in key and c not in own]
    if keeps_history(load) and load.track:
        shared = [c for c in load.track if c in shared]
    return ChangeColumns(tuple(key), tuple(shared))


def matched_rows(load: LoadSpec, columns: Collection[str], alias: str = "t") -> exp.Expr | None:
    """The target rows (alias) a batch's rows are matched with: scd2's current versions (None
    when the target has no current flag: no history hakiri wrote), upsert's rows not marked
    deleted ('soft'), else every row."""
    if keeps_history(load):
        if load.is_current_column not in columns:
            return None
        return column(load.is_current_column, alias)
    if load.deletes == "soft" and load.deleted_at_column in columns:
        return column(load.deleted_at_column, alias).is_(exp.null())
    return exp.true()


def target_rows(
    cols: ChangeColumns, target: exp.Table, matched: exp.Expr, doomed: exp.Expr | None
) -> exp.Select:
    """The matched target rows' key and compared columns, and DOOMED (1 or 0): in the
    target's dialect, so the destination can read them into the engine."""
    flag = exp.If(this=doomed, true=exp.Literal.number(1), false=exp.Literal.number(0))
    return (
        exp.select(
            *(column(c, "t").as_(c, quoted=True) for c in (*cols.key, *cols.compared)),
            (flag if doomed is not None else exp.Literal.number(0)).as_(DOOMED, quoted=True),
        )
        .from_(target.as_("t", quoted=True))
        .where(matched)
    )


def batch_rows(
    cols: ChangeColumns, batch: exp.Table, blank_as_null: Collection[str] = ()
) -> exp.Select:
    """The batch's key and compared columns as the load writes them: `blank_as_null` (text
    columns a PostgreSQL load stores '' of as NULL) through NULLIF."""

    def value(name: str) -> exp.Expr:
        if name in blank_as_null:
            return exp.Nullif(this=column(name, "s"), expression=exp.Literal.string(""))
        return column(name, "s")

    return exp.select(
        *(value(c).as_(c, quoted=True) for c in (*cols.key, *cols.compared)),
        exp.Literal.number(1).as_(_IN_BATCH, quoted=True),
    ).from_(batch.as_("s", quoted=True))


def count_changes_query(cols: ChangeColumns, batch: exp.Table, target: exp.Table) -> exp.Select:
    """Over views of `batch_rows` and `target_rows` (Spark SQL): one row of (insert, update,
    unchanged, delete)."""
    not_in_batch = column(_IN_BATCH, "b").is_(exp.null())
    not_in_target = column(_IN_TARGET, "t").is_(exp.null())
    in_batch, in_target = exp.not_(not_in_batch), exp.not_(not_in_target)
    same = all_of(null_safe_equal(column(c, "b"), column(c, "t")) for c in cols.compared)
    doomed = exp.EQ(this=column(DOOMED, "t"), expression=exp.Literal.number(1))

    def rows(where: exp.Expr, name: str) -> exp.Expr:
        hit = exp.If(this=where, true=exp.Literal.number(1), false=exp.Literal.number(0))
        return exp.Coalesce(this=exp.Sum(this=hit), expressions=[exp.Literal.number(0)]).as_(
            name, quoted=True
        )

    marked = exp.select(exp.Star(), exp.Literal.number(1).as_(_IN_TARGET, quoted=True)).from_(
        target.as_("r", quoted=True)
    )
    return (
        exp.select(
            rows(all_of([in_batch, not_in_target]), "insert"),
            rows(all_of([in_batch, in_target, exp.not_(exp.paren(same))]), "update"),
            rows(all_of([in_batch, in_target, exp.paren(same)]), "unchanged"),
            rows(all_of([not_in_batch, doomed]), "delete"),
        )
        .from_(batch.as_("b", quoted=True))
        .join(
            marked.subquery("t", copy=False),
            on=keys_equal(cols.key, "b", "t"),
            join_type="full outer",
        )
    )
