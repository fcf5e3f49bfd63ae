"""hakiri's datetime pattern language (`date_format`, `timestamp_format`): checked here without
a JVM, and compiled by `sources.files.datetimes` into one engine expression that reads the
same on every engine (no engine's own pattern parser: Spark's and Sail's differ).

The language is a subset of Spark's datetime pattern letters, each with one width rule
(the table in docs/sources.md#date-and-timestamp-patterns):

- numbers: `y` (1-4 digits, the year as written), `yy` (2 digits, 2000-2099), `yyy` (3-4),
  `yyyy` (4); `M`, `d`, `H`, `h`, `m`, `s` (1-2 digits: `5` and `05`), doubled (exactly 2);
  `D` (day of year: 1-3 digits), `DD` (2-3), `DDD` (3); `S`…`S` (a fraction of the second,
  1 to as many digits as letters, kept to microseconds);
- names, any case: `MMM` (Jan), `MMMM` (January), `E`/`EE`/`EEE` (Mon), `EEEE` (Monday):
  a day name is checked against the date; `a` (AM/PM, with `h`);
- offsets: `X` (Z, +05, +0530), `XX` (Z, +0530), `XXX` (Z, +05:30), `x`/`xx`/`xxx` (the same
  without Z), `Z`/`ZZ`/`ZZZ` (+0530);
- `'text'` literal (`''` a quote), `[…]` an optional part, any other character literal.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = [
    "Field",
    "Literal",
    "Optional",
    "Token",
    "has_time",
    "parse_pattern",
    "pattern_problem",
]


@dataclass(frozen=True)
class Field:
    letter: str
    count: int


@dataclass(frozen=True)
class Literal:
    text: str


@dataclass(frozen=True)
class Optional:
    tokens: tuple[Token, ...]


Token = Field | Literal | Optional

# Letter -> the runs hakiri's language takes.
RUNS = {
    "y": (1, 2, 3, 4),
    "M": (1, 2, 3, 4),
    "d": (1, 2),
    "D": (1, 2, 3),
    "E": (1, 2, 3, 4),
    "H": (1, 2),
    "h": (1, 2),
    "a": (1,),
    "m": (1, 2),
    "s": (1, 2),
    "S": tuple(range(1, 10)),
    "X": (1, 2, 3),
    "x": (1, 2, 3),
    "Z": (1, 2, 3),
}
_OUTSIDE = {
    "G": ("era", "leave it out: years are AD"),
    "L": ("stand-alone month", "use M, MM, MMM or MMMM"),
    "k": ("clock hour 1-24", "use H (0-23), or h with a"),
    "K": ("hour of am-pm 0-11", "use h (1-12) with a, or H"),
    "z": ("zone name", "use an offset: X (Z, +05, +0530), XXX (+05:30) or Z (+0530)"),
    "V": ("zone id", "use an offset: X (Z, +05, +0530), XXX (+05:30) or Z (+0530)"),
    "O": ("localized offset", "use an offset: X (Z, +05, +0530), XXX (+05:30) or Z (+0530)"),
    "Y": ("week-based year", "use y"),
    "w": ("week of week-based year", "use y, M and d"),
    "W": ("week of month", "use y, M and d"),
    "u": ("day of week number", "use E for a day name"),
    "e": ("localized day of week", "use E"),
    "c": ("localized day of week", "use E"),
    "F": ("aligned week of month", "use y, M and d"),
    "q": ("quarter", "use y, M and d"),
    "Q": ("quarter", "use y, M and d"),
    "A": ("milli of day", "use H, m, s and S"),
    "B": ("day period", "use a (AM/PM)"),
    "n": ("nano of second", "use S…S (up to 9)"),
    "N": ("nano of day", "use H, m, s and S"),
    "p": ("pad modifier", "leave it out"),
}
_RESERVED = "#{}"
SEE = "see the pattern table in docs/sources.md (Date and timestamp patterns)"
_TIME = frozenset("HhmsSa")


def parse_pattern(pattern: str) -> tuple[Token, ...]:
    """The pattern's tokens; ValueError("reason\\nhint") when it is outside hakiri's language."""
    problem = pattern_problem(pattern)
    if problem:
        raise ValueError("\n".join(problem))
    return _tokens(pattern)[0]


def pattern_problem(pattern: str) -> tuple[str, str] | None:
    """(reason, hint) when `pattern` is outside hakiri's language; None when hakiri reads it."""
    if not pattern:
        return "the pattern is empty", "e.g. dd/MM/yyyy"
    try:
        tokens, _ = _tokens(pattern)
    except _Refused as exc:
        return exc.reason, exc.hint
    letters = [f.letter for f in _fields(tokens)]
    if "h" in letters and "a" not in letters:
        return (
            f"{pattern!r} has h (hour 1-12) without a (AM/PM)",
            "add a, e.g. hh:mm a, or use H for hours 0-23",
        )
    if "a" in letters and "h" not in letters:
        return f"{pattern!r} has a (AM/PM) without h (hour 1-12)", "e.g. h:mm a"
    if "D" in letters and ("M" in letters or "d" in letters):
        return (
            f"{pattern!r} has D (day of year) together with M or d",
            "use either D, or M and d",
        )
    seen: set[str] = set()
    for letter in letters:
        group = "offset" if letter in "XxZ" else letter
        if group in seen:
            return (
                f"{pattern!r} has {'an offset' if group == 'offset' else repr(letter)} twice",
                "each field once; put repeated text in single quotes",
            )
        seen.add(group)
    return None


def has_time(tokens: tuple[Token, ...]) -> bool:
    return any(f.letter in _TIME for f in _fields(tokens))


class _Refused(Exception):
    def __init__(self, reason: str, hint: str) -> None:
        super().__init__(reason)
        self.reason, self.hint = reason, hint


def _fields(tokens: tuple[Token, ...]) -> list[Field]:
    found: list[Field] = []
    for token in tokens:
        if isinstance(token, Field):
            found.append(token)
        elif isinstance(token, Optional):
            found += _fields(token.tokens)
    return found


def _tokens(pattern: str, start: int = 0, nested: bool = False) -> tuple[tuple[Token, ...], int]:
    tokens: list[Token] = []
    i = start
    while i < len(pattern):
        char = pattern[i]
        if char == "'" and pattern.startswith("''", i):
            _literal(tokens, "'")
            i += 2
        elif char == "'":
            end, text = i + 1, ""
            while True:
                close = pattern.find("'", end)
                if close < 0:
                    raise _Refused(
                        f"{pattern!r} has an unclosed single quote",
                        "quote literal text in pairs, e.g. yyyy-MM-dd'T'HH:mm:ss; "
                        "write '' for a quote character",
                    )
                text += pattern[end:close]
                if not pattern.startswith("''", close):
                    break
                text += "'"  # '' inside quoted text
                end = close + 2
            _literal(tokens, text)
            i = close + 1
        elif char == "[":
            inner, i = _tokens(pattern, i + 1, nested=True)
            tokens.append(Optional(inner))
        elif char == "]":
            if not nested:
                raise _Refused(
                    f"{pattern!r} closes an optional part with ']' that no '[' opened",
                    "remove the ']', or quote it as literal text: ']'",
                )
            return tuple(tokens), i + 1
        elif char in _RESERVED:
            raise _Refused(
                f"{char!r} is reserved in datetime patterns ({pattern!r})",
                f"quote it as literal text: '{char}'",
            )
        elif "a" <= char.lower() <= "z":
            count = len(pattern[i:]) - len(pattern[i:].lstrip(char))
            tokens.append(_field(pattern, char, count))
            i += count
        else:
            _literal(tokens, char)
            i += 1
    if nested:
        raise _Refused(
            f"{pattern!r} opens an optional part with '[' that no ']' closes",
            "close it with ']', or quote it as literal text: '['",
        )
    return tuple(tokens), i


def _literal(tokens: list[Token], text: str) -> None:
    if tokens and isinstance(tokens[-1], Literal):
        tokens[-1] = Literal(tokens[-1].text + text)
    elif text:
        tokens.append(Literal(text))


def _field(pattern: str, letter: str, count: int) -> Field:
    if letter in _OUTSIDE:
        what, instead = _OUTSIDE[letter]
        raise _Refused(
            f"the pattern letter {letter!r} ({what}) in {pattern!r} is not in hakiri's "
            "datetime patterns",
            f"{instead}; {SEE}",
        )
    if letter not in RUNS:
        raise _Refused(
            f"{letter!r} is not a datetime pattern letter ({pattern!r})",
            "put literal letters in single quotes, e.g. yyyy-MM-dd'T'HH:mm:ss; " + SEE,
        )
    if count not in RUNS[letter]:
        runs = RUNS[letter]
        allowed = f"{runs[0]} to {runs[-1]}" if len(runs) > 1 else str(runs[0])
        raise _Refused(
            f"{letter * count!r} in {pattern!r}: hakiri takes {allowed} {letter!r} in a row",
            SEE,
        )
    return Field(letter, count)
