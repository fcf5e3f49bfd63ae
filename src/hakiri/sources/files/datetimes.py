"""Date and timestamp values read with a `date_format`/`timestamp_format` pattern: hakiri's own
parser (`spec.datetime_patterns` defines the language), compiled into one Column expression
of functions every engine implements alike, so a value reads the same on Apache Spark and
on Sail (whose own pattern parsers differ).

The value (spaces around it ignored) is matched by an anchored regular expression built from
the pattern (written in the syntax Java's and Rust's regex engines share, letters compared
without case); each field is a group, taken with `regexp_extract`, checked for its range and
put together as ISO 8601 text that the engine's cast turns into a date or timestamp (the cast
refuses a day the month does not have). A value that does not match, or is not a real date or
time, is NULL: a malformed record in a declared column, text in an inferred one. A timestamp
without an offset is in the session time zone, as any cast of text. Missing fields (outside the
pattern, or in an optional part left out) default to 1970, January, the 1st, 00:00:00.
pyspark is imported inside the functions.
"""

from __future__ import annotations

from dataclasses import dataclass, field
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
    "parsed",
    "parsed_date",
    "parsed_timestamp",
    "pattern_regex",
    "with_parsed",
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


@dataclass
class _Compiled:
    regex: str = ""
    groups: dict[str, tuple[int, int]] = field(default_factory=dict)  # letter -> (group, count)


def pattern_regex(pattern: str) -> tuple[str, dict[str, tuple[int, int]]]:
    """The anchored regex of `pattern`, and each field's (group number, letter count)."""
    compiled = _Compiled()
    compiled.regex = "(?i)^" + _regex(parse_pattern(pattern), compiled) + "$"
    return compiled.regex, compiled.groups


def parsed_date(text: Column, pattern: str) -> Column:
    """`text` read with `pattern` as a date (NULL when it does not match or is no date)."""
    from pyspark.sql import functions as F

    date, ok, _ = _parts(text, pattern)
    return F.when(ok, date)


def parsed_timestamp(text: Column, pattern: str) -> Column:
    """`text` read with `pattern` as a timestamp (NULL when it does not match or is no time)."""
    from pyspark.sql import functions as F

    date, ok, clock = _parts(text, pattern)
    iso = F.concat(_iso_date(date), F.lit(" "), clock)
    return F.when(ok, iso.try_cast("timestamp"))


def _regex(tokens: tuple[Token, ...], compiled: _Compiled) -> str:
    out = []
    for token in tokens:
        if isinstance(token, Literal):
            out.append("".join("\\" + c if c in _META else c for c in token.text))
        elif isinstance(token, Optional):
            out.append("(?:" + _regex(token.tokens, compiled) + ")?")
        else:
            compiled.groups[token.letter] = (len(compiled.groups) + 1, token.count)
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


def _parts(text: Column, pattern: str) -> tuple[Column, Column, Column]:
    """(the date, whether the value matched and every field is in range, the time of day as
    'HH:mm:ss.ffffff' with the offset if any)."""
    from pyspark.sql import functions as F

    regex, groups = pattern_regex(pattern)
    value = F.trim(text)

    def raw(letter: str) -> Column | None:
        if letter not in groups:
            return None
        found = F.regexp_extract(value, regex, groups[letter][0])
        return F.when(found != "", found)  # an optional part left out: ''

    def number(letter: str, default: int) -> Column:
        found = raw(letter)
        return F.lit(default) if found is None else F.coalesce(found.cast("int"), F.lit(default))

    checks = [value.rlike(regex)]
    year = number("y", 1970)
    if groups.get("y", (0, 0))[1] == 2:
        year = year + 2000  # two-digit years are 2000-2099 (Spark's base year)
    month = _month(raw("M"), groups.get("M", (0, 0))[1])
    day = number("d", 1)
    checks += [month.between(1, 12), day.between(1, 31)]
    if "D" in groups:
        day_of_year = number("D", 1)
        first = F.concat(_padded(year, 4), F.lit("-01-01")).try_cast("date")
        date = F.date_add(first, day_of_year - 1)
        checks += [day_of_year >= 1, F.year(date) == year]
    else:
        iso = F.concat(_padded(year, 4), F.lit("-"), _padded(month, 2), F.lit("-"), _padded(day, 2))
        date = iso.try_cast("date")
    checks.append(date.isNotNull())
    weekday = raw("E")
    if weekday is not None:
        named = _index(F.substring(F.lower(weekday), 1, 3), [d[:3].lower() for d in WEEKDAYS])
        checks.append(F.dayofweek(date) == named)
    if "h" in groups:
        clock_hour = number("h", 12)
        afternoon = F.lower(F.coalesce(raw("a"), F.lit("am"))) == "pm"
        hour = clock_hour % 12 + F.when(afternoon, 12).otherwise(0)
        checks.append(clock_hour.between(1, 12))
    else:
        hour = number("H", 0)
    minute, second = number("m", 0), number("s", 0)
    checks += [hour.between(0, 23), minute.between(0, 59), second.between(0, 59)]
    fraction = raw("S")
    micros = (
        F.lit("000000")
        if fraction is None
        else F.substring(F.concat(F.coalesce(fraction, F.lit("")), F.lit("000000")), 1, 6)
    )
    clock = F.concat(
        _padded(hour, 2),
        F.lit(":"),
        _padded(minute, 2),
        F.lit(":"),
        _padded(second, 2),
        F.lit("."),
        micros,
    )
    offset_letter = next((x for x in "XxZ" if x in groups), None)
    if offset_letter is not None:
        offset, offset_ok = _offset(raw(offset_letter))
        clock = F.concat(clock, offset)
        checks.append(offset_ok)
    ok = checks[0]
    for check in checks[1:]:
        ok = ok & F.coalesce(check, F.lit(False))
    return date, ok, clock


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


def parsed(text: Column, kind: DataType, pattern: str) -> Column:
    from pyspark.sql.types import DateType

    return (
        parsed_date(text, pattern)
        if isinstance(kind, DateType)
        else parsed_timestamp(text, pattern)
    )


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
    values = []
    for name in raw.columns:
        kind = wanted.get(name)
        if name == BAD:
            continue
        if kind is None:
            values.append(quoted_col(name))
            continue
        values.append(parsed(quoted_col(name), kind, formatted(config, kind) or "").alias(name))
    # Two projections: the parse first, then the verdict from its results (one parse per value).
    parsed_frame = raw.select(
        *values,
        *[quoted_col(n).alias(t) for n, t in texts.items()],
        F.col(BAD) if BAD in raw.columns else F.lit(None).cast("string").alias(BAD),
        record.alias("_hakiri_record_text"),
    )
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
    counts = []
    for i, name in enumerate(names):
        text = quoted_col(name)
        counts += [
            F.count(text).alias(f"n{i}"),
            F.count_if(text.isNotNull() & parsed_timestamp(text, pattern).isNull()).alias(f"b{i}"),
        ]
    found = good.agg(*counts).first()
    assert found is not None  # a global aggregate has one row
    turned = [n for i, n in enumerate(names) if found[f"n{i}"] and not found[f"b{i}"]]
    return raw.withColumns({n: parsed_timestamp(quoted_col(n), pattern) for n in turned})
