"""A files source: inspect it without a JVM, and read a batch of it with Spark.

Inspection (`inspect_files`, for `plan`) matches the glob, hashes every file and
reads only the header. Columns come from the declared schema, or from the least
data that tells them: the first CSV record, the keys of the first JSON records, a
Parquet footer. Nothing there reads whole files except to hash them.

Reading (`read_files`, for `apply`) turns exactly the files of one batch into a
DataFrame with the SparkSession it is given, applying `on_malformed`.
"""

from __future__ import annotations

import codecs
import csv
import glob
import hashlib
import json
import os
import time
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from hakiri.errors import SourceUnreachable
from hakiri.sources.base import SourceColumn, SourceFile, SourceObservation, TypeSample
from hakiri.sources.files.csv_sample import sample_csv_types
from hakiri.spec.pipeline import FilesConfig, TableSpec

__all__ = [
    "BOM",
    "FileStamp",
    "csv_names",
    "csv_rows",
    "estimate_records",
    "first_line",
    "has_records",
    "hash_file",
    "inspect_files",
    "json_keys",
    "open_text",
    "remembered_hash",
    "skip_separators",
    "skip_whitespace",
]

_BLOCK = 1 << 20  # hash in 1 MiB blocks: constant memory whatever the file size
_JSON_SAMPLE = 100  # JSON records whose keys make up the inferred columns
_JSON_CHUNK = 1 << 16
BOM = "\ufeff"


def hash_file(path: Path | str) -> str:
    """'sha256:<hex>' of the file's bytes: the batch id of a file batch."""
    return _hash_and_size(Path(path))[0]


# A file modified this close before it was stat'ed may change again within the same tick of
# the file system's clock, keeping its stat: such a file is hashed again instead (git's
# "racily clean" rule).
_RACY_NS = 2_000_000_000


@dataclass(frozen=True)
class FileStamp:
    """What stat says of a file when its hash was taken; equal stamps, same bytes (unless
    the file was modified racily close to the stat)."""

    size: int
    mtime_ns: int
    ctime_ns: int
    inode: int
    taken_ns: int

    @classmethod
    def of(cls, path: Path) -> FileStamp | None:
        try:
            st = path.stat()
        except FileNotFoundError:
            return None
        return cls(st.st_size, st.st_mtime_ns, st.st_ctime_ns, st.st_ino, time.time_ns())

    def same_file(self, other: FileStamp | None) -> bool:
        if other is None:
            return False
        racy = max(self.mtime_ns, self.ctime_ns) >= self.taken_ns - _RACY_NS
        mine = (self.size, self.mtime_ns, self.ctime_ns, self.inode)
        return not racy and mine == (other.size, other.mtime_ns, other.ctime_ns, other.inode)


# Hashes this process took, by absolute path, with the stamp the file had then: a plan and
# the apply that follows it in the same process hash each file once.
_REMEMBERED: dict[str, tuple[FileStamp, str]] = {}


def remembered_hash(path: Path, stamp: FileStamp) -> str | None:
    """The hash this process took of `path` when it had `stamp`, if the file still has it."""
    known = _REMEMBERED.get(str(path))
    return known[1] if known is not None and known[0].same_file(stamp) else None


def inspect_files(project_root: Path, config: FilesConfig, table: TableSpec) -> SourceObservation:
    """Every file the table's glob matches (sorted, hashed) and the columns, as far as a header tells them."""
    pattern = table.path or config.path
    root = Path(os.path.abspath(project_root))
    matches = _match(root, pattern)
    files = tuple(_observe_file(absolute, shown) for absolute, shown in matches)
    declared = _declared_columns(config)
    if not files:
        return SourceObservation(
            table=table.name,
            columns=declared,
            notes=(f"glob {pattern!r} matched no file",),
        )
    if declared is not None:
        return SourceObservation(table=table.name, columns=declared, files=files)
    columns, notes = _infer_columns(config, matches)
    sample = None
    if config.format == "csv" and columns is not None:
        sample = _sample_types(config, matches, [c.name for c in columns])
    return SourceObservation(
        table=table.name, columns=columns, files=files, notes=notes, sample=sample
    )


# ---------------------------------------------------------------- matching and hashing


def _match(root: Path, pattern: str) -> list[tuple[Path, str]]:
    """(absolute path, path as shown) of every regular file the glob matches, sorted by the shown path."""
    found: dict[str, Path] = {}
    # root_dir, not root joined into the pattern: a '[' or '*' in the project's own path is no wildcard.
    for match in glob.iglob(pattern, root_dir=root, recursive=True):
        path = Path(os.path.normpath(os.path.join(root, match)))
        if path.is_file():
            found.setdefault(_shown(root, path), path)
    return [(found[shown], shown) for shown in sorted(found)]


def _shown(root: Path, path: Path) -> str:
    """'/'-separated path relative to the project, or absolute when the file lies outside it."""
    try:
        return path.relative_to(root).as_posix()
    except ValueError:
        return path.as_posix()


def _observe_file(path: Path, shown: str) -> SourceFile:
    try:
        before = FileStamp.of(path)
        digest, size = _hash_and_size(path)
    except OSError as exc:
        raise _unreadable(shown, exc) from None
    if before is not None and before.same_file(FileStamp.of(path)):
        _REMEMBERED[str(path)] = (before, digest)
    return SourceFile(path=shown, size=size, content_hash=digest)


def _hash_and_size(path: Path) -> tuple[str, int]:
    # The size is what was hashed, not a separate stat(): both describe the same bytes.
    digest = hashlib.sha256()
    size = 0
    buffer = bytearray(_BLOCK)
    view = memoryview(buffer)
    with open(path, "rb", buffering=0) as stream:
        while read := stream.readinto(buffer):
            digest.update(view[:read])
            size += read
    return f"sha256:{digest.hexdigest()}", size


# ---------------------------------------------------------------- columns


def _declared_columns(config: FilesConfig) -> tuple[SourceColumn, ...] | None:
    if config.columns is None:
        return None
    return tuple(SourceColumn(name, type_) for name, type_ in config.columns.items())


def _infer_columns(
    config: FilesConfig, matches: list[tuple[Path, str]]
) -> tuple[tuple[SourceColumn, ...] | None, tuple[str, ...]]:
    if config.format == "parquet":
        path, shown = matches[0]
        return _parquet_columns(path, shown), ()
    reader = _csv_header if config.format == "csv" else json_keys
    names = reader(config, matches)
    if names is None:
        return None, (f"no {config.format} record in the matched files to take column names from",)
    return tuple(SourceColumn(name) for name in names), ()


def _sample_types(
    config: FilesConfig, matches: list[tuple[Path, str]], names: list[str]
) -> TypeSample | None:
    """The types apply will infer, guessed from the first records of the matched files."""

    def records() -> Iterator[list[str]]:
        for path, shown in matches:
            with open_text(config, path, shown) as stream:
                rows = csv_rows(config, stream)
                if config.header:
                    next(rows, None)
                yield from rows

    try:
        return sample_csv_types(config, names, records())
    except (OSError, UnicodeError, csv.Error, SourceUnreachable):
        return None  # the read at apply says what is wrong, by file and line


def _csv_header(config: FilesConfig, matches: list[tuple[Path, str]]) -> list[str] | None:
    # An empty first file says nothing about the columns; the next one may.
    for path, shown in matches:
        names = csv_names(config, path, shown)
        if names is not None:
            return names
    return None


def open_text(config: FilesConfig, path: Path, shown: str) -> IO[str]:
    try:
        codecs.lookup(config.encoding)
    except LookupError:
        raise SourceUnreachable(
            f"cannot read {shown}: unknown encoding {config.encoding!r}",
            "set `encoding` in the source config to a Python codec name such as 'utf-8' or 'latin-1'",
        ) from None
    try:
        return open(path, encoding=config.encoding, newline="")
    except OSError as exc:
        raise _unreadable(shown, exc) from None


def csv_rows(config: FilesConfig, lines: Iterable[str]) -> Iterator[list[str]]:
    """The non-blank records of CSV text (a stream, or any lines) as the source config reads
    them, the header too: its `delimiter`, `quote`, `escape` and `comment`, as Spark reads them.

    Spark drops a line starting with `comment` before it parses any quote, so this does too.
    One difference remains: Python honours `escape` outside quotes as well, where Spark keeps
    it as data; it matters only to a file that escapes a delimiter in an unquoted field.
    """
    if config.comment is not None:
        mark = config.comment
        lines = (line for line in lines if not line.removeprefix(BOM).startswith(mark))
    reader = csv.reader(lines, **csv_dialect(config))
    return (row for row in reader if row)


def csv_dialect(config: FilesConfig) -> dict[str, Any]:
    if config.quote == "":
        return {"delimiter": config.delimiter, "quoting": csv.QUOTE_NONE}
    if config.escape == config.quote:  # RFC 4180: a quote inside quotes is doubled
        return {"delimiter": config.delimiter, "quotechar": config.quote, "doublequote": True}
    return {
        "delimiter": config.delimiter,
        "quotechar": config.quote,
        "escapechar": config.escape,
        "doublequote": False,
    }


def csv_names(config: FilesConfig, path: Path, shown: str) -> list[str] | None:
    with open_text(config, path, shown) as stream:
        try:
            first = next(csv_rows(config, stream), None)
        except (OSError, UnicodeError, csv.Error) as exc:
            raise _unreadable(shown, exc, config) from None
    if first is None:
        return None
    first[0] = first[0].removeprefix(BOM)
    if not config.header:
        if config.column_names is not None:
            return list(config.column_names)
        return [f"_c{i}" for i in range(len(first))]
    return _safe_header(first)


def has_records(config: FilesConfig, path: Path, shown: str) -> bool:
    """Does the file hold at least one data record? Reads only up to the first one.

    A CSV file with a header and nothing under it, a JSON array `[]`, a JSON Lines file of
    blank lines and a Parquet file of zero rows hold none: such a file carries no schema
    evidence (DESIGN: an empty export is a day with no data, not a change of types).
    A record that turns out malformed still counts: it is data, and the read judges it.
    """
    if config.format == "parquet":
        import pyarrow as pa  # type: ignore[import-untyped]
        import pyarrow.parquet as pq  # type: ignore[import-untyped]

        try:
            return bool(pq.read_metadata(path).num_rows)
        except (OSError, pa.ArrowException) as exc:
            raise _unreadable(shown, exc) from None
    with open_text(config, path, shown) as stream:
        try:
            if config.format == "csv":
                rows = csv_rows(config, stream)
                if config.header:
                    next(rows, None)
                return next(rows, None) is not None
            head = skip_whitespace(stream)
            if config.format == "json" and head.startswith("["):
                return _after_bracket(stream, head) not in ("]", "")
            return bool(head)
        except (OSError, UnicodeError, csv.Error) as exc:
            raise _unreadable(shown, exc, config) from None


def _after_bracket(stream: IO[str], head: str) -> str:
    """The first non-blank character after a JSON array's opening '[' ('' at the end of the file)."""
    text = head[1:].lstrip(" \t\r\n")
    while not text:
        chunk = stream.read(_JSON_CHUNK)
        if not chunk:
            return ""
        text = chunk.lstrip(" \t\r\n")
    return text[0]


def _safe_header(names: list[str]) -> list[str]:
    """Spark's CSV header rules: blank names become _c<i>, case-insensitive duplicates get their index appended."""
    counts = Counter(n.lower() for n in names if n)
    duplicates = {n for n, count in counts.items() if count > 1}
    return [
        f"_c{i}" if not name else f"{name}{i}" if name.lower() in duplicates else name
        for i, name in enumerate(names)
    ]


def json_keys(config: FilesConfig, matches: list[tuple[Path, str]]) -> list[str] | None:
    """Union of the top-level keys of the first records, in first-seen order."""
    keys: dict[str, None] = {}
    seen = 0
    for path, shown in matches:
        for record in _json_records(config, path, shown):
            keys.update(dict.fromkeys(record))
            seen += 1
            if seen >= _JSON_SAMPLE:
                return list(keys)
    return list(keys) if seen else None


def _json_records(config: FilesConfig, path: Path, shown: str) -> Iterator[dict[str, Any]]:
    with open_text(config, path, shown) as stream:
        try:
            if config.format == "json":
                head = skip_whitespace(stream)
                if head.startswith("["):
                    yield from _array_records(config, stream, head, shown)
                    return
                stream.seek(0)
            yield from _line_records(config, stream, shown)
        except (OSError, UnicodeError) as exc:
            raise _unreadable(shown, exc, config) from None


def skip_whitespace(stream: IO[str]) -> str:
    """Read up to the first non-blank character (a BOM counts as blank); return the text from there on."""
    while chunk := stream.read(_JSON_CHUNK):
        text = chunk.lstrip(BOM + " \t\r\n")
        if text:
            return text
    return ""


def _line_records(config: FilesConfig, stream: IO[str], shown: str) -> Iterator[dict[str, Any]]:
    for number, text in enumerate(stream, 1):
        line = text.removeprefix(BOM) if number == 1 else text
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            if config.on_malformed == "drop":
                continue
            raise _malformed(shown, f"line {number}: {exc.msg}") from None
        if isinstance(record, dict):
            yield record
        elif config.on_malformed != "drop":
            raise _malformed(shown, f"line {number} is not a JSON object")


def _array_records(
    config: FilesConfig, stream: IO[str], head: str, shown: str
) -> Iterator[dict[str, Any]]:
    """Objects of a top-level JSON array, decoded one at a time so a large file is never read whole."""
    decoder = json.JSONDecoder()
    buffer, position, index, done = head, 1, 0, False
    while True:
        while True:
            position = skip_separators(buffer, position, first=index == 0)
            if position < len(buffer) or done:
                break
            buffer, position, done = _more(stream, buffer, position)
        if position >= len(buffer):
            raise _malformed(shown, "the JSON array is not closed")
        if buffer[position] == "]":
            return
        try:
            record, end = decoder.raw_decode(buffer, position)
        except json.JSONDecodeError as exc:
            if not done:
                buffer, position, done = _more(stream, buffer, position)
                continue
            raise _malformed(shown, f"element {index + 1} of the JSON array: {exc.msg}") from None
        if end == len(buffer) and not done:
            # A number or literal may continue in the next chunk; decode again with more text.
            buffer, position, done = _more(stream, buffer, position)
            continue
        index += 1
        position = end
        if isinstance(record, dict):
            yield record
        elif config.on_malformed != "drop":
            raise _malformed(shown, f"element {index} of the JSON array is not an object")


def skip_separators(buffer: str, position: int, *, first: bool) -> int:
    # Commas between elements are not validated strictly: this reads column names, not data.
    while position < len(buffer) and (
        buffer[position] in " \t\r\n" or (buffer[position] == "," and not first)
    ):
        position += 1
    return position


def _more(stream: IO[str], buffer: str, position: int) -> tuple[str, int, bool]:
    # Read at least as much as is pending, so re-decoding a large element stays linear overall.
    chunk = stream.read(max(_JSON_CHUNK, len(buffer) - position))
    return buffer[position:] + chunk, 0, not chunk


def _parquet_columns(path: Path, shown: str) -> tuple[SourceColumn, ...]:
    import pyarrow as pa  # type: ignore[import-untyped]
    import pyarrow.parquet as pq  # type: ignore[import-untyped]

    try:
        schema = pq.read_schema(path)
    except (OSError, pa.ArrowException) as exc:
        raise _unreadable(shown, exc) from None
    return tuple(SourceColumn(field.name, str(field.type)) for field in schema)


_COMPRESSED = frozenset({".gz", ".bz2", ".xz", ".zst", ".lz4", ".snappy", ".deflate", ".zip"})


def estimate_records(config: FilesConfig, paths: Iterable[Path]) -> int | None:
    """About how many records `paths` hold, for a progress display: exact for Parquet (its
    footer), else the lines in each file's first and last MiB scaled to its size (a quoted newline
    inside a CSV value counts as a record); None for JSON arrays, compressed files, or a file
    that cannot be read."""
    total = 0
    try:
        for path in paths:
            if config.format == "parquet":
                import pyarrow.parquet as pq  # type: ignore[import-untyped]

                total += pq.read_metadata(path).num_rows
                continue
            if config.format not in ("csv", "jsonl") or path.suffix.lower() in _COMPRESSED:
                return None
            size = path.stat().st_size
            with open(path, "rb") as stream:
                sample = stream.read(_BLOCK)
                if size > 2 * _BLOCK:  # the end too: ids and dates grow longer down a file
                    stream.seek(size - _BLOCK)
                    sample += stream.read(_BLOCK)
            lines = sample.count(b"\n") + (len(sample) == size and not sample.endswith(b"\n"))
            if len(sample) < size:
                lines = round(size * lines / len(sample))
            total += max(lines - (config.format == "csv" and config.header), 0)
    except Exception:  # a display's estimate: never a reason to fail (pyarrow's errors too)
        return None
    return total


# ---------------------------------------------------------------- errors


def first_line(exc: BaseException) -> str:
    text = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
    return (text.strip().splitlines() or [type(exc).__name__])[0]


def _unreadable(
    shown: str, exc: BaseException, config: FilesConfig | None = None
) -> SourceUnreachable:
    if isinstance(exc, UnicodeError) and config is not None:
        hint = f"the file is not valid {config.encoding}; set `encoding` in the source config to the file's encoding"
    elif isinstance(exc, OSError):
        hint = "check that the file exists and that hakiri may read it"
    else:
        hint = "check the file's format against `format` (and `delimiter`, `encoding`) in the source config"
    return SourceUnreachable(f"cannot read {shown}: {first_line(exc)}", hint)


def _malformed(shown: str, what: str) -> SourceUnreachable:
    return SourceUnreachable(
        f"cannot read {shown}: {what}",
        "fix the file, or set `on_malformed = 'drop'` in the source config to skip bad records",
    )


def json_array_files(root: Path, config: FilesConfig, files: Sequence[SourceFile]) -> list[str]:
    """The files (of `files`, as listed) whose text is one JSON array, from a peek at each
    one's first character: what an engine that reads JSON Lines only refuses (plan says so)."""
    if config.format != "json":
        return []
    found = []
    for f in files:
        with open_text(config, root / f.path, f.path) as stream:
            try:
                head = skip_whitespace(stream)
            except UnicodeError:
                continue  # read as lines; the bad bytes are reported with their line
        if head.startswith("["):
            found.append(f.path)
    return found
