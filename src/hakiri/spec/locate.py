"""Key path -> line number, for TOML and JSON manifests.

tomllib and json give values but not positions, and every manifest error must
name its file and line. These scanners walk text that already parsed (so they
can assume it is well-formed) and record the line where each key path starts.
A lookup falls back to the longest recorded prefix: an error inside an inline
table points at the line holding that table.
"""

from __future__ import annotations

from collections.abc import Sequence

KeyPath = tuple[str | int, ...]


class LineIndex:
    def __init__(self) -> None:
        self._lines: dict[KeyPath, int] = {}

    def record(self, path: KeyPath, line: int) -> None:
        self._lines.setdefault(path, line)

    def line_of(self, path: Sequence[str | int]) -> int | None:
        key = tuple(path)
        while True:
            if key in self._lines:
                return self._lines[key]
            if not key:
                return None
            key = key[:-1]


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.pos = 0
        self.line = 1
        self.index = LineIndex()

    def peek(self, n: int = 1) -> str:
        return self.text[self.pos : self.pos + n]

    def advance(self, n: int = 1) -> None:
        chunk = self.text[self.pos : self.pos + n]
        self.line += chunk.count("\n")
        self.pos += n

    def at_end(self) -> bool:
        return self.pos >= len(self.text)

    def skip_until(self, stop: str) -> None:
        """Advance to just after the next `stop` (used for the tails of strings)."""
        end = self.text.find(stop, self.pos)
        self.advance((len(self.text) if end < 0 else end + len(stop)) - self.pos)


# ------------------------------------------------------------------- TOML


class _TomlScanner(_Scanner):
    def skip_blank(self, newlines: bool) -> None:
        while not self.at_end():
            ch = self.peek()
            if ch in " \t\r" or (newlines and ch == "\n"):
                self.advance()
            elif ch == "#":
                self.skip_until("\n") if newlines else self._to_eol()
            else:
                return

    def _to_eol(self) -> None:
        end = self.text.find("\n", self.pos)
        self.advance((len(self.text) if end < 0 else end) - self.pos)

    def key(self) -> list[str]:
        parts: list[str] = []
        while True:
            self.skip_blank(newlines=False)
            ch = self.peek()
            if ch in "\"'":
                parts.append(self.string())
            else:
                start = self.pos
                while not self.at_end() and (self.peek().isalnum() or self.peek() in "_-"):
                    self.advance()
                parts.append(self.text[start : self.pos])
            self.skip_blank(newlines=False)
            if self.peek() != ".":
                return parts
            self.advance()

    def string(self) -> str:
        quote = self.peek()
        if self.peek(3) == quote * 3:
            self.advance(3)
            start = self.pos
            self.skip_until(quote * 3)
            return self.text[start : self.pos - 3]
        self.advance()
        out = []
        while not self.at_end() and self.peek() != quote:
            if quote == '"' and self.peek() == "\\":
                out.append(self.peek(2))
                self.advance(2)
                continue
            out.append(self.peek())
            self.advance()
        self.advance()
        return "".join(out)

    def value(self, path: KeyPath) -> None:
        self.index.record(path, self.line)
        ch = self.peek()
        if ch in "\"'":
            self.string()
        elif ch == "[":
            self.advance()
            i = 0
            while True:
                self.skip_blank(newlines=True)
                if self.peek() == "]":
                    self.advance()
                    return
                self.value((*path, i))
                i += 1
                self.skip_blank(newlines=True)
                if self.peek() == ",":
                    self.advance()
        elif ch == "{":
            self.advance()
            while True:
                self.skip_blank(newlines=False)
                if self.peek() == "}":
                    self.advance()
                    return
                keys = self.key()
                self._record_keys(path, keys)
                self.skip_blank(newlines=False)
                self.advance()  # '='
                self.skip_blank(newlines=False)
                self.value((*path, *keys))
                self.skip_blank(newlines=False)
                if self.peek() == ",":
                    self.advance()
        else:
            while not self.at_end() and self.peek() not in ",]}\n#":
                self.advance()

    def _record_keys(self, prefix: KeyPath, keys: list[str]) -> None:
        for depth in range(1, len(keys) + 1):
            self.index.record((*prefix, *keys[:depth]), self.line)

    def document(self) -> LineIndex:
        table: KeyPath = ()
        aot_counts: dict[KeyPath, int] = {}
        while True:
            self.skip_blank(newlines=True)
            if self.at_end():
                return self.index
            if self.peek(2) == "[[":
                self.advance(2)
                path = self._resolve(self.key(), aot_counts)
                self.advance(2)
                aot_counts[path] = aot_counts.get(path, -1) + 1
                table = (*path, aot_counts[path])
                self.index.record(path, self.line)
                self.index.record(table, self.line)
            elif self.peek() == "[":
                self.advance()
                table = self._resolve(self.key(), aot_counts)
                self.advance()
                # `[foo.bar]` defines `foo` too: a problem with `foo` is on this line.
                for depth in range(1, len(table) + 1):
                    self.index.record(table[:depth], self.line)
            else:
                keys = self.key()
                self._record_keys(table, keys)
                self.skip_blank(newlines=False)
                self.advance()  # '='
                self.skip_blank(newlines=False)
                self.value((*table, *keys))

    @staticmethod
    def _resolve(keys: list[str], aot_counts: dict[KeyPath, int]) -> KeyPath:
        # `[pipeline.load]` after `[[pipeline]]` means the latest pipeline element.
        path: KeyPath = ()
        for k in keys:
            path = (*path, k)
            if path in aot_counts:
                path = (*path, aot_counts[path])
        if path and isinstance(path[-1], int) and keys:
            path = path[:-1]
        return path


def index_toml(text: str) -> LineIndex:
    """Line index of a TOML document that tomllib has already accepted. The document itself
    is at line 1: a key missing at its top level is reported there."""
    scanner = _TomlScanner(text)
    scanner.index.record((), 1)
    return scanner.document()


# ------------------------------------------------------------------- JSON


class _JsonScanner(_Scanner):
    def skip_ws(self) -> None:
        while not self.at_end() and self.peek() in " \t\r\n":
            self.advance()

    def string(self) -> str:
        self.advance()
        out = []
        while self.peek() != '"':
            if self.peek() == "\\":
                out.append(self.peek(2))
                self.advance(2)
                continue
            out.append(self.peek())
            self.advance()
        self.advance()
        return "".join(out)

    def value(self, path: KeyPath) -> None:
        self.skip_ws()
        self.index.record(path, self.line)
        ch = self.peek()
        if ch == "{":
            self.advance()
            while True:
                self.skip_ws()
                if self.peek() == "}":
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                key_line = self.line
                key = self.string()
                self.index.record((*path, key), key_line)
                self.skip_ws()
                self.advance()  # ':'
                self.value((*path, key))
        elif ch == "[":
            self.advance()
            i = 0
            while True:
                self.skip_ws()
                if self.peek() == "]":
                    self.advance()
                    return
                if self.peek() == ",":
                    self.advance()
                    continue
                self.value((*path, i))
                i += 1
        elif ch == '"':
            self.string()
        else:
            while not self.at_end() and self.peek() not in ",]} \t\r\n":
                self.advance()


def index_json(text: str) -> LineIndex:
    """Line index of a JSON document that json.loads has already accepted."""
    scanner = _JsonScanner(text)
    scanner.index.record((), 1)
    scanner.value(())
    return scanner.index
