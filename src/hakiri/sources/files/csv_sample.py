"""What types `apply` will infer for a CSV without declared `columns`, told by `plan` from a
sample, without the engine.

`apply` decides each column's type from every well-formed record, in the engine
(`csv_files._inferred_fields`): the narrowest of int, bigint, decimal(38,0), double,
boolean, date, timestamp that every present value converts to, else string. This module
applies the same rules in Python to the first `SAMPLE_ROWS` records of the matched files, so
a person sees the types before they are created (a float for money, most often). A sample
can only guess narrower than the whole file: a later value that does not fit widens the
type at apply. Custom `date_format`/`timestamp_format` patterns are read by the engine's
expression (`datetimes`): the sample does not judge them, and a column that would need them
is shown as text with a note.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from datetime import date, datetime

from hakiri.sources.base import TypeSample
from hakiri.spec.pipeline import FilesConfig

__all__ = [
    "INTEGER_TEXT",
    "ISO_DATE_TEXT",
    "ISO_TIMESTAMP_TEXT",
    "SAMPLE_ROWS",
    "money_like",
    "sample_csv_types",
]

SAMPLE_ROWS = 1_000

# Integers, ISO dates and ISO timestamps as Spark's CSV inference reads them by default
# (the engine's inference in csv_files uses the same texts).
INTEGER_TEXT = r"^[+-]?[0-9]+$"
ISO_DATE_TEXT = r"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"
ISO_TIMESTAMP_TEXT = (
    r"^[0-9]{4}-[0-9]{2}-[0-9]{2}[T ][0-9]{2}:[0-9]{2}(:[0-9]{2}(\.[0-9]{1,9})?)?"
    r"(Z|[+-][0-9]{2}(:?[0-9]{2})?)?$"
)
_INTEGER = re.compile(INTEGER_TEXT)
_NUMBER = re.compile(r"^[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?[dDfF]?$")
_SPECIAL_DOUBLES = frozenset({"NaN", "Infinity", "+Infinity", "-Infinity"})
_ISO_DATE = re.compile(ISO_DATE_TEXT)
_ISO_TIMESTAMP = re.compile(ISO_TIMESTAMP_TEXT)
_CENTS = re.compile(r"^[+-]?[0-9]+\.[0-9]{2}$")
_MONEY_WORDS = re.compile(
    r"(amount|price|cost|total|balance|fee|revenue|salary|tax|payment|charge|money|"
    r"usd|eur|gbp|cents?)",
    re.IGNORECASE,
)


def sample_csv_types(
    config: FilesConfig, names: Sequence[str], records: Iterable[list[str]]
) -> TypeSample | None:
    """The data `records` (header left out; at most SAMPLE_ROWS are read) typed as apply
    would type them; None without a record. Records of the wrong width are left out, as
    apply leaves malformed records out of its inference."""
    values: list[list[str]] = [[] for _ in names]
    rows = 0
    for record in records:
        if len(record) != len(names):
            continue
        for column, value in zip(values, record, strict=True):
            if value != "" and value != config.null_value:
                column.append(value)
        rows += 1
        if rows >= SAMPLE_ROWS:
            break
    if not rows:
        return None
    custom = bool(config.date_format or config.timestamp_format)
    types = tuple((name, _type_of(config, seen)) for name, seen in zip(names, values, strict=True))
    money = tuple(
        name
        for (name, type_), seen in zip(types, values, strict=True)
        if type_ == "double" and money_like(name, _all_cents(seen))
    )
    unjudged = tuple(name for name, type_ in types if custom and type_ == "string")
    return TypeSample(types, rows, money, unjudged)


def money_like(column: str, cents: bool) -> bool:
    """A column that holds money, by its name or by its values (two decimals throughout)."""
    return cents or bool(_MONEY_WORDS.search(column))


def _type_of(config: FilesConfig, seen: list[str]) -> str:
    if not seen:
        return "string"
    if all(_INTEGER.match(v) for v in seen):
        numbers = [int(v) for v in seen]
        if all(-(2**31) <= n < 2**31 for n in numbers):
            return "int"
        if all(-(2**63) <= n < 2**63 for n in numbers):
            return "bigint"
        if all(len(v.lstrip("+-")) <= 38 for v in seen):
            return "decimal(38,0)"
    if all(_is_double(config, v) for v in seen):
        return "double"
    if all(v.lower() in ("true", "false") for v in seen):
        return "boolean"
    if config.date_format or config.timestamp_format:
        return "string"  # patterns: judged by the engine's expression at apply
    if all(_is_date(v) for v in seen):
        return "date"
    if all(_is_timestamp(v) or _is_date(v) for v in seen):
        return "timestamp"
    return "string"


def _is_double(config: FilesConfig, value: str) -> bool:
    if value in _SPECIAL_DOUBLES or (config.nan_value is not None and value == config.nan_value):
        return True
    return bool(_NUMBER.match(value.strip()))


def _is_date(value: str) -> bool:
    if not _ISO_DATE.match(value):
        return False
    try:
        date.fromisoformat(value)
    except ValueError:
        return False
    return True


def _is_timestamp(value: str) -> bool:
    if not _ISO_TIMESTAMP.match(value):
        return False
    text = value.replace(" ", "T", 1).replace("Z", "+00:00")
    try:
        datetime.fromisoformat(text)
    except ValueError:
        return False
    return True


def _all_cents(seen: list[str]) -> bool:
    """Every value with a fraction has exactly two decimals, and some value has one."""
    fractional = [v for v in seen if "." in v]
    return bool(fractional) and all(_CENTS.match(v) for v in fractional)
