"""What a Delta table's files are, by name: data, log entries of a version, the pointer.

A table's files, as paths relative to the table's directory (posix, never percent-encoded):

- the **commit** of version N, `_delta_log/<N:020>.json`, and what belongs to it: its
  checkpoint(s) `_delta_log/<N:020>.checkpoint[.…].parquet|json` and `<N:020>.crc`;
- the **checkpoint pointer** `_delta_log/_last_checkpoint`, which readers use as a hint;
- **data**: everything else a version names (parquet files, deletion vectors, change data,
  checkpoint sidecars), which must be in place before the commit that names it.

Anything else in `_delta_log/` (a writer's temporary files) belongs to no version, and
hidden files (Hadoop's `.crc` checksums, a transfer's temporary file) are nobody's: neither
is ever copied.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote

__all__ = [
    "LAST_CHECKPOINT",
    "LOG_DIR",
    "TableFiles",
    "commit_name",
    "entry_version",
    "is_log_path",
    "local_files",
    "named_data",
]

LOG_DIR = "_delta_log"
LAST_CHECKPOINT = f"{LOG_DIR}/_last_checkpoint"
_SIDECARS = f"{LOG_DIR}/_sidecars/"
_COMMIT = re.compile(r"^_delta_log/(\d{20})\.json$")
_OF_VERSION = re.compile(
    r"^_delta_log/(\d{20})\.(checkpoint\.[^/]+\.(parquet|json)|checkpoint\.parquet|crc)$"
)


def commit_name(version: int) -> str:
    return f"{LOG_DIR}/{version:020d}.json"


def is_log_path(path: str) -> bool:
    """A file of the log itself (not a sidecar, which is data a checkpoint names)."""
    return path.startswith(f"{LOG_DIR}/") and not path.startswith(_SIDECARS)


def entry_version(path: str) -> tuple[int, int] | None:
    """(version, 0) for a commit, (version, 1) for a checkpoint or checksum of that version,
    None for anything else: the order a reader may see them in."""
    match = _COMMIT.match(path)
    if match:
        return int(match.group(1)), 0
    match = _OF_VERSION.match(path)
    if match:
        return int(match.group(1)), 1
    return None


@dataclass
class TableFiles:
    """One side's files of a table: path -> size, and the log entries by version."""

    sizes: dict[str, int] = field(default_factory=dict)

    @property
    def commits(self) -> list[int]:
        """The versions whose commit is here."""
        entries = (entry_version(p) for p in self.sizes)
        return sorted(e[0] for e in entries if e is not None and e[1] == 0)

    @property
    def version(self) -> int:
        """The newest version a reader of these files sees (-1: no table yet): the newest
        commit, or a newer checkpoint whose commit is not there (a pruned log)."""
        versions = [e[0] for p in self.sizes if (e := entry_version(p)) is not None]
        return max(versions, default=-1)

    def log_entries(self, after: int, upto: int) -> list[str]:
        """The log entries of versions after..upto, in the order a reader may see them."""
        found = [(e, p) for p in self.sizes if (e := entry_version(p)) and after < e[0] <= upto]
        return [p for _, p in sorted(found)]

    def data(self) -> Iterator[str]:
        return (p for p in self.sizes if not is_log_path(p))

    def missing_from(self, other: TableFiles, paths: Iterable[str]) -> list[str]:
        """Those of `paths` (ours) that `other` lacks or holds at another size."""
        return sorted(p for p in paths if p in self.sizes and other.sizes.get(p) != self.sizes[p])


def local_files(table: Path) -> TableFiles:
    """Every file under a local table's directory, by relative path; temporary files of a
    writer in the log are left out (they belong to no version)."""
    sizes = {}
    if table.is_dir():
        for path in table.rglob("*"):
            if not path.is_file() or path.name.startswith("."):
                continue  # hidden: Hadoop's .crc files, a transfer's temporary file
            relative = path.relative_to(table).as_posix()
            if (
                is_log_path(relative)
                and relative != LAST_CHECKPOINT
                and not entry_version(relative)
            ):
                continue
            sizes[relative] = path.stat().st_size
    return TableFiles(sizes)


def named_data(commit: bytes) -> list[str]:
    """The data files one commit adds (`add`, `cdc`, and the deletion vectors stored beside
    the table), as relative paths."""
    found = []
    for line in commit.splitlines():
        if not line.strip():
            continue
        action = json.loads(line)
        for kind in ("add", "cdc"):
            entry = action.get(kind)
            if not entry:
                continue
            path = entry.get("path", "")
            if "://" not in path:  # an absolute URI (a shallow clone) is not ours to copy
                found.append(unquote(path))
            vector = entry.get("deletionVector") or {}
            if vector.get("storageType") == "p" and "://" not in vector.get("pathOrInlineDv", ""):
                found.append(unquote(vector["pathOrInlineDv"]))
    return found
