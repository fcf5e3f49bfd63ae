"""hakiri's date and timestamp patterns against Python's own calendar: datetimes (and patterns
built from the language's letters, in every width) are generated, formatted here by a formatter
of the test's own, parsed by the expression `sources.files.datetimes` compiles, on Sail
in-process (no JVM), and must come back as the same value. Also the rules that are choices:
widths, two-digit years, day and month names, invalid dates, whitespace, offsets."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from hakiri.sources.files.datetimes import MONTHS, WEEKDAYS

UTC = dt.UTC


@pytest.fixture(scope="module")
def session() -> Iterator[Any]:
    """A Sail session of this module's own: not the process's default (see the compile tests)."""
    from pyspark.sql import SparkSession

    from hakiri.spark.engines import SAIL, mark_engine
    from hakiri.spark.sail import sail_endpoint

    sail = SparkSession.builder.remote(sail_endpoint()).create()
    sail.conf.set("spark.sql.session.timeZone", "UTC")
    yield mark_engine(sail, SAIL)
    sail.stop()


def _parsed(session: Any, cases: list[tuple[str, str]], kind: str) -> list[Any]:
    """Each (pattern, text) parsed as `kind` ("date": a date; "timestamp": microseconds since
    the epoch), in one query over one row that holds every text (`with_parsed_columns`, the
    staged form the readers use)."""
    from pyspark.sql import functions as F

    from hakiri.sources.files.datetimes import with_parsed_columns

    texts = session.range(1).select(
        *[F.lit(text).alias(f"t{i}") for i, (_, text) in enumerate(cases)]
    )
    parses = [(f"c{i}", F.col(f"t{i}"), kind, pattern) for i, (pattern, _) in enumerate(cases)]
    found = with_parsed_columns(texts, parses)
    if kind == "timestamp":
        found = found.select(*[F.unix_micros(f"c{i}").alias(f"c{i}") for i in range(len(cases))])
    row = found.first()
    return [row[f"c{i}"] for i in range(len(cases))]


def test_one_column_of_a_literal_reads_as_the_staged_projections_do(session: Any) -> None:
    """`parsed_date`/`parsed_timestamp` (one Column, for a few literals: the message that
    names a malformed value) read as `with_parsed_columns`."""
    from pyspark.sql import functions as F

    from hakiri.sources.files.datetimes import parsed_date, parsed_timestamp

    row = (
        session.range(1)
        .select(
            parsed_date(F.lit("Tue, 2 jan 24"), "EEE, d MMM yy").alias("good"),
            parsed_date(F.lit("Wed, 2 jan 24"), "EEE, d MMM yy").alias("bad"),
            F.unix_micros(
                parsed_timestamp(F.lit("2024-01-02 1:05 pm+01:00"), "yyyy-MM-dd h:mm aXXX")
            ).alias("at"),
        )
        .first()
    )
    assert (row["good"], row["bad"]) == (dt.date(2024, 1, 2), None)
    assert row["at"] == _micros(2024, 1, 2, 13, 5, offset=60)


# ---------------------------------------------------------------- the test's own formatter

_FIELD_FORMAT = {
    "y": lambda t, n: (
        str(t.year) if n == 1 else f"{t.year % 100:02d}" if n == 2 else f"{t.year:0{n}d}"
    ),
    "M": lambda t, n: (
        str(t.month)
        if n == 1
        else f"{t.month:02d}"
        if n == 2
        else MONTHS[t.month - 1][: 3 if n == 3 else None]
    ),
    "d": lambda t, n: f"{t.day:0{n}d}",
    "D": lambda t, n: f"{t.timetuple().tm_yday:0{n}d}",
    "E": lambda t, n: WEEKDAYS[(t.weekday() + 1) % 7][: 3 if n < 4 else None],
    "H": lambda t, n: f"{t.hour:0{n}d}",
    "h": lambda t, n: f"{(t.hour % 12) or 12:0{n}d}",
    "a": lambda t, n: "AM" if t.hour < 12 else "PM",
    "m": lambda t, n: f"{t.minute:0{n}d}",
    "s": lambda t, n: f"{t.second:0{n}d}",
    "S": lambda t, n: f"{t.microsecond:06d}{'0' * 3}"[:n],
}


def _offset_text(letter: str, count: int, minutes: int) -> str:
    if minutes == 0 and letter == "X":
        return "Z"
    sign = "+" if minutes >= 0 else "-"
    hours, rest = divmod(abs(minutes), 60)
    if letter in "Xx" and count == 1:
        return f"{sign}{hours:02d}" + (f"{rest:02d}" if rest else "")
    if letter in "Xx" and count == 3:
        return f"{sign}{hours:02d}:{rest:02d}"
    return f"{sign}{hours:02d}{rest:02d}"


def _format(pattern: list[tuple[str, int] | str], when: dt.datetime, offset: int) -> str:
    out = []
    for piece in pattern:
        if isinstance(piece, str):
            out.append(piece)
        elif piece[0] in "XxZ":
            out.append(_offset_text(piece[0], piece[1], offset))
        else:
            out.append(_FIELD_FORMAT[piece[0]](when, piece[1]))
    return "".join(out)


def _pattern_text(pattern: list[tuple[str, int] | str]) -> str:
    return "".join(
        piece if isinstance(piece, str) else piece[0] * piece[1] for piece in pattern
    ).replace("T", "'T'")


# ---------------------------------------------------------------- patterns and values

_YEAR = st.sampled_from([("y", 1), ("y", 2), ("y", 3), ("y", 4)])
_MONTH = st.sampled_from([("M", 1), ("M", 2), ("M", 3), ("M", 4)])
_DAY = st.sampled_from([("d", 1), ("d", 2)])
_SEPARATOR = st.sampled_from(["-", "/", ".", " ", ", "])


@st.composite
def _date_patterns(draw: Any) -> list[tuple[str, int] | str]:
    year, month, day = draw(_YEAR), draw(_MONTH), draw(_DAY)
    sep = draw(_SEPARATOR)
    order = draw(st.sampled_from(["dMy", "yMd", "Mdy", "yD"]))
    if order == "yD":
        body: list[tuple[str, int] | str] = [
            year,
            sep,
            draw(st.sampled_from([("D", 1), ("D", 2), ("D", 3)])),
        ]
    else:
        fields = {"d": day, "M": month, "y": year}
        body = [fields[order[0]], sep, fields[order[1]], sep, fields[order[2]]]
    if draw(st.booleans()):
        body = [draw(st.sampled_from([("E", 3), ("E", 4), ("E", 1)])), " ", *body]
    return body


@st.composite
def _timestamp_patterns(draw: Any) -> list[tuple[str, int] | str]:
    body = draw(_date_patterns())
    twelve = draw(st.booleans())
    hour = draw(st.sampled_from([("h", 1), ("h", 2)] if twelve else [("H", 1), ("H", 2)]))
    minute, second = (
        draw(st.sampled_from([("m", 1), ("m", 2)])),
        draw(st.sampled_from([("s", 1), ("s", 2)])),
    )
    time: list[tuple[str, int] | str] = [hour, ":", minute, ":", second]
    fraction = draw(st.integers(0, 9))
    if fraction:
        time += [".", ("S", fraction)]
    if twelve:
        time += [" ", ("a", 1)]
    offset = draw(
        st.sampled_from(
            [None, ("X", 1), ("X", 2), ("X", 3), ("x", 1), ("x", 2), ("x", 3), ("Z", 1)]
        )
    )
    if offset:
        time.append(offset)
    return [*body, draw(st.sampled_from([" ", "T"])), *time]


def _fits(pattern: list[tuple[str, int] | str], when: dt.datetime) -> bool:
    """A value the pattern can show: a two-digit year shows 2000-2099, y and yyy show at most
    four digits (every year here has at most four)."""
    return ("y", 2) not in pattern or 2000 <= when.year <= 2099


_WHEN = st.datetimes(min_value=dt.datetime(1000, 1, 1), max_value=dt.datetime(2200, 12, 31))
_OFFSET = st.integers(-18 * 60, 18 * 60).map(lambda m: m - m % 15)


def _truncated(when: dt.datetime, pattern: list[tuple[str, int] | str]) -> dt.datetime:
    digits = next((p[1] for p in pattern if isinstance(p, tuple) and p[0] == "S"), 0)
    keep = 10 ** (6 - min(digits, 6))
    return when.replace(microsecond=when.microsecond // keep * keep)


_SETTINGS = settings(
    max_examples=12,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture],
)


@_SETTINGS
@given(st.lists(st.tuples(_date_patterns(), _WHEN), min_size=1, max_size=40))
def test_dates_read_back_as_python_formats_them(session: Any, cases: list[Any]) -> None:
    cases = [(p, w if _fits(p, w) else w.replace(year=2000 + w.year % 100)) for p, w in cases]
    texts = [(_pattern_text(p), _format(p, w, 0)) for p, w in cases]
    found = _parsed(session, texts, "date")
    for (pattern, text), (_, when), value in zip(texts, cases, found, strict=True):
        assert value == when.date(), (pattern, text)


@_SETTINGS
@given(st.lists(st.tuples(_timestamp_patterns(), _WHEN, _OFFSET), min_size=1, max_size=40))
def test_timestamps_read_back_as_python_formats_them(session: Any, cases: list[Any]) -> None:
    cases = [(p, w if _fits(p, w) else w.replace(year=2000 + w.year % 100), o) for p, w, o in cases]
    texts = [(_pattern_text(p), _format(p, w, o)) for p, w, o in cases]
    found = _parsed(session, texts, "timestamp")
    for (pattern, text), (parts, when, offset), value in zip(texts, cases, found, strict=True):
        has_offset = any(isinstance(p, tuple) and p[0] in "XxZ" for p in parts)
        zone = dt.timezone(dt.timedelta(minutes=offset if has_offset else 0))
        expected = _truncated(when, parts).replace(tzinfo=zone)
        micros = (expected - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)
        assert value == micros, (pattern, text)


# ---------------------------------------------------------------- the rules that are choices


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        # widths: one letter takes 1 or 2 digits, two take exactly 2; yyyy takes exactly 4
        ("d/M/yyyy", "5/3/2024", dt.date(2024, 3, 5)),
        ("d/M/yyyy", "05/03/2024", dt.date(2024, 3, 5)),
        ("dd/MM/yyyy", "5/03/2024", None),
        ("dd/MM/yyyy", "05/03/24", None),
        ("yyyy-MM-dd", "20240-01-01", None),
        ("y-MM-dd", "24-01-02", dt.date(24, 1, 2)),  # y: the year as written
        ("yy-MM-dd", "24-01-02", dt.date(2024, 1, 2)),  # yy: 2000-2099
        ("yy-MM-dd", "99-01-02", dt.date(2099, 1, 2)),
        # names in any case; a day name must be the date's
        ("dd MMM yyyy", "02 jAN 2024", dt.date(2024, 1, 2)),
        ("dd MMMM yyyy", "02 Jan 2024", None),
        ("EEE dd/MM/yyyy", "Tue 02/01/2024", dt.date(2024, 1, 2)),
        ("EEE dd/MM/yyyy", "Wed 02/01/2024", None),
        ("EEEE dd/MM/yyyy", "TUESDAY 02/01/2024", dt.date(2024, 1, 2)),
        # invalid dates, day of year
        ("yyyy-MM-dd", "2024-02-30", None),
        ("yyyy-MM-dd", "2023-02-29", None),
        ("yyyy-MM-dd", "2024-13-01", None),
        ("yyyy-DDD", "2024-366", dt.date(2024, 12, 31)),
        ("yyyy-DDD", "2023-366", None),
        # spaces around the value are ignored, not inside it; optional parts default
        ("yyyy-MM-dd", "  2024-01-02 ", dt.date(2024, 1, 2)),
        ("yyyy-MM-dd", "2024 -01-02", None),
        ("yyyy[-MM[-dd]]", "2024", dt.date(2024, 1, 1)),
        ("yyyy[-MM[-dd]]", "2024-07", dt.date(2024, 7, 1)),
        ("MM-dd", "07-04", dt.date(1970, 7, 4)),
        # literals
        ("'day' d 'of' MMMM, yyyy", "DAY 4 OF July, 2024", dt.date(2024, 7, 4)),
        ("yyyy.MM.dd", "2024x01x02", None),
    ],
)
def test_the_date_rules(session: Any, pattern: str, text: str, expected: dt.date | None) -> None:
    assert _parsed(session, [(pattern, text)], "date") == [expected]


def _micros(*args: int, offset: int = 0) -> int:
    zone = dt.timezone(dt.timedelta(minutes=offset))
    moment = dt.datetime(*args, tzinfo=zone)  # type: ignore[misc]
    return (moment - dt.datetime(1970, 1, 1, tzinfo=UTC)) // dt.timedelta(microseconds=1)


@pytest.mark.parametrize(
    ("pattern", "text", "expected"),
    [
        ("yyyy-MM-dd HH:mm", "2024-01-02 24:00", None),
        ("yyyy-MM-dd HH:mm:ss", "2024-01-02 23:59:60", None),
        ("yyyy-MM-dd h:mm a", "2024-01-02 12:05 AM", _micros(2024, 1, 2, 0, 5)),
        ("yyyy-MM-dd h:mm a", "2024-01-02 12:05 pm", _micros(2024, 1, 2, 12, 5)),
        ("yyyy-MM-dd h:mm a", "2024-01-02 13:05 pm", None),
        # S…S: 1 to n digits, a fraction; kept to microseconds
        ("HH:mm:ss.SSS", "10:00:00.5", _micros(1970, 1, 1, 10, 0, 0, 500000)),
        ("HH:mm:ss.SSS", "10:00:00.5000", None),
        ("HH:mm:ss.SSSSSSSSS", "10:00:00.123456789", _micros(1970, 1, 1, 10, 0, 0, 123456)),
        # offsets; none: the session time zone (UTC here)
        ("yyyy-MM-dd HH:mmX", "2024-01-02 10:00Z", _micros(2024, 1, 2, 10)),
        ("yyyy-MM-dd HH:mmX", "2024-01-02 10:00+0530", _micros(2024, 1, 2, 10, offset=330)),
        ("yyyy-MM-dd HH:mmXXX", "2024-01-02 10:00-08:00", _micros(2024, 1, 2, 10, offset=-480)),
        ("yyyy-MM-dd HH:mmXXX", "2024-01-02 10:00+19:00", None),
        ("yyyy-MM-dd HH:mmxx", "2024-01-02 10:00Z", None),
        ("yyyy-MM-dd HH:mm Z", "2024-01-02 10:00 +0100", _micros(2024, 1, 2, 10, offset=60)),
        ("yyyy-MM-dd", "2024-01-02", _micros(2024, 1, 2)),
    ],
)
def test_the_timestamp_rules(session: Any, pattern: str, text: str, expected: int | None) -> None:
    assert _parsed(session, [(pattern, text)], "timestamp") == [expected]
