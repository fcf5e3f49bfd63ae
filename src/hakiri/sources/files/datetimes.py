"""Date and timestamp values read with a `date_format`/`timestamp_format` pattern: hakiri's own
parser (`spec.datetime_patterns` defines the language), compiled into expressions of functions
every engine implements alike, so a value reads the same on Apache Spark and on Sail (whose
own pattern parsers differ).

The value (spaces around it ignored) is matched once by an anchored regular expression built
from the pattern (in the syntax Java's and Rust's regex engines share, letters compared
without case): one `regexp_replace` into its groups, split. Each field is then checked for its
range and put together as ISO 8601 text that the engine's cast turns into a date or
timestamp (the cast refuses a day the month does not have). A value that does not match, or
is not a real date or time, is NULL: a malformed record in a declared column, text in an
inferred one. A timestamp without an offset is in the session time zone, as any cast of
text. Missing fields (outside the pattern, or in an optional part left out) default to 1970,
January, the 1st, 00:00:00.

Readers use `with_parsed_columns` (four projections, each naming what the next reads, so no
engine computes a field twice); `parsed_date`/`parsed_timestamp` are the same as one Column,
for a few literal values. pyspark is imported inside the functions.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from hakiri.spec.datetime_patterns import Field, Literal, Optional, Token, parse_pattern

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType, StructType

    from hakiri.spec.pipeline import FilesConfig

__all__ = [
    "MONTHS",
    "WEEKDAYS",
    "as_text",
    "formatted",
    "inferred_timestamps",
    "kind_of",
    "parsed_date",
    "parsed_timestamp",
    "pattern_regex",
    "with_parsed",
    "with_parsed_columns",
]

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
# In the order of the engines' dayofweek(): 1 is Sunday.
WEEKDAYS = ("Sunday", "Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday")

_DIGITS = {
    ("y", 1): "[0-9]{1,4}",
    ("y", 2): "[0-9]{2}",
    ("y", 3): "[0-9]{3,4}",
    ("y", 4): "[0-9]{4}",
    ("D", 1): "[0-9]{1,3}",
    ("D", 2): "[0-9]{2,3}",
    ("D", 3): "[0-9]{3}",
}
_OFFSET = {
    1: "[+-][0-9]{2}(?:[0-9]{2})?",
    2: "[+-][0-9]{4}",
    3: "[+-][0-9]{2}:[0-9]{2}",
}
# Characters with a meaning in a regex, escaped (Rust's regex takes these escapes, Java's any).
_META = set("\\.+*?()|[]{}^$#&-~")


def pattern_regex(pattern: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """The anchored regex of `pattern`, and each field's (group number, letter count)."""
    groups: dict[str, tuple[int, int]] = {}
    regex = "(?i)\\A" + _regex(parse_pattern(pattern), groups) + "\\z"
    return regex, groups


def parsed_date(text: Column, pattern: str) -> Column:
    """`text` read with `pattern` as a date (NULL when it does not match or is no date), as
    one Column: each stage's values are written out where the next uses them (for a few
    values, e.g. literals; a frame's columns: `with_parsed_columns`)."""
    return _inline(text, pattern, "date")


def parsed_timestamp(text: Column, pattern: str) -> Column:
    """`text` read with `pattern` as a timestamp (NULL when it does not match or is no time)."""
    return _inline(text, pattern, "timestamp")


def with_parsed_columns(
    frame: DataFrame, parses: Sequence[tuple[str, Column, str, str]]
) -> DataFrame:
    """`frame` with, for each (name, text, kind, pattern), column `name` (replaced in place, or
    added at the end) = `text` read with `pattern` as `kind` ("date" | "timestamp").

    Four projections, each naming what the next reads: the one regex match per value
    first, then its groups, then the fields, then the date or timestamp. In one expression every use of a
    field repeats its whole computation on an engine without common-subexpression
    elimination (Sail): 80 times slower there, measured."""
    from pyspark.sql import functions as F

    from hakiri.sources.files.part import quoted_col

    if not parses:
        return frame
    plans = [_plan(pattern) for _, _, _, pattern in parses]

    def temp(i: int, key: str) -> str:
        return f"_hakiri_dt{i}_{key}"

    staged = frame.select(
        "*",
        *[
            value.alias(temp(i, key))
            for i, ((_, text, _, _), plan) in enumerate(zip(parses, plans, strict=True))
            for key, value in _split(text, plan).items()
        ],
    )
    for stage in (_matched, _fields):
        staged = staged.select(
            "*",
            *[
                value.alias(temp(i, key))
                for i, plan in enumerate(plans)
                for key, value in stage(lambda key, i=i: F.col(temp(i, key)), plan).items()
            ],
        )
    results = {
        name: _value(lambda key, i=i: F.col(temp(i, key)), plan, kind).alias(name)
        for i, ((name, _, kind, _), plan) in enumerate(zip(parses, plans, strict=True))
    }
    kept = [results.pop(name) if name in results else quoted_col(name) for name in frame.columns]
    return staged.select(*kept, *results.values())


@dataclass(frozen=True)
class _Plan:
    regex: str
    groups: dict[str, tuple[int, int]]  # letter -> (group number, letter count)


def _plan(pattern: str) -> _Plan:
    regex, groups = pattern_regex(pattern)
    return _Plan(regex, groups)


def _inline(text: Column, pattern: str, kind: str) -> Column:
    plan = _plan(pattern)
    found = _split(text, plan)
    found.update(_matched(lambda key: found[key], plan))
    found.update(_fields(lambda key: found[key], plan))
    return _value(lambda key: found[key], plan, kind)


_MARK, _SPLIT = "\u0002", "\u0001"


def _split(text: Column, plan: _Plan) -> dict[str, Column]:
    """Stage 1: the one match, as the groups joined by a separator and split (one
    regexp_replace of the whole value), and the value as read."""
    from pyspark.sql import functions as F

    # "$n" (group n, '' when it took no part) reads alike in Java's and Rust's replacements.
    replacement = _MARK + "".join(f"{_SPLIT}${n}" for n in range(1, len(plan.groups) + 1))
    value = F.trim(text)
    return {
        "parts": F.split(F.regexp_replace(value, plan.regex, replacement), _SPLIT),
        "lead": F.substring(value, 1, 1),
    }


def _matched(ref: Callable[[str], Column], plan: _Plan) -> dict[str, Column]:
    """Stage 2: the groups (NULL when the value does not match: it comes back from the
    replacement as it was, without the mark in front). A stage of its own: an engine does not
    share a subexpression inside CASE (Sail would run the regex once per use)."""
    from pyspark.sql import functions as F

    parts = ref("parts")
    matched = (
        (ref("lead") != _MARK)
        & (F.size(parts) == len(plan.groups) + 1)
        & (F.substring(F.element_at(parts, 1), 1, 1) == _MARK)
    )
    return {"g": F.when(matched, parts)}


def _fields(ref: Callable[[str], Column], plan: _Plan) -> dict[str, Column]:
    """Stage 2: each field as a number (or text: the offset), defaults filled in, and whether
    the numbers are in range (`ok`; NULL groups when the value did not match)."""
    from pyspark.sql import functions as F

    groups = ref("g")

    def raw(letter: str) -> Column | None:
        if letter not in plan.groups:
            return None
        found = groups.getItem(plan.groups[letter][0])
        return F.when(found != "", found)  # an optional part left out: ''

    def number(letter: str, default: int) -> Column:
        found = raw(letter)
        return F.lit(default) if found is None else F.coalesce(found.cast("int"), F.lit(default))

    year = number("y", 1970)
    if plan.groups.get("y", (0, 0))[1] == 2:
        year = year + 2000  # two-digit years are 2000-2099 (Spark's base year)
    fields = {
        "year": year,
        "month": _month(raw("M"), plan.groups.get("M", (0, 0))[1]),
        "day": number("d", 1),
        "doy": number("D", 1),
        "minute": number("m", 0),
        "second": number("s", 0),
    }
    weekday = raw("E")
    if weekday is not None:
        fields["weekday"] = _index(
            F.substring(F.lower(weekday), 1, 3), [d[:3].lower() for d in WEEKDAYS]
        )
    checks = [groups.isNotNull(), fields["month"].between(1, 12), fields["day"].between(1, 31)]
    checks += [fields["minute"].between(0, 59), fields["second"].between(0, 59)]
    if "h" in plan.groups:
        clock_hour = number("h", 12)
        afternoon = F.lower(F.coalesce(raw("a"), F.lit("am"))) == "pm"
        fields["hour"] = clock_hour % 12 + F.when(afternoon, 12).otherwise(0)
        checks.append(clock_hour.between(1, 12))
    else:
        fields["hour"] = number("H", 0)
        checks.append(fields["hour"].between(0, 23))
    fraction = raw("S")
    fields["micros"] = (
        F.lit("000000")
        if fraction is None
        else F.substring(F.concat(F.coalesce(fraction, F.lit("")), F.lit("000000")), 1, 6)
    )
    offset_letter = next((x for x in "XxZ" if x in plan.groups), None)
    if offset_letter is not None:
        offset, offset_ok = _offset(raw(offset_letter))
        fields["offset"] = offset
        checks.append(offset_ok)
    ok = checks[0]
    for check in checks[1:]:
        ok = ok & F.coalesce(check, F.lit(False))
    fields["ok"] = ok
    return fields


def _value(ref: Callable[[str], Column], plan: _Plan, kind: str) -> Column:
    """Stage 3: the date (a real one: the cast refuses Feb 30), its day name checked; for a
    timestamp, the ISO 8601 text of the fields cast in the session time zone or at the offset."""
    from pyspark.sql import functions as F

    year = ref("year")
    if "D" in plan.groups:
        first = F.concat(_padded(year, 4), F.lit("-01-01")).try_cast("date")
        date = F.date_add(first, ref("doy") - 1)
        ok = ref("ok") & (ref("doy") >= 1) & (F.year(date) == year)
        iso = _iso_date(date)
    else:
        iso = F.concat(
            _padded(year, 4),
            F.lit("-"),
            _padded(ref("month"), 2),
            F.lit("-"),
            _padded(ref("day"), 2),
        )
        date = iso.try_cast("date")
        ok = ref("ok")
    if "E" in plan.groups:
        ok = ok & (F.dayofweek(date) == ref("weekday"))
    if kind == "date":
        return F.when(ok, date)
    clock = [
        _padded(ref("hour"), 2),
        F.lit(":"),
        _padded(ref("minute"), 2),
        F.lit(":"),
        _padded(ref("second"), 2),
        F.lit("."),
        ref("micros"),
    ]
    if any(x in plan.groups for x in "XxZ"):
        clock.append(ref("offset"))
    stamp = F.concat(iso, F.lit(" "), *clock).try_cast("timestamp")
    return F.when(ok & date.isNotNull(), stamp)


def _regex(tokens: tuple[Token, ...], groups: dict[str, tuple[int, int]]) -> str:
    out = []
    for token in tokens:
        if isinstance(token, Literal):
            out.append("".join("\\" + c if c in _META else c for c in token.text))
        elif isinstance(token, Optional):
            out.append("(?:" + _regex(token.tokens, groups) + ")?")
        else:
            groups[token.letter] = (len(groups) + 1, token.count)
            out.append("(" + _field_regex(token) + ")")
    return "".join(out)


def _field_regex(token: Field) -> str:
    letter, count = token.letter, token.count
    if (letter, count) in _DIGITS:
        return _DIGITS[letter, count]
    if letter == "M" and count >= 3:
        return _names(MONTHS, count == 3)
    if letter == "E":
        return _names(WEEKDAYS, count < 4)
    if letter == "a":
        return "am|pm"
    if letter == "S":
        return f"[0-9]{{1,{count}}}"
    if letter in "Xx":
        return ("z|" if letter == "X" else "") + _OFFSET[count]
    if letter == "Z":
        return _OFFSET[2]
    return "[0-9]{1,2}" if count == 1 else "[0-9]{2}"  # M d H h m s


def _names(names: tuple[str, ...], short: bool) -> str:
    return "|".join(name[:3].lower() if short else name.lower() for name in names)


def _month(found: Column | None, count: int) -> Column:
    from pyspark.sql import functions as F

    if found is None:
        return F.lit(1)
    if count < 3:
        return F.coalesce(found.cast("int"), F.lit(1))
    names = [m[:3].lower() if count == 3 else m.lower() for m in MONTHS]
    return F.coalesce(_index(F.lower(found), names), F.lit(1))


def _index(found: Column, names: list[str]) -> Column:
    """1 + the position of `found` in `names` (a CASE: the same on every engine)."""
    from pyspark.sql import functions as F

    chosen = F.when(found == names[0], 1)
    for i, name in enumerate(names[1:], 2):
        chosen = chosen.when(found == name, i)
    return chosen


def _offset(found: Column | None) -> tuple[Column, Column]:
    """('+HH:MM' for Z, +HH, +HHMM or +HH:MM (or '' when left out), whether it is in range)."""
    from pyspark.sql import functions as F

    assert found is not None
    text = F.coalesce(found, F.lit(""))
    size = F.length(text)
    normal = (
        F.when(text == "", F.lit(""))
        .when(F.lower(text) == "z", F.lit("+00:00"))
        .when(size == 3, F.concat(text, F.lit(":00")))
        .when(size == 5, F.concat(F.substring(text, 1, 3), F.lit(":"), F.substring(text, 4, 2)))
        .otherwise(text)
    )
    hours = F.substring(normal, 2, 2).try_cast("int")
    minutes = F.substring(normal, 5, 2).try_cast("int")
    in_range = (normal == "") | (hours.between(0, 18) & minutes.between(0, 59))
    return normal, in_range


def _padded(number: Column, width: int) -> Column:
    from pyspark.sql import functions as F

    return F.lpad(number.cast("string"), width, "0")


def _iso_date(date: Column) -> Column:
    from pyspark.sql import functions as F

    return F.concat(
        _padded(F.year(date), 4),
        F.lit("-"),
        _padded(F.month(date), 2),
        F.lit("-"),
        _padded(F.dayofmonth(date), 2),
    )


def formatted(config: FilesConfig, kind: DataType) -> str | None:
    """The pattern a value of `kind` is read with: date_format for a date, timestamp_format
    for a timestamp (with the session's time zone), else None (read by the engine's cast)."""
    from pyspark.sql.types import DateType, TimestampType

    if isinstance(kind, DateType):
        return config.date_format
    if type(kind) is TimestampType:
        return config.timestamp_format
    return None


def kind_of(kind: DataType) -> str:
    """ "date" or "timestamp", the kind `with_parsed_columns` reads a `formatted` type as."""
    from pyspark.sql.types import DateType

    return "date" if isinstance(kind, DateType) else "timestamp"


def as_text(config: FilesConfig, schema: StructType) -> StructType:
    """`schema` with the fields a pattern reads (`formatted`) as text, for a reader to leave
    them to `with_parsed`."""
    from pyspark.sql.types import StringType, StructField, StructType

    return StructType(
        [
            StructField(f.name, StringType()) if formatted(config, f.dataType) else f
            for f in schema.fields
        ]
    )


def with_parsed(
    config: FilesConfig, raw: DataFrame, schema: StructType, record: Column
) -> DataFrame:
    """`raw` (read with `as_text(schema)`) with its formatted fields parsed to their types; a
    record with a value that does not parse is malformed: `record` (its text) goes to BAD."""
    from pyspark.sql import functions as F

    from hakiri.sources.files.part import BAD, quoted_col

    wanted = {f.name: f.dataType for f in schema.fields if formatted(config, f.dataType)}
    if not wanted:
        return raw
    texts = {name: f"_hakiri_text_{i}" for i, name in enumerate(wanted)}
    kept = raw.select(
        *[quoted_col(n) for n in raw.columns if n != BAD],
        *[quoted_col(n).alias(t) for n, t in texts.items()],
        F.col(BAD) if BAD in raw.columns else F.lit(None).cast("string").alias(BAD),
        record.alias("_hakiri_record_text"),
    )
    parses = [
        (name, F.col(texts[name]), kind_of(kind), formatted(config, kind) or "")
        for name, kind in wanted.items()
    ]
    parsed_frame = with_parsed_columns(kept, parses)
    lost = F.lit(False)
    for name, text_name in texts.items():
        lost = lost | (F.col(text_name).isNotNull() & quoted_col(name).isNull())
    bad = F.coalesce(F.col(BAD), F.when(lost, F.col("_hakiri_record_text")))
    return parsed_frame.select(*[quoted_col(n) for n in raw.columns if n != BAD], bad.alias(BAD))


def inferred_timestamps(config: FilesConfig, raw: DataFrame) -> DataFrame:
    """Inferred JSON: the text fields every well-formed record's value of reads with
    `timestamp_format` become timestamps (one aggregate of counts; dates are never inferred
    from JSON strings, as on Spark). `raw` as read, without hakiri's own columns changed."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    from hakiri.sources.files.part import BAD, quoted_col

    pattern = config.timestamp_format
    names = [
        f.name
        for f in raw.schema.fields
        if pattern and isinstance(f.dataType, StringType) and not f.name.startswith("_hakiri_")
    ]
    if not pattern or not names:
        return raw
    good = raw.where(F.col(BAD).isNull()) if BAD in raw.columns else raw
    probes = [(f"_hakiri_ts{i}", quoted_col(n), "timestamp", pattern) for i, n in enumerate(names)]
    counts = []
    for i, name in enumerate(names):
        text = quoted_col(name)
        counts += [
            F.count(text).alias(f"n{i}"),
            F.count_if(text.isNotNull() & F.col(f"_hakiri_ts{i}").isNull()).alias(f"b{i}"),
        ]
    found = with_parsed_columns(good, probes).agg(*counts).first()
    assert found is not None  # a global aggregate has one row
    turned = [n for i, n in enumerate(names) if found[f"n{i}"] and not found[f"b{i}"]]
    return with_parsed_columns(raw, [(n, quoted_col(n), "timestamp", pattern) for n in turned])
