"""Manifest files as they come from a repository: bytes to text, and limits checked before parsing.

What real repositories hold beside good manifests: a stray non-UTF-8 byte, a file an
editor saved as UTF-16, nesting a few thousand levels deep (which tomllib, json and
hakiri's own walkers would recurse into until Python gives up), an integer literal
longer than Python converts. Each becomes a `Problem` with a line, so the loader reports
it like any other manifest error and goes on to the other files.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["MAX_NESTING", "Problem", "decode", "nesting_problem", "parse_limit_problem"]

# hakiri's own manifests nest about eight levels (a pipeline's transforms' expressions);
# sixty-four is far above any real one and far below Python's recursion limit.
MAX_NESTING = 64
_UTF16_BOMS = (b"\xff\xfe", b"\xfe\xff")
_UTF8_BOM = b"\xef\xbb\xbf"
_LONG_INTEGER = re.compile(r"[0-9][0-9_]{4300,}")


@dataclass(frozen=True)
class Problem:
    message: str
    line: int
    hint: str


def decode(data: bytes) -> str | Problem:
    """The file's text (UTF-8; a UTF-8 byte-order mark is dropped), or what is wrong with it."""
    if data.startswith(_UTF16_BOMS):
        return Problem(
            "the file is UTF-16; hakiri reads manifests as UTF-8",
            1,
            "save it as UTF-8 (most editors: 'Save with encoding' -> UTF-8)",
        )
    try:
        return data.removeprefix(_UTF8_BOM).decode("utf-8")
    except UnicodeDecodeError as exc:
        line = data[: exc.start].count(b"\n") + 1
        column = exc.start - (data.rfind(b"\n", 0, exc.start) + 1) + 1
        byte = data[exc.start : exc.start + 1].hex()
        return Problem(
            f"the file is not UTF-8: byte 0x{byte} at line {line}, column {column}",
            line,
            "save it as UTF-8; a Latin-1 or Windows-1252 file shows this for accented letters",
        )


def nesting_problem(text: str, is_json: bool) -> Problem | None:
    """Nesting deeper than MAX_NESTING (arrays, tables, dotted keys and table headers), at the
    first line that goes past it; None when the document is shallow enough to parse."""
    depth = 0
    line = 1
    i, n = 0, len(text)
    at_line_start = True
    while i < n:
        ch = text[i]
        if ch == "\n":
            line += 1
            at_line_start = True
            i += 1
            continue
        if ch in " \t\r":
            i += 1
            continue
        if not is_json and ch == "#":
            end = text.find("\n", i)
            i = n if end < 0 else end
            continue
        if ch in "\"'" and not (is_json and ch == "'"):
            i, line = _skip_string(text, i, line, is_json)
            at_line_start = False
            continue
        if not is_json and at_line_start and depth == 0 and ch == "[":
            # A table header: [a.b.c] or [[a.b]] nests one level per key.
            end = text.find("\n", i)
            header = text[i : n if end < 0 else end]
            if _key_parts(header) > MAX_NESTING:
                return _too_deep(line)
            i = n if end < 0 else end
            continue
        if not is_json and at_line_start and depth == 0:
            # key = value: a dotted key nests one level per part.
            end = text.find("=", i)
            newline = text.find("\n", i)
            if (
                end >= 0
                and (newline < 0 or end < newline)
                and _key_parts(text[i:end]) > MAX_NESTING
            ):
                return _too_deep(line)
        at_line_start = False
        if ch in "[{":
            depth += 1
            if depth > MAX_NESTING:
                return _too_deep(line)
        elif ch in "]}":
            depth = max(0, depth - 1)
        i += 1
    return None


def parse_limit_problem(text: str) -> Problem | None:
    """An integer literal longer than Python converts (4,300 digits), at its line."""
    found = _LONG_INTEGER.search(text)
    if found is None:
        return None
    digits = len(found.group().replace("_", ""))
    return Problem(
        f"an integer literal of {digits:,} digits is longer than hakiri reads (4,300)",
        text.count("\n", 0, found.start()) + 1,
        "write it as a string if it is an identifier, or remove it",
    )


def _too_deep(line: int) -> Problem:
    return Problem(
        f"the document nests more than {MAX_NESTING} levels deep",
        line,
        "hakiri manifests nest a few levels; flatten the arrays or tables here",
    )


def _key_parts(key: str) -> int:
    """How many dotted parts a key (or a [table] header) has, quotes respected."""
    parts, quote = 1, ""
    for ch in key:
        if quote:
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == ".":
            parts += 1
    return parts


def _skip_string(text: str, i: int, line: int, is_json: bool) -> tuple[int, int]:
    """Past the string starting at `i` (basic, literal or multi-line); the line it ends on."""
    quote = text[i]
    if not is_json and text.startswith(quote * 3, i):
        end = text.find(quote * 3, i + 3)
        end = len(text) if end < 0 else end + 3
        return end, line + text.count("\n", i, end)
    j = i + 1
    while j < len(text) and text[j] != quote and text[j] != "\n":
        if text[j] == "\\" and quote == '"':
            j += 1
        j += 1
    return min(j + 1, len(text)), line
