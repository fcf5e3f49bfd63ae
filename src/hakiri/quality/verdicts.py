"""Verdicts of dataset validators, judged from what a probe measured.

A probe (SQL on a PostgreSQL staging table in `validators`, a Spark aggregation
over the staged batch in `spark_probes`) measures a few numbers; this module
turns them into the `ProbeResult` the user reads. Both probes judge here, so a
validator says the same thing whichever destination the rows load into.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, date, datetime, timedelta
from typing import Any

from hakiri.errors import ValidationFailed
from hakiri.spec.quality import (
    CardinalityValidator,
    DatasetValidator,
    DuplicateKeyValidator,
    FkIntegrityValidator,
    FreshnessValidator,
    RowCountValidator,
    SourceDiffValidator,
)

__all__ = [
    "COLUMN_NAMES_HINT",
    "EXAMPLE_LIMIT",
    "UNCOMPARABLE_HINT",
    "ProbeResult",
    "fk_column_hint",
    "fk_uncomparable_hint",
    "freshness_text_hint",
    "judge_cardinality",
    "judge_duplicate_key",
    "judge_fk_integrity",
    "judge_freshness",
    "judge_row_count",
    "judge_source_diff",
    "not_a_timestamp",
    "probe_failed",
    "validator_check_id",
]

EXAMPLE_LIMIT = 3  # orphan values quoted in an fk_integrity message

COLUMN_NAMES_HINT = (
    "check the validator's column names against the rows being loaded (names are case-sensitive)"
)
UNCOMPARABLE_HINT = "the column's type does not support this check: cast it in a transform"


@dataclass(frozen=True)
class ProbeResult:
    """The verdict of one dataset validator on the staged rows."""

    check: str  # stable short id: 'row_count', 'freshness:created_at', 'duplicate_key:id,email'
    on_fail: str  # 'abort' | 'warn', carried from the validator
    ok: bool
    message: str  # one line for the user, naming the numbers
    observed: Any  # JSON-able: the count, ISO timestamp or distinct count measured

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


def validator_check_id(validator: DatasetValidator) -> str:
    """'row_count', 'freshness:<column>', 'fk_integrity:<column>', 'cardinality:<column>',
    'duplicate_key:<c1>,<c2>'."""
    if isinstance(validator, RowCountValidator):
        return "row_count"
    if isinstance(validator, DuplicateKeyValidator):
        return "duplicate_key:" + ",".join(validator.columns)
    if isinstance(validator, SourceDiffValidator):
        return "source_diff"
    return f"{validator.type}:{validator.column}"


# -------------------------------------------------------------------- verdicts


def judge_row_count(v: RowCountValidator, rows: int) -> ProbeResult:
    too_few = v.min is not None and rows < v.min
    too_many = v.max is not None and rows > v.max
    message = f"row_count: {_rows(rows)}, expected {_bounds(v.min, v.max)}"
    return _result(v, not (too_few or too_many), message, int(rows))


def judge_freshness(
    v: FreshnessValidator, newest: datetime | date | None, now: datetime
) -> ProbeResult:
    """`newest` is the column's max: an aware instant, a naive timestamp (read as UTC)
    or a date (its midnight, UTC); None when the column holds no value."""
    label = f"freshness({v.column})"
    if newest is None:
        return _result(v, False, f"{label}: no values in {v.column} to judge freshness", None)
    instant = _as_utc(newest)
    age_hours = (now - instant) / timedelta(hours=1)
    ok = instant >= now - timedelta(hours=v.within_hours)
    observed = newest.isoformat() if type(newest) is date else instant.isoformat()
    if age_hours >= 0:
        age = f"is {_hours(age_hours)} old"
    else:
        age = f"is {_hours(-age_hours)} in the future"
    message = f"{label}: newest value {observed} {age} (allowed: {_hours(v.within_hours)})"
    return _result(v, ok, message, observed)


def judge_fk_integrity(
    v: FkIntegrityValidator, orphans: int, examples: Sequence[str], target: str
) -> ProbeResult:
    """`target` names the referenced column as the user should read it, e.g.
    'public.customers(id)'; `examples` are a few orphan values as text."""
    if orphans:
        shown = ", ".join(repr(e) for e in examples)
        message = (
            f"fk_integrity({v.column}): {_count(orphans, 'value')} with no match in {target} "
            f"(e.g. {shown})"
        )
    else:
        message = f"fk_integrity({v.column}): every value has a match in {target}"
    return _result(v, orphans == 0, message, int(orphans))


def judge_cardinality(v: CardinalityValidator, distinct: int) -> ProbeResult:
    message = (
        f"cardinality({v.column}): {_count(distinct, 'distinct value')}, "
        f"expected at least {v.min_distinct:,}"
    )
    return _result(v, distinct >= v.min_distinct, message, int(distinct))


def judge_duplicate_key(
    v: DuplicateKeyValidator, duplicates: int, example: Sequence[Any] | None
) -> ProbeResult:
    """`duplicates` is the number of key tuples seen more than once; `example` is the
    first of them (one text value per key column), None when there is none."""
    label = f"duplicate_key({', '.join(v.columns)})"
    if not duplicates or example is None:
        return _result(v, True, f"{label}: every key value appears once", 0)
    shown = ", ".join(f"{c}={x}" for c, x in zip(v.columns, example, strict=True))
    noun = "key value appears" if duplicates == 1 else "key values appear"
    message = f"{label}: {duplicates:,} {noun} more than once (e.g. {shown})"
    return _result(v, False, message, int(duplicates))


def judge_source_diff(
    v: SourceDiffValidator,
    target: str,
    source_rows: int,
    only_in_source: int,
    only_in_target: int,
    changed: int,
) -> ProbeResult:
    """A target compared with its source (`hakiri diff`'s counts)."""
    differ = only_in_source + only_in_target + changed
    allowed = v.allowed(source_rows)
    if differ:
        message = (
            f"source_diff({target}): {_rows(differ)} {'differs' if differ == 1 else 'differ'} "
            "from the source "
            f"({only_in_source:,} only in the source, {only_in_target:,} only in the target, "
            f"{changed:,} changed; allowed {allowed:,})"
        )
    else:
        message = f"source_diff({target}): the target holds the source's {_rows(source_rows)}"
    observed = {
        "only_in_source": only_in_source,
        "only_in_target": only_in_target,
        "changed": changed,
    }
    return _result(v, differ <= allowed, message, observed)


# ------------------------------------------------------- probes that cannot run


def probe_failed(validator: DatasetValidator, reason: str, hint: str) -> ValidationFailed:
    """The error for a probe that could not run; `reason` is one line."""
    check = validator_check_id(validator)
    return ValidationFailed(f"validator {check} could not run on the staged rows: {reason}", hint)


def not_a_timestamp(v: FreshnessValidator, type_name: str) -> ValidationFailed:
    return probe_failed(
        v,
        f"column {v.column!r} has type {type_name}; freshness needs a timestamp, a date or "
        "text holding ISO 8601 timestamps",
        "point the validator at a timestamp column, or cast the column in a transform",
    )


def freshness_text_hint(v: FreshnessValidator) -> str:
    return (
        f"{v.column} must hold ISO 8601 timestamps (e.g. 2024-05-01T12:00:00Z): "
        "fix or cast the values in a transform"
    )


def fk_column_hint(v: FkIntegrityValidator) -> str:
    return (
        f"check that the rows have column {v.column!r} and that "
        f"{v.ref_table} has column {v.ref_column!r} (names are case-sensitive)"
    )


def fk_uncomparable_hint(v: FkIntegrityValidator) -> str:
    return (
        f"{v.column} and {v.ref_table}.{v.ref_column} have types "
        "that cannot be compared: cast the column in a transform"
    )


# ----------------------------------------------------------------------- small


def _result(validator: DatasetValidator, ok: bool, message: str, observed: Any) -> ProbeResult:
    return ProbeResult(validator_check_id(validator), validator.on_fail, ok, message, observed)


def _as_utc(value: datetime | date) -> datetime:
    """timestamptz as is; timestamp (no zone) and date (its midnight) read as UTC."""
    if not isinstance(value, datetime):
        return datetime(value.year, value.month, value.day, tzinfo=UTC)
    if value.tzinfo is None:
        return value.replace(tzinfo=UTC)
    return value.astimezone(UTC)


def _rows(n: int) -> str:
    return f"{n:,} row" if n == 1 else f"{n:,} rows"


def _count(n: int, noun: str) -> str:
    return f"{n:,} {noun}" if n == 1 else f"{n:,} {noun}s"


def _bounds(low: int | None, high: int | None) -> str:
    if low is not None and high is not None:
        return f"between {low:,} and {high:,}"
    if low is not None:
        return f"at least {low:,}"
    return f"at most {high:,}"


def _hours(hours: float) -> str:
    if math.isclose(hours, round(hours), abs_tol=0.05):
        whole = round(hours)
        return f"{whole:,} hour" if whole == 1 else f"{whole:,} hours"
    return f"{hours:,.1f} hours"
