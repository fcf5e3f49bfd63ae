"""The batch's files as the engine is given them: as they are, or through a stand-in.

A `Located` file is its path, the name the plan shows, and the link or copy the engine
reads instead when it cannot take the file itself: a plainly named link for a path with a
':' (Hadoop takes what precedes it for a URI scheme) or a glob character (Sail cannot
escape one), and a UTF-8 copy for an encoding the engine does not decode (Sail). They live
in one directory per project and process under `.hakiri/links`, removed when the process
exits; `remove_stale_link_dirs` (`hakiri gc`) removes those of a process that was killed.
Also: the Java charset name an engine that decodes encodings (Apache Spark) is given.
"""

from __future__ import annotations

import atexit
import codecs
import contextlib
import os
import re
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from hakiri.errors import SourceDataError, SourceUnreachable
from hakiri.sources.base import SourceFile
from hakiri.sources.files.inspect import first_line
from hakiri.spark.engines import engine_of_session, support
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import SparkSession


GLOB_CHARS = re.compile(r"([\\\[\]{}*?^])")
# Spark 4 reads these charsets as they are; any other needs spark.sql.legacy.javaCharsets.
_SPARK_CHARSETS = {
    "utf-8": "UTF-8",
    "utf-8-sig": "UTF-8",
    "ascii": "US-ASCII",
    "iso8859-1": "ISO-8859-1",
    "utf-16": "UTF-16",
    "utf-16-le": "UTF-16LE",
    "utf-16-be": "UTF-16BE",
    "utf-32": "UTF-32",
}
# Python codec names Java spells differently (beyond iso8859-N and cpNNNN, handled by rule).
_JAVA_CHARSETS = {
    "mac-roman": "x-MacRoman",
    "shift_jis": "Shift_JIS",
    "utf-32-le": "UTF-32LE",
    "utf-32-be": "UTF-32BE",
}


@dataclass(frozen=True)
class Located:
    path: Path  # absolute
    shown: str  # as the plan names it (SourceFile.path)
    # A plain-named link to `path` that the engine reads instead (`plainly_named`).
    link: Path | None = None

    @property
    def spark_path(self) -> str:
        if self.link is not None:
            return "file://" + self.link.as_posix()
        # Spark takes every path as a Hadoop glob: a '[' or '{' in a file name must mean itself.
        return "file://" + GLOB_CHARS.sub(r"\\\1", self.path.as_posix())

    def is_at(self, local_path: str) -> bool:
        """Is `local_path` (as the engine names what it read) this file?"""
        return local_path in (self.path.as_posix(), self.link and self.link.as_posix())


# Links with plain names, for paths an engine cannot be given as they are: one directory per
# project and process, one link per file (kept for the process: a file read again reuses it).
_LINKS_LOCK = threading.Lock()
_LINKS: dict[Path, Path] = {}
_LINK_DIRS: dict[Path, Path] = {}
_LINK_DIRS_LOCK = threading.Lock()  # taken inside _LINKS_LOCK, never the other way round


def plainly_named(loc: Located, root: Path) -> Located:
    """`loc` read through a link whose path holds no ':' and no glob character (Hadoop takes
    what precedes a ':' for a URI scheme; Sail has no escape for glob characters)."""
    with _LINKS_LOCK:
        link = _LINKS.get(loc.path)
        if link is None:
            link = _link_dir(root) / f"{len(_LINKS)}{_plain_suffixes(loc.path)}"
            try:
                link.symlink_to(loc.path)
            except OSError as exc:
                raise _no_stand_in(loc, "a link to", link, exc) from None
            _LINKS[loc.path] = link
    return Located(loc.path, loc.shown, link)


def _link_dir(root: Path) -> Path:
    """This process's directory of links and copies for the project at `root`, removed when
    the process exits: under the project's `.hakiri/links` (so an engine that sees the
    project sees them too), or the system's temporary directory when the project's own path
    is not plain or not writable."""
    with _LINK_DIRS_LOCK:
        found = _LINK_DIRS.get(root)
        if found is None:
            base: Path | None = root / ".hakiri" / "links"
            if ":" in root.as_posix() or GLOB_CHARS.search(root.as_posix()):
                base = None
            try:
                if base is not None:
                    base.mkdir(parents=True, exist_ok=True)
                found = Path(tempfile.mkdtemp(prefix=f"{os.getpid()}-", dir=base))
            except OSError:
                found = Path(tempfile.mkdtemp(prefix="hakiri-links-"))
            atexit.register(shutil.rmtree, found, True)
            _LINK_DIRS[root] = found
        return found


def remove_stale_link_dirs(project_root: Path, older_than_seconds: float) -> list[Path]:
    """Remove the link directories (`.hakiri/links/<pid>-…`, links and UTF-8 copies) of
    processes that ended without removing them (killed), untouched for `older_than_seconds`;
    the directories removed. A directory whose process still runs is kept."""
    base = Path(os.path.abspath(project_root)) / ".hakiri" / "links"
    removed = []
    for found in sorted(base.glob("*-*")) if base.is_dir() else ():
        pid = found.name.partition("-")[0]
        if not pid.isdigit() or _alive(int(pid)):
            continue
        if time.time() - found.stat().st_mtime < older_than_seconds:
            continue
        shutil.rmtree(found, ignore_errors=True)
        removed.append(found)
    return removed


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _plain_suffixes(path: Path) -> str:
    """The file's extensions that are plain words (an engine picks a compression codec by them)."""
    return "".join(x for x in path.suffixes if re.fullmatch(r"\.[A-Za-z0-9]+", x))


def locate(root: Path, file: SourceFile) -> Located:
    path = Path(os.path.normpath(os.path.join(root, file.path)))
    if not path.is_file():
        raise SourceDataError(
            f"{file.path} does not exist (any more)",
            "restore the file, or run `hakiri apply` again so the plan sees it is gone",
        )
    if ":" in path.as_posix():
        # Hadoop's Path takes what precedes a ':' for a URI scheme; there is no escaping it.
        return plainly_named(Located(path, file.path), root)
    return Located(path, file.path)


def _codec_name(config: FilesConfig) -> str:
    try:
        return codecs.lookup(config.encoding).name
    except LookupError:
        raise SourceDataError(
            f"unknown encoding {config.encoding!r}",
            "set `encoding` in the source config to a codec name such as 'utf-8' or 'latin-1'",
        ) from None


def reads_encoding(spark: SparkSession, config: FilesConfig) -> bool:
    """Can the engine be given the files as they are (UTF-8, or an engine that decodes other
    encodings: Apache Spark)? Otherwise hakiri hands it UTF-8 copies (`utf8_copy`)."""
    utf8 = _SPARK_CHARSETS.get(_codec_name(config)) == "UTF-8"
    return utf8 or support(engine_of_session(spark), "text_encodings").status == "works"


def utf8_copy(loc: Located, encoding: str, copies: list[Path], root: Path) -> Located:
    """`loc` read through a UTF-8 copy of it (line for line, so lines keep their numbers; a
    byte the encoding cannot decode becomes U+FFFD, which `malformed._verdict` names by line)."""
    copy = _link_dir(root) / f"{uuid.uuid4().hex}.utf8{_plain_suffixes(loc.path)}"
    copies.append(copy)  # removed with the read, or here if the copy fails
    try:
        with (
            open(loc.path, encoding=encoding, errors="replace", newline="") as source,
            open(copy, "w", encoding="utf-8", newline="") as target,
        ):
            shutil.copyfileobj(source, target, 1 << 20)  # in blocks, whatever the file's size
    except OSError as exc:
        for made in copies:
            remove_copy(made)
        raise _no_stand_in(loc, "a UTF-8 copy of", copy, exc) from None
    return Located(loc.path, loc.shown, copy)


def _no_stand_in(loc: Located, what: str, at: Path, exc: OSError) -> SourceUnreachable:
    """The engine cannot be handed a link or copy it needs in place of `loc`."""
    return SourceUnreachable(
        f"cannot make {what} {loc.shown} for the engine at {at.parent}: {first_line(exc)}",
        "free space or fix the permissions of that directory (the project's .hakiri/links), or "
        "give the engine a file it can read as it is: UTF-8, a path without ':' or [ ] { } * ?",
    )


def remove_copy(path: Path) -> None:
    with contextlib.suppress(FileNotFoundError):
        path.unlink()


def spark_charset(spark: SparkSession, config: FilesConfig) -> str:
    """The Java charset name for `encoding`, which is a Python codec name."""
    from pyspark.sql import functions as F

    name = _codec_name(config)
    if name in _SPARK_CHARSETS:
        return _SPARK_CHARSETS[name]
    charset = _JAVA_CHARSETS.get(name) or re.sub(r"^cp(125\d)$", r"windows-\1", name)
    charset = re.sub(r"^iso8859-", "ISO-8859-", charset).replace("_", "-")
    # Spark 4 accepts only a handful of charsets unless told to use whatever Java has.
    spark.conf.set("spark.sql.legacy.javaCharsets", "true")
    try:  # asked of the engine: a query of literals, refused while it is planned
        spark.sql("SELECT 1").select(F.encode(F.lit(""), charset)).collect()
    except Exception as exc:
        if "INVALID_PARAMETER_VALUE.CHARSET" not in str(exc):
            raise
        raise SourceDataError(
            f"Spark (Java) has no charset for encoding {config.encoding!r}",
            "convert the files to UTF-8, or set `encoding` to one Java knows (e.g. 'cp1252')",
        ) from None
    return charset
