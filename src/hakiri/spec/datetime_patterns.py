"""Spark datetime patterns (`date_format`, `timestamp_format`), checked without a JVM.

Spark 4 builds a parser from the pattern only when it reads; a pattern it refuses
there does not fail the read. An inferred column silently stays text, and a declared
one makes every record malformed. So `hakiri validate` refuses such patterns first,
by the rules of Spark's "Datetime Patterns" page and its DateTimeFormatterHelper
(parsing side): letters outside quotes must be pattern letters Spark parses with,
each in a count java.time accepts; text in single quotes is literal.
"""

from __future__ import annotations

from itertools import groupby

__all__ = ["pattern_problem"]

# Letter -> the longest run java.time (or Spark, which is stricter) accepts for parsing.
_MAX_RUN = {
    "G": 4,  # era; 5 (narrow) is refused by Spark
    "y": 6,  # year; Spark refuses 7 or more
    "D": 3,  # day-of-year
    "M": 4,  # month; 5 (narrow) is refused by Spark
    "L": 4,
    "d": 2,
    "a": 1,
    "h": 2,
    "K": 2,
    "k": 2,
    "H": 2,
    "m": 2,
    "s": 2,
    "S": 9,  # fraction of second: up to nanoseconds
    "V": 2,
    "z": 4,
    "O": 4,
    "X": 5,
    "x": 5,
    "Z": 5,
}
_EXACT_RUN = {"V": (2,), "O": (1, 4)}
_WEEK_BASED = {
    "Y": "week-based year",
    "w": "week of week-based year",
    "W": "week of month",
    "u": "day of week number",
    "e": "localized day of week",
    "c": "localized day of week",
}
_NOT_FOR_PARSING = {
    "E": "day of week",
    "F": "aligned week of month",
    "q": "quarter",
    "Q": "quarter",
}
_REFUSED = {
    "A": "milli of day",
    "B": "day period",
    "n": "nano of second",
    "N": "nano of day",
    "p": "pad modifier",
}
_RESERVED = "#{}"
_SEE = "see Spark's Datetime Patterns page (sql-ref-datetime-pattern)"


def pattern_problem(pattern: str) -> tuple[str, str] | None:
    """(reason, hint) when Spark would refuse `pattern` for parsing; None when it parses with it."""
    if pattern.count("'") % 2:
        return (
            f"{pattern!r} has an unclosed single quote",
            "quote literal text in pairs, e.g. yyyy-MM-dd'T'HH:mm:ss; write '' for a quote character",
        )
    depth = 0
    # Even-numbered pieces are pattern; odd ones are quoted text ('' splits into an empty one).
    for piece in pattern.split("'")[::2]:
        for letter, run in groupby(piece):
            count = len(list(run))
            problem = _letter_problem(pattern, letter, count)
            if problem:
                return problem
            if letter == "[":
                depth += count
            elif letter == "]":
                depth -= count
                if depth < 0:
                    return (
                        f"{pattern!r} closes an optional section with ']' that no '[' opened",
                        "remove the ']', or quote it as literal text: ']'",
                    )
    return None


def _letter_problem(pattern: str, letter: str, count: int) -> tuple[str, str] | None:
    if letter in _RESERVED:
        return (
            f"{letter!r} is reserved in Spark datetime patterns ({pattern!r})",
            f"quote it as literal text: '{letter}'",
        )
    if not ("a" <= letter.lower() <= "z"):
        return None  # any other character is literal text
    if letter in _WEEK_BASED:
        return (
            f"Spark refuses the week-based pattern letter {letter!r} "
            f"({_WEEK_BASED[letter]}) in {pattern!r}",
            "use y for the year, M for the month and d for the day; " + _SEE,
        )
    if letter in _NOT_FOR_PARSING:
        return (
            f"Spark cannot parse with the pattern letter {letter!r} "
            f"({_NOT_FOR_PARSING[letter]}) in {pattern!r}",
            "leave it out (y, M and d determine the date), or quote text that is always "
            "the same; load the column as text to keep it",
        )
    if letter in _REFUSED:
        return (
            f"Spark refuses the pattern letter {letter!r} ({_REFUSED[letter]}) in {pattern!r}",
            _SEE,
        )
    if letter not in _MAX_RUN:
        return (
            f"{letter!r} is not a Spark datetime pattern letter ({pattern!r})",
            "put literal letters in single quotes, e.g. yyyy-MM-dd'T'HH:mm:ss; " + _SEE,
        )
    exact = _EXACT_RUN.get(letter)
    if (exact and count not in exact) or count > _MAX_RUN[letter]:
        allowed = " or ".join(str(n) for n in exact) if exact else f"at most {_MAX_RUN[letter]}"
        return (
            f"{letter * count!r} in {pattern!r}: Spark takes {allowed} {letter!r} in a row",
            _SEE,
        )
    return None
