"""scd2, written once: the queries that place a batch's versions in a history, as sqlglot
expressions each destination renders and runs (`render.render`).

Every staged row is a version: the key, the columns, `valid_from` (its change time, else
the batch's time; see `spec/modes/scd2.py`). In order:

1. closing (deletes = 'close'): the current versions in `delete_scope` whose key the
   snapshot lacks and that started at or before the batch's time end at the batch's time;
   the delete guard counts them first (`closing`);
2. affected keys: those with a staged version that is not simply their current one again
   (same tracked values, starting no earlier). For the 95% of a snapshot that did not
   change, nothing else happens (`staged_versions`, `affected_keys`);
3. for the affected keys only, the history is computed again from its events: every
   version already there, every gap (a version closed with no successor at its end), and
   the staged versions; one event per key and time (the staged one wins), and an event
   that changes nothing (the same values again, a gap after a gap) is dropped. A version
   ends where the next event starts; the last one is current (`history`);
4. the target rows of the affected keys that differ from the result are stale (deleted)
   and the result's rows the target lacks are new (inserted): an unchanged history row
   is never rewritten (`stale_versions`, `new_versions`).

So a late row lands at its place by change time, a key that comes back opens a new
version, and a batch loaded twice changes nothing. The queries name their inputs as
tables: the destination decides what each is (a TEMP table, a temporary view).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from sqlglot import exp

from hakiri.destinations.history.render import (
    Dialect,
    all_of,
    cast,
    column,
    delete_scope,
    keys_equal,
    null_safe_equal,
    row_hash,
    timestamp,
)
from hakiri.errors import LoadError
from hakiri.spec.load import LoadSpec

__all__ = [
    "HASH",
    "HistoryColumns",
    "affected_keys",
    "check_duplicate_versions",
    "closing",
    "duplicate_versions",
    "history",
    "history_columns",
    "new_versions",
    "staged_versions",
    "stale_versions",
]

HASH = "_h"  # the hash of a version's tracked values, in staged_versions and history


@dataclass(frozen=True)
class HistoryColumns:
    """What an scd2 load reads and writes: the key, the history's own columns (target
    order), the tracked ones, the three validity columns, and (PostgreSQL) the target's
    types the staged values are cast to so they hash as the target's do."""

    key: tuple[str, ...]
    columns: tuple[str, ...]
    tracked: tuple[str, ...]
    valid_from: str
    valid_to: str
    is_current: str
    types: Mapping[str, str] | None = None

    @property
    def everything(self) -> tuple[str, ...]:
        return (*self.columns, self.valid_from, self.valid_to, self.is_current)


def history_columns(
    load: LoadSpec,
    staged: Sequence[str],
    target_columns: Sequence[str] | None,
    target: str,
    types: Mapping[str, str] | None = None,
) -> HistoryColumns:
    """The columns of an scd2 load into `target` (named so in messages); `target_columns`
    None when the history does not exist yet."""
    vf, vt, cur = load.valid_from_column, load.valid_to_column, load.is_current_column
    validity = (vf, vt, cur)
    if target_columns is not None:
        missing = [v for v in validity if v not in target_columns]
        if missing:
            raise LoadError(
                f"the history {target} has no column {missing[0]!r}",
                "load scd2 into a new table (hakiri creates it), or add the validity columns",
            )
    order = staged if target_columns is None else target_columns
    columns = tuple(c for c in order if c in staged and c not in validity)
    key = tuple(load.key_columns)
    tracked = tuple(load.track) if load.track else tuple(c for c in columns if c not in key)
    unknown = [t for t in tracked if t not in columns]
    if unknown:
        raise LoadError(
            f"track names {unknown[0]!r}, which is not a column of {target}",
            "fix `track`, or leave it out to track every non-key column",
        )
    return HistoryColumns(key, columns, tracked, vf, vt, cur, types)


# ---------------------------------------------------------------- checks


def duplicate_versions(cols: HistoryColumns, staged: exp.Table) -> exp.Select:
    """One key (as text) with the number of its staged versions that start at the same time,
    when there is such a key."""
    group = [column(k) for k in (*cols.key, cols.valid_from)]
    return (
        exp.select(
            *(exp.cast(column(k), "text").as_(k, quoted=True) for k in cols.key),
            exp.Count(this=exp.Star()).as_("n", quoted=True),
        )
        .from_(staged)
        .group_by(*group)
        .having(exp.GT(this=exp.Count(this=exp.Star()), expression=exp.Literal.number(1)))
        .limit(1)
    )


def check_duplicate_versions(
    cols: HistoryColumns, found: Sequence[object] | None, target: str
) -> None:
    """Refuse the batch when `duplicate_versions` found a key (its row, else None)."""
    if not found:
        return
    values = ", ".join(f"{k}={v}" for k, v in zip(cols.key, found[:-1], strict=True))
    raise LoadError(
        f"the staged rows for {target} hold {found[-1]} versions of {values} that start at "
        "the same time",
        "deduplicate the rows in a transform, or declare `change_time_column` so each "
        "version has its own start",
    )


# ---------------------------------------------------------------- 1. closing


def closing(
    cols: HistoryColumns, load: LoadSpec, staged: exp.Table, batch_time: datetime, dialect: Dialect
) -> tuple[exp.Expr, exp.Expr]:
    """Over the history's rows (alias t): (the live versions the delete guard weighs, those
    of them the batch closes: started by the batch's time, key absent from the snapshot)."""
    live = all_of([column(cols.is_current, "t"), delete_scope(load, "t")])
    present = exp.select(exp.Literal.number(1)).from_(staged.as_("s", quoted=True))
    absent = all_of(
        [
            live,
            exp.LTE(this=column(cols.valid_from, "t"), expression=timestamp(batch_time, dialect)),
            exp.not_(exp.Exists(this=present.where(keys_equal(cols.key, "s", "t")))),
        ]
    )
    return live, absent


# ---------------------------------------------------------------- 2. affected keys


def staged_versions(cols: HistoryColumns, staged: exp.Table, dialect: Dialect) -> exp.Select:
    """The staged versions (in the target's types, when given) with the hash of their
    tracked values."""
    types = cols.types
    values = [
        (cast(column(n, "s"), types[n]) if types else column(n, "s")).as_(n, quoted=True)
        for n in (*cols.columns, cols.valid_from)
    ]
    return exp.select(
        *values, row_hash(cols.tracked, "s", dialect, types).as_(HASH, quoted=True)
    ).from_(staged.as_("s", quoted=True))


def affected_keys(
    cols: HistoryColumns, versions: exp.Table, target: exp.Table, dialect: Dialect
) -> exp.Select:
    """The keys whose history the batch changes: a staged version that is not the current
    one again (the same tracked values, starting no earlier)."""
    current_again = (
        exp.select(exp.Literal.number(1))
        .from_(target.as_("t", quoted=True))
        .where(
            all_of(
                [
                    column(cols.is_current, "t"),
                    keys_equal(cols.key, "t", "n"),
                    exp.LTE(
                        this=column(cols.valid_from, "t"), expression=column(cols.valid_from, "n")
                    ),
                    exp.EQ(this=row_hash(cols.tracked, "t", dialect), expression=column(HASH, "n")),
                ]
            )
        )
    )
    return (
        exp.select(*(column(k, "n") for k in cols.key))
        .distinct()
        .from_(versions.as_("n", quoted=True))
        .where(exp.not_(exp.Exists(this=current_again)))
    )


# ---------------------------------------------------------------- 3. the history again


def _over(
    function: exp.Expr,
    partition: Sequence[str],
    order: str,
    descending: bool = False,
    alias: str | None = None,
) -> exp.Window:
    """`function` OVER (PARTITION BY partition ORDER BY order), columns of table `alias`."""
    return exp.Window(
        this=function,
        partition_by=[column(p, alias) for p in partition],
        order=exp.Order(expressions=[exp.Ordered(this=column(order, alias), desc=descending)]),
    )


def _text(value: str) -> exp.Literal:
    return exp.Literal.string(value)


def _named(value: exp.Expr, name: str) -> exp.Alias:
    return value.as_(name, quoted=True)


def _cte(name: str) -> exp.Identifier:
    return exp.to_identifier(name, quoted=True)


def _event(
    cells: Sequence[exp.Expr], at: exp.Expr, hashed: exp.Expr, kind: str, src: int
) -> list[exp.Expr]:
    """An event's columns: the history's, when (`_at`), the hash, the kind (v: a version,
    d: a gap) and where it comes from (`_src` 1: staged, wins over 0: the history)."""
    return [
        *cells,
        _named(at, "_at"),
        _named(hashed, HASH),
        _named(_text(kind), "_kind"),
        _named(exp.Literal.number(src), "_src"),
    ]


def _events(
    cols: HistoryColumns,
    versions: exp.Table,
    dialect: Dialect,
    target: exp.Table | None,
    keys: exp.Table | None,
) -> list[tuple[str, exp.Query]]:
    """The CTEs up to `events`: the staged versions and, with a target, its versions and its
    gaps (a version closed with no successor at its end), of the affected keys only."""
    key, names = cols.key, cols.columns

    def of_keys(source: exp.Table, alias: str) -> exp.Select:
        query = exp.select().from_(source.as_(alias, quoted=True))
        if keys is not None:
            query = query.join(keys.as_("k", quoted=True), on=keys_equal(key, alias, "k"))
        return query

    staged = of_keys(versions, "n").select(
        *_event(
            [column(c, "n") for c in names],
            column(cols.valid_from, "n"),
            column(HASH, "n"),
            "v",
            1,
        )
    )
    if target is None:
        return [("events", staged)]
    successor = _over(exp.Lead(this=column(cols.valid_from, "t")), key, cols.valid_from, alias="t")
    old = of_keys(target, "t").select(
        *(column(c, "t") for c in names),
        _named(column(cols.valid_from, "t"), "_at"),
        _named(column(cols.valid_to, "t"), "_until"),
        _named(row_hash(cols.tracked, "t", dialect), HASH),
        _named(successor, "_next"),
    )
    before = exp.select(
        *_event([column(c) for c in names], column("_at"), column(HASH), "v", 0)
    ).from_(_cte("old"))
    # A gap: the key, every other column NULL (in the columns' order, for UNION ALL).
    types = cols.types
    nulls = [
        column(c) if c in key else _named(cast(exp.null(), types[c]) if types else exp.null(), c)
        for c in names
    ]
    unfollowed = exp.or_(
        column("_next").is_(exp.null()),
        exp.NEQ(this=column("_next"), expression=column("_until")),
    )
    gaps = (
        exp.select(*_event(nulls, column("_until"), exp.null(), "d", 0))
        .from_(_cte("old"))
        .where(exp.and_(column("_until").is_(exp.null()).not_(), exp.paren(unfollowed)))
    )
    events = exp.union(exp.union(before, gaps, distinct=False), staged, distinct=False)
    return [("old", old), ("events", events)]


def history(
    cols: HistoryColumns,
    versions: exp.Table,
    dialect: Dialect,
    target: exp.Table | None = None,
    keys: exp.Table | None = None,
) -> exp.Select:
    """The history of the affected `keys` computed again from its events: the versions of
    `target` (none: the history is new), its gaps, and the staged `versions`. Columns: the
    history's, with `HASH`."""
    key = cols.key

    def kind_is(name: str, value: str) -> exp.Expr:
        return exp.EQ(this=column(name), expression=_text(value))

    def over_key(function: exp.Expr) -> exp.Window:
        return _over(function, key, "_at")

    ctes = _events(cols, versions, dialect, target, keys)
    # one event per key and time: the staged one wins
    first = _over(exp.RowNumber(), [*key, "_at"], "_src", descending=True)
    ctes.append(("ranked", exp.select(exp.Star(), _named(first, "_rank")).from_(_cte("events"))))
    ctes.append(
        (
            "one",
            exp.select(exp.Star())
            .from_(_cte("ranked"))
            .where(exp.EQ(this=column("_rank"), expression=exp.Literal.number(1))),
        )
    )
    ctes.append(
        (
            "marked",
            exp.select(
                exp.Star(),
                _named(over_key(exp.Lag(this=column("_kind"))), "_prev_kind"),
                _named(over_key(exp.Lag(this=column(HASH))), "_prev_h"),
            ).from_(_cte("one")),
        )
    )
    # an event that changes nothing is dropped: the same values again, a gap after a gap
    # (or before any version)
    same_again = exp.Coalesce(
        this=exp.and_(
            kind_is("_prev_kind", "v"), exp.EQ(this=column("_prev_h"), expression=column(HASH))
        ),
        expressions=[exp.false()],
    )
    gap_again = exp.Coalesce(this=kind_is("_prev_kind", "d"), expressions=[exp.true()])
    changes = exp.and_(
        exp.not_(exp.paren(exp.and_(kind_is("_kind", "v"), same_again))),
        exp.not_(exp.paren(exp.and_(kind_is("_kind", "d"), gap_again))),
    )
    ctes.append(("kept", exp.select(exp.Star()).from_(_cte("marked")).where(changes)))
    # a version ends where the next event starts; the last one is current
    ending = _named(over_key(exp.Lead(this=column("_at"))), "_end")
    ctes.append(("timed", exp.select(exp.Star(), ending).from_(_cte("kept"))))
    query = (
        exp.select(
            *(column(c) for c in cols.columns),
            _named(column("_at"), cols.valid_from),
            _named(column("_end"), cols.valid_to),
            _named(column("_end").is_(exp.null()), cols.is_current),
            column(HASH),
        )
        .from_(_cte("timed"))
        .where(kind_is("_kind", "v"))
    )
    for name, cte in ctes:
        query = query.with_(_cte(name), as_=cte)
    return query


# ---------------------------------------------------------------- 4. what changes


def _same(cols: HistoryColumns, left: str, right: str) -> exp.Expr:
    """Two history rows are the same version: key, start, end and tracked values."""
    return all_of(
        [
            keys_equal(cols.key, left, right),
            exp.EQ(this=column(cols.valid_from, left), expression=column(cols.valid_from, right)),
            null_safe_equal(column(cols.valid_to, left), column(cols.valid_to, right)),
            exp.EQ(this=column(HASH, left), expression=column(HASH, right)),
        ]
    )


def _target_versions(
    cols: HistoryColumns, target: exp.Table, keys: exp.Table, dialect: Dialect
) -> exp.Select:
    """The target's versions of the affected keys, with their hashes."""
    return (
        exp.select(
            *(column(c, "t") for c in (*cols.key, cols.valid_from, cols.valid_to)),
            row_hash(cols.tracked, "t", dialect).as_(HASH, quoted=True),
        )
        .from_(target.as_("t", quoted=True))
        .join(keys.as_("k", quoted=True), on=keys_equal(cols.key, "t", "k"))
    )


def stale_versions(
    cols: HistoryColumns, target: exp.Table, keys: exp.Table, result: exp.Table, dialect: Dialect
) -> exp.Select:
    """(key, valid_from) of the target's versions the recomputed `result` does not hold."""
    kept = exp.select(exp.Literal.number(1)).from_(result.as_("r", quoted=True))
    return (
        exp.select(*(column(c, "o") for c in (*cols.key, cols.valid_from)))
        .from_(_target_versions(cols, target, keys, dialect).subquery("o", copy=False))
        .where(exp.not_(exp.Exists(this=kept.where(_same(cols, "r", "o")))))
    )


def new_versions(
    cols: HistoryColumns, target: exp.Table, keys: exp.Table, result: exp.Table, dialect: Dialect
) -> exp.Select:
    """The rows of the recomputed `result` the target does not hold (every history column)."""
    there = exp.select(exp.Literal.number(1)).from_(
        _target_versions(cols, target, keys, dialect).subquery("o", copy=False)
    )
    return (
        exp.select(*(column(c, "r") for c in cols.everything))
        .from_(result.as_("r", quoted=True))
        .where(exp.not_(exp.Exists(this=there.where(_same(cols, "r", "o")))))
    )
