"""Hash bisection: find the rows two tables disagree on without moving the tables.

Both sides give every row two hashes of the same canonical text (`canon`): one of its key,
one of the whole row. A *segment* is the set of rows whose key hash starts with a given hex
prefix; each side sums its segments (row count and two 32-bit slices of the row hashes) in
its own system, PostgreSQL or the engine, and only those sums travel. Segments whose sums
agree hold the same rows; the others are split into longer prefixes and summed again, until
a differing segment is small enough that its keys and row hashes are read and compared.

So a table with no difference costs one scan on each side and a few thousand sums; `d`
scattered differences cost about `d` small segments more per level.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from decimal import Decimal, InvalidOperation
from typing import Protocol, TypeVar

__all__ = ["Bisection", "Moved", "Side", "Sums", "bisect", "key_order", "on_both"]

# Rows per segment the first split aims at.
FETCH_ROWS = 256
# What one more level of sums costs (a scan on each side), in rows read instead.
LEVEL_COST = 2_000
# The first split: at most 16**3 segments, whatever the table's size.
FIRST_WIDTH_MAX = 3
# Past this many differing rows the report stops collecting (the counts say "at least").
MAX_DIFFERENCES = 100_000

Key = tuple[str | None, ...]
T = TypeVar("T")
S = TypeVar("S")


@dataclass(frozen=True)
class Sums:
    """One segment on one side: its rows and the sums of two slices of their row hashes."""

    rows: int
    low: int
    high: int


@dataclass
class Moved:
    """What crossed from one system to hakiri: sums, keys with row hashes, sampled rows."""

    queries: int = 0
    segments: int = 0
    rows: int = 0
    bytes: int = 0

    def add(self, segments: int = 0, rows: int = 0, size: int = 0) -> None:
        self.queries += 1
        self.segments += segments
        self.rows += rows
        self.bytes += size


class Side(Protocol):
    """A table seen through the canonical hashes, in the system that holds it."""

    moved: Moved

    def segments(self, width: int, within: Sequence[str]) -> dict[str, Sums]:
        """Sums per key-hash prefix of `width` hex digits, for rows whose key hash starts
        with one of `within` (all rows when it is empty)."""
        ...

    def rows(self, within: Sequence[str]) -> dict[Key, str]:
        """Canonical key -> row hash, for the rows whose key hash starts with one of `within`."""
        ...


@dataclass
class Bisection:
    """The keys only one side has, the keys whose rows differ, and how the search went."""

    only_in_source: list[Key] = field(default_factory=list)
    only_in_target: list[Key] = field(default_factory=list)
    changed: list[Key] = field(default_factory=list)
    levels: list[int] = field(default_factory=list)  # segments compared per level
    truncated: bool = False

    @property
    def identical(self) -> bool:
        return not (self.only_in_source or self.only_in_target or self.changed)


def first_width(rows: int) -> int:
    """Hex digits of the first split: segments of about FETCH_ROWS rows, at most 16**3."""
    if rows <= FETCH_ROWS:
        return 0
    return max(1, min(FIRST_WIDTH_MAX, math.ceil(math.log(rows / FETCH_ROWS, 16))))


def bisect(source: Side, target: Side, rows: int) -> Bisection:
    """Compare two sides holding about `rows` rows (the larger count, for the first split)."""
    found = Bisection()
    width, within = first_width(rows), list[str]()
    while True:
        if width == 0:  # small enough to compare row by row at once
            _compare_rows(source, target, within, found)
            return found
        ours, theirs = on_both(lambda side, w=width, p=within: side.segments(w, p), source, target)
        found.levels.append(len(ours.keys() | theirs.keys()))
        differing = sorted(p for p in ours.keys() | theirs.keys() if ours.get(p) != theirs.get(p))
        if not differing:
            return found
        held = sum(max(_rows(ours.get(p)), _rows(theirs.get(p))) for p in differing)
        step = 0 if width >= 32 else split_step(len(differing), held)
        if step == 0:
            _compare_rows(source, target, differing, found)
            return found
        within, width = differing, min(32, width + step)


def split_step(segments: int, rows: int) -> int:
    """How many hex digits to split `segments` differing segments holding `rows` rows by
    (0: read their rows now), for the least moved: a split returns up to 16**step sums per
    segment and costs a scan on each side (LEVEL_COST rows' worth); the rows read after it
    are about the segments' rows / 16**step, if each segment holds one difference."""
    mean = rows / segments

    def cost(step: int) -> float:
        if step == 0:
            return rows
        return segments * min(16**step, mean) + rows / 16**step + LEVEL_COST

    return min(range(4), key=cost)


def on_both(ask: Callable[[S], T], source: S, target: S) -> tuple[T, T]:
    """`ask` of both sides at once: each system works on its own rows in parallel."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="hakiri-diff") as pool:
        theirs = pool.submit(ask, target)
        return ask(source), theirs.result()


def _rows(sums: Sums | None) -> int:
    return 0 if sums is None else sums.rows


def _compare_rows(source: Side, target: Side, within: Sequence[str], found: Bisection) -> None:
    ours, theirs = on_both(lambda side: side.rows(within), source, target)
    for key in sorted(ours.keys() | theirs.keys(), key=key_order):
        if len(found.only_in_source) + len(found.only_in_target) + len(found.changed) >= (
            MAX_DIFFERENCES
        ):
            found.truncated = True
            return
        mine, other = ours.get(key), theirs.get(key)
        if other is None:
            found.only_in_source.append(key)
        elif mine is None:
            found.only_in_target.append(key)
        elif mine != other:
            found.changed.append(key)


def key_order(key: Key) -> tuple[tuple[bool, bool, Decimal, str], ...]:
    """Keys in the order a person expects: numbers by value, then text, NULLs last."""
    return tuple(_value_order(v) for v in key)


def _value_order(value: str | None) -> tuple[bool, bool, Decimal, str]:
    if value is None:
        return (True, True, Decimal(0), "")
    try:
        number = Decimal(value)
    except InvalidOperation:
        number = Decimal("NaN")
    if number.is_nan():
        return (False, True, Decimal(0), value)
    return (False, False, number, value)
