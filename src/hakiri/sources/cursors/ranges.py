"""Cursor values and chunk ranges of a table source: pure data, no I/O.

A cursor is a column whose values only grow for new rows (an `updated_at`
timestamp or an autoincrement id). A chunk is a half-open range of it,
`lo <= column < hi` (the last range of a plan includes its upper end), and is
what a batch of a table source reads. Ranges are stored in the catalog as JSON
(the batch's predicate) and rendered into SQL only by `CursorRange.where_sql`,
so the same JSON always reads the same rows.

Values travel as JSON: integers for numeric cursors, ISO 8601 strings for
timestamp cursors (with an offset for `timestamp with time zone`, without one
for `timestamp` and dates).
"""

from __future__ import annotations

import datetime as dt
import json
import re
from dataclasses import asdict, dataclass
from decimal import Decimal
from typing import Any, NamedTuple

from hakiri.errors import HakiriError
from hakiri.spec.base import duration_seconds
from hakiri.spec.pipeline import CursorKind, IncrementalSpec

__all__ = [
    "MAX_CHUNKS",
    "CursorColumn",
    "CursorRange",
    "as_json",
    "as_python",
    "base_type",
    "cursor_kind_of",
    "parse_value",
    "plan_ranges",
    "shift_back",
]

# A plan this long is a typo in `window` (or `start_from`), not a backfill.
MAX_CHUNKS = 100_000

# PostgreSQL's type names (format_type, precision removed) that can be a cursor.
_CURSOR_TYPES = {
    "timestamp with time zone": CursorKind.TIMESTAMP,
    "timestamp without time zone": CursorKind.TIMESTAMP,
    "date": CursorKind.TIMESTAMP,
    "smallint": CursorKind.NUMERIC,
    "integer": CursorKind.NUMERIC,
    "bigint": CursorKind.NUMERIC,
    "numeric": CursorKind.NUMERIC,
}
_TYPMOD = re.compile(r"\(\s*\d+\s*(,\s*-?\d+\s*)?\)")


def base_type(pg_type: str) -> str:
    """`timestamp(3) with time zone` -> `timestamp with time zone`, `numeric(12,2)` -> `numeric`."""
    return " ".join(_TYPMOD.sub("", pg_type.lower()).split())


def cursor_kind_of(pg_type: str) -> CursorKind | None:
    """The cursor kind a PostgreSQL column type supports; None when it supports neither
    (arrays, ranges and every other type included)."""
    return _CURSOR_TYPES.get(base_type(pg_type))


class CursorBounds(NamedTuple):
    """A cursor column's type and its smallest and largest values now (None when nothing is
    there yet). Every source spells the type as the cursors do: a PostgreSQL type name
    (`cursor_kind_of` reads it), whether it reads PostgreSQL or an API's timestamps."""

    type_name: str
    low: Any
    high: Any


@dataclass(frozen=True)
class CursorColumn:
    """The cursor of one table: its column, kind and PostgreSQL type, plus its options."""

    column: str
    kind: CursorKind
    pg_type: str  # format_type() of the column, used to cast literals
    lag_seconds: int = 0
    include_nulls: bool = True

    @classmethod
    def resolve(cls, incremental: str | IncrementalSpec, pg_type: str, where: str) -> CursorColumn:
        spec = (
            incremental
            if isinstance(incremental, IncrementalSpec)
            else IncrementalSpec(column=incremental)
        )
        found = cursor_kind_of(pg_type)
        if found is None:
            raise HakiriError(
                f"cursor column {spec.column} of {where} is {pg_type}, which cannot be a cursor",
                "use a timestamp, date or integer column that grows for new rows",
            )
        if spec.kind is not None and spec.kind is not found:
            raise HakiriError(
                f"cursor column {spec.column} of {where} is {pg_type}, not a {spec.kind.value} cursor",
                f"set kind = '{found.value}' (or leave `kind` out to discover it)",
            )
        if spec.lag is not None and found is not CursorKind.TIMESTAMP:
            raise HakiriError(
                f"`lag` is set on the numeric cursor {spec.column} of {where}",
                "lag re-reads a time window behind the cursor; it only applies to timestamp cursors",
            )
        return cls(
            spec.column,
            found,
            pg_type,
            lag_seconds=duration_seconds(spec.lag) if spec.lag else 0,
            include_nulls=spec.on_null_cursor == "include",
        )

    @property
    def aware(self) -> bool:
        return "with time zone" in self.pg_type.lower()

    def to_json(self, value: Any) -> Any:
        """A value read from PostgreSQL (psycopg's Python type) as stored in the catalog."""
        if value is None:
            return None
        if self.kind is CursorKind.NUMERIC:
            if isinstance(value, Decimal) and value != value.to_integral_value():
                return str(value)
            return int(value)
        if isinstance(value, dt.datetime):
            if value.tzinfo is not None:
                value = value.astimezone(dt.UTC)
                return value.isoformat() if self.aware else value.replace(tzinfo=None).isoformat()
            return value.isoformat()
        if isinstance(value, dt.date):
            return dt.datetime.combine(value, dt.time()).isoformat()
        return parse_value(self.kind, value, self.column)

    def from_config(self, value: str | int) -> Any:
        """`start_from` (or a `rewind --from`) as a stored value."""
        return parse_value(self.kind, value, self.column, aware=self.aware)


def parse_value(kind: CursorKind, value: Any, column: str, *, aware: bool = False) -> Any:
    """Check and normalise a stored or configured cursor value; HakiriError when it does not fit."""
    if kind is CursorKind.NUMERIC:
        try:
            number = Decimal(str(value))
        except ArithmeticError:
            number = None
        if number is None or not number.is_finite():
            raise HakiriError(
                f"{value!r} is not a number, but {column} is a numeric cursor",
                "give an integer (start_from = 1000, --from 1000)",
            )
        return int(number) if number == number.to_integral_value() else str(number)
    try:
        moment = dt.datetime.fromisoformat(str(value))
    except ValueError:
        raise HakiriError(
            f"{value!r} is not an ISO 8601 date or timestamp, but {column} is a timestamp cursor",
            "write it like 2024-01-31 or 2024-01-31T12:00:00Z",
        ) from None
    if moment.tzinfo is not None:
        moment = moment.astimezone(dt.UTC)
        if not aware:
            moment = moment.replace(tzinfo=None)
    elif aware:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.isoformat()


def as_python(kind: CursorKind, value: Any) -> Any:
    """A stored value as a comparable Python value (Decimal or datetime)."""
    if kind is CursorKind.NUMERIC:
        return Decimal(str(value))
    return dt.datetime.fromisoformat(value)


def as_json(kind: CursorKind, value: Any) -> Any:
    if kind is CursorKind.NUMERIC:
        return int(value) if value == value.to_integral_value() else str(value)
    return value.isoformat()


def shift_back(cursor: CursorColumn, value: Any, seconds: int) -> Any:
    """`value` moved `seconds` back in time (the lag window); unchanged for numeric cursors."""
    if cursor.kind is not CursorKind.TIMESTAMP or not seconds:
        return value
    return (dt.datetime.fromisoformat(value) - dt.timedelta(seconds=seconds)).isoformat()


@dataclass(frozen=True)
class CursorRange:
    """The rows of one chunk: `lo <(=) column <(=) hi`, optionally OR the column IS NULL.

    `lo`/`hi` None means unbounded on that side. Stored as the batch predicate (JSON).
    """

    column: str
    kind: str
    pg_type: str
    lo: Any
    hi: Any
    lo_inclusive: bool = True
    hi_inclusive: bool = False
    nulls: bool = False

    def to_predicate(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    @classmethod
    def from_predicate(cls, text: str) -> CursorRange:
        return cls(**json.loads(text))

    def where_sql(self) -> str:
        """The range as a SQL condition; values are re-parsed, so nothing but a literal gets in."""
        from psycopg import sql

        column = sql.Identifier(self.column)
        cast = sql.SQL(self.pg_type_sql())
        parts: list[sql.Composable] = []
        kind = CursorKind(self.kind)
        for value, op in (
            (self.lo, ">=" if self.lo_inclusive else ">"),
            (self.hi, "<=" if self.hi_inclusive else "<"),
        ):
            if value is None:
                continue
            literal = sql.Literal(str(as_python(kind, value)))
            parts.append(sql.SQL("{} {} CAST({} AS {})").format(column, sql.SQL(op), literal, cast))
        condition = sql.SQL(" AND ").join(parts) if parts else sql.SQL("TRUE")
        if self.nulls:
            condition = sql.SQL("(({}) OR {} IS NULL)").format(condition, column)
        else:
            condition = sql.SQL("({})").format(condition)
        return condition.as_string()

    def pg_type_sql(self) -> str:
        """The cast target: the column's own type, minus a typmod PostgreSQL would round to."""
        name = base_type(self.pg_type)
        if name not in _CURSOR_TYPES:
            raise HakiriError(
                f"cursor column {self.column} has type {self.pg_type}, which cannot be a cursor",
                "use a timestamp, date or integer column",
            )
        return name

    def describe(self) -> str:
        """`updated_at >= 2024-01-01T00:00:00 AND updated_at < 2024-02-01T00:00:00`, for people."""
        parts = []
        if self.lo is not None:
            parts.append(f"{self.column} {'>=' if self.lo_inclusive else '>'} {self.lo}")
        if self.hi is not None:
            parts.append(f"{self.column} {'<=' if self.hi_inclusive else '<'} {self.hi}")
        text = " AND ".join(parts) or "all rows"
        return f"({text}) OR {self.column} IS NULL" if self.nulls else text

    def overlaps(self, start: Any, end: Any) -> bool:
        """Whether any value in [start, end] falls in this range (NULL rows never overlap)."""
        kind = CursorKind(self.kind)
        start_v, end_v = as_python(kind, start), as_python(kind, end)
        if self.lo is not None:
            lo = as_python(kind, self.lo)
            if end_v < lo or (end_v == lo and not self.lo_inclusive):
                return False
        if self.hi is not None:
            hi = as_python(kind, self.hi)
            if start_v > hi or (start_v == hi and not self.hi_inclusive):
                return False
        return True


def plan_ranges(
    cursor: CursorColumn,
    start: Any,
    end: Any,
    window: str | int | None,
    *,
    start_inclusive: bool = True,
    nulls_in_first: bool = False,
) -> list[CursorRange]:
    """Cover (start, end] or [start, end] with ranges of `window`; the last one includes `end`.

    `window` is a duration ('30d') for timestamp cursors and a count of ids for numeric
    ones; None means one range. An empty list when start is past end.
    """
    kind = cursor.kind
    lo, hi = as_python(kind, start), as_python(kind, end)
    if lo > hi or (lo == hi and not start_inclusive):
        return []
    step = _step(cursor, window)
    bounds = [lo]
    if step is not None:
        edge = lo + step
        while edge < hi:
            bounds.append(edge)
            if len(bounds) > MAX_CHUNKS:
                raise HakiriError(
                    f"backfill of {cursor.column} from {start} to {end} with window {window} makes more "
                    f"than {MAX_CHUNKS:,} chunks",
                    "use a larger `window`, or a later `start_from`",
                )
            edge = edge + step
    ranges = []
    for i, first in enumerate(bounds):
        last = i == len(bounds) - 1
        ranges.append(
            CursorRange(
                cursor.column,
                kind.value,
                cursor.pg_type,
                as_json(kind, first),
                as_json(kind, hi if last else bounds[i + 1]),
                lo_inclusive=start_inclusive or i > 0,
                hi_inclusive=last,
                nulls=nulls_in_first and i == 0,
            )
        )
    return ranges


def _step(cursor: CursorColumn, window: str | int | None) -> Any:
    if window is None:
        return None
    if cursor.kind is CursorKind.NUMERIC:
        if not isinstance(window, int):
            raise HakiriError(
                f"backfill window {window!r} is a duration, but {cursor.column} is a numeric cursor",
                "give the number of ids per chunk, e.g. window = 100000",
            )
        return Decimal(window)
    if isinstance(window, int):
        raise HakiriError(
            f"backfill window {window} is a count of ids, but {cursor.column} is a timestamp cursor",
            "give a duration, e.g. window = '30d'",
        )
    return dt.timedelta(seconds=duration_seconds(window))
