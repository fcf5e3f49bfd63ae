"""Push a context-store table to the bucket, pull it back, and say how far apart they are.

The order is what keeps a reader of the bucket safe (delta-rs, Spark, DuckDB open the
newest version the log lists):

1. every data file the new versions name, in any order, in parallel (a data file no
   commit names yet is invisible);
2. the commits, one version after another, each written only if absent (`If-None-Match:
   *`), with that version's checkpoint after it;
3. the checkpoint pointer `_last_checkpoint` last;
4. the files a local `vacuum` deleted, once they are older than the table's retention.

So at every instant the bucket's newest version is one the local store has, whole. A
sync killed anywhere is resumed by the next: files already there at the same size are
skipped, and a commit already there must hold the same bytes (else the two histories
diverged, and the sync stops without writing). Pull is the same walk the other way.

The exception: a version whose data a local vacuum deleted before it was ever pushed
cannot be made whole in the bucket. Then a checkpoint of the newest version is pushed
ahead of the commits, and readers jump straight to it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from hakiri.destinations.context.sync.bucket import Bucket, RemoteObject
from hakiri.destinations.context.sync.layout import (
    LAST_CHECKPOINT,
    TableFiles,
    commit_name,
    entry_version,
    is_log_path,
    local_files,
    named_data,
)
from hakiri.errors import SyncDiverged, SyncFailed

__all__ = ["TableState", "TableSync", "pull_table", "push_table", "table_state"]

_PARALLEL = 8


@dataclass(frozen=True)
class TableState:
    """`hakiri sync --status`: one table on both sides."""

    table: str
    local_version: int  # -1: not in the local store
    remote_version: int  # -1: not in the bucket
    to_push: int  # files the bucket lacks (data and log)
    to_push_bytes: int

    @property
    def state(self) -> str:
        if self.local_version == self.remote_version:
            return "in sync" if self.to_push == 0 else "files missing in the bucket"
        if self.local_version < 0:
            return "only in the bucket"
        if self.remote_version < 0:
            return "not in the bucket"
        if self.remote_version > self.local_version:
            return "bucket ahead (pull)"
        return f"{self.local_version - self.remote_version} version(s) to push"


@dataclass
class TableSync:
    """What one push or pull of a table did."""

    table: str
    version_before: int  # the receiving side's version before
    version: int  # and after
    files: int = 0
    bytes: int = 0
    deleted: int = 0
    kept: int = 0  # files vacuumed locally, kept in the bucket until the retention passed
    notes: list[str] = field(default_factory=list)


def table_state(bucket: Bucket, store: Path, table: str) -> TableState:
    local = local_files(store / table)
    remote = _sizes(bucket.listing(table))
    behind = local.version > remote.version
    wanted = set(_needed(store / table, local, remote.version)) if behind else set()
    wanted |= set(local.log_entries(remote.version, local.version))
    missing = local.missing_from(remote, wanted)
    return TableState(
        table,
        local.version,
        remote.version,
        len(missing),
        sum(local.sizes[p] for p in missing),
    )


def push_table(
    bucket: Bucket,
    store: Path,
    table: str,
    *,
    retain_hours: float,
    on_file: Callable[[str], None] | None = None,
) -> TableSync:
    """Publish the table's newest local version (and the ones before it the bucket lacks)."""
    where = store / table
    local = local_files(where)
    listing = bucket.listing(table)
    remote = _sizes(listing)
    upto, after = local.version, remote.version
    done = TableSync(table, after, max(after, upto))
    if upto < 0:
        return done
    _check_same_history(bucket, where, table, local, remote)

    # The bucket at our version has its data already: commits go up only after their data.
    needed = _needed(where, local, after) if after < upto else []
    gap = [p for p in needed if p not in local.sizes and p not in remote.sizes]
    data = local.missing_from(remote, needed)
    _transfer(data, lambda p: bucket.upload(table, p, where / p), on_file)
    done.files += len(data)
    done.bytes += sum(local.sizes[p] for p in data)

    entries = local.log_entries(after, upto)
    if gap:
        # Data of a version between the bucket's and ours was vacuumed here unpushed: a
        # checkpoint of the newest version goes first, so readers jump over those versions.
        first = _checkpoint_of(where, local, upto)
        entries = first + [e for e in entries if e not in first]
        done.notes.append(
            f"{len(gap)} file(s) of versions {after + 1}..{upto - 1} were vacuumed here before "
            f"a sync; the bucket skips to version {upto} (time travel to those versions fails)"
        )
    for path in entries:
        done.bytes += _put_entry(bucket, where, table, path, remote)
        done.files += 1
        if on_file is not None:
            on_file(path)
    pointer = where / LAST_CHECKPOINT
    if pointer.is_file() and _pointer_version(pointer) <= upto:
        content = pointer.read_bytes()
        if remote.sizes.get(LAST_CHECKPOINT) != len(content) or entries:
            bucket.replace(table, LAST_CHECKPOINT, content)
    _mirror_vacuum(bucket, table, local, listing, retain_hours, done)
    return done


def pull_table(
    bucket: Bucket, store: Path, table: str, *, on_file: Callable[[str], None] | None = None
) -> TableSync:
    """Bring the bucket's newest version of a table into the local store."""
    where = store / table
    local = local_files(where)
    remote = _sizes(bucket.listing(table))
    upto, after = remote.version, local.version
    done = TableSync(table, after, max(after, upto))
    if upto < 0:
        return done
    if after > upto:
        raise SyncDiverged(
            f"the local `{table}` is at version {after}, newer than the bucket's {upto}",
            "push it first (`hakiri sync`); pull only brings a store up to the bucket",
        )
    _check_same_history(bucket, where, table, local, remote)
    data = remote.missing_from(local, remote.data())
    _transfer(data, lambda p: bucket.download(table, p, where / p), on_file)
    done.files += len(data)
    done.bytes += sum(remote.sizes[p] for p in data)
    for path in remote.log_entries(after, upto):
        target = where / path
        if target.exists():
            continue
        content = bucket.read(table, path)
        if content is None:
            raise SyncFailed(
                f"{table}/{path} vanished from the bucket during the pull", "pull again"
            )
        _write_new(target, content)
        done.files += 1
        done.bytes += len(content)
        if on_file is not None:
            on_file(path)
    if LAST_CHECKPOINT in remote.sizes:
        content = bucket.read(table, LAST_CHECKPOINT)
        if content is not None:
            _write_replacing(where / LAST_CHECKPOINT, content)
    return done


# -- the pieces ---------------------------------------------------------------------------


def _sizes(listing: Mapping[str, RemoteObject]) -> TableFiles:
    return TableFiles({path: found.size for path, found in listing.items()})


def _needed(where: Path, local: TableFiles, after: int) -> list[str]:
    """The data files a reader of the bucket needs for the versions after `after`: those the
    newest version reads, those each newer commit added (if still here), deletion vectors
    and checkpoint sidecars."""
    from deltalake import DeltaTable

    found: dict[str, None] = {}
    try:
        actions = DeltaTable(str(where), version=local.version).get_add_actions(flatten=True)
    except Exception as exc:  # a broken local table: nothing of it is pushed
        raise SyncFailed(
            f"cannot read the local table at {where}: {' '.join(str(exc).split())[:300]}",
            "`hakiri context tables` says what is wrong with it",
        ) from None
    for path in actions.column("path").to_pylist():
        found[path] = None
    missing = [p for p in found if p not in local.sizes]
    if missing:
        raise SyncFailed(
            f"the local table at {where} lacks {len(missing)} file(s) its version "
            f"{local.version} reads, e.g. {missing[0]}",
            "the store was damaged outside hakiri; restore it (`hakiri sync pull` on a new "
            "directory) before syncing",
        )
    for version in local.commits:
        if version > after:
            for path in named_data((where / commit_name(version)).read_bytes()):
                found[path] = None
    for path in local.data():
        name = path.rsplit("/", 1)[-1]
        if name.startswith("deletion_vector_") or path.startswith("_delta_log/_sidecars/"):
            found[path] = None
    return list(found)


def _check_same_history(
    bucket: Bucket, where: Path, table: str, local: TableFiles, remote: TableFiles
) -> None:
    """The newer side must extend the older one's history: the commit both have last holds
    the same bytes on both sides."""
    shared = min(local.version, remote.version)
    if shared < 0:
        return
    name = commit_name(shared)
    if name not in local.sizes or name not in remote.sizes:
        return  # one side pruned its log past it; the checkpoints decide, not us
    theirs = bucket.read(table, name)
    if theirs is not None and theirs != (where / name).read_bytes():
        raise SyncDiverged(
            f"`{table}` has a different version {shared} in the bucket than here: the two "
            "histories diverged (another store syncs to this bucket, or the table was "
            "recreated here)",
            "give each store its own bucket or prefix; to start the bucket's copy over, "
            f"delete {table}/ from {bucket.url} and sync again",
        )


def _transfer(
    paths: list[str], move: Callable[[str], None], on_file: Callable[[str], None] | None
) -> None:
    if not paths:
        return
    with ThreadPoolExecutor(max_workers=min(_PARALLEL, len(paths))) as pool:
        for path, _ in zip(paths, pool.map(move, paths), strict=True):
            if on_file is not None:
                on_file(path)


def _put_entry(bucket: Bucket, where: Path, table: str, path: str, remote: TableFiles) -> int:
    """Put one log entry in the bucket; its size."""
    content = (where / path).read_bytes()
    version, kind = entry_version(path) or (-1, 1)
    if kind == 0:  # a commit: written only if absent, so no two writers both take a version
        if bucket.create(table, path, content) or bucket.read(table, path) == content:
            return len(content)
        raise SyncDiverged(
            f"`{table}` version {version} in the bucket differs from the local one: another "
            "store wrote to this bucket meanwhile",
            "give each store its own bucket or prefix",
        )
    if remote.sizes.get(path) != len(content):  # a checkpoint or checksum not there whole
        bucket.replace(table, path, content)
    return len(content)


def _checkpoint_of(where: Path, local: TableFiles, version: int) -> list[str]:
    """The local checkpoint files of `version`, written now if there is none."""
    mine = [p for p in local.log_entries(version - 1, version) if entry_version(p) == (version, 1)]
    if not any(".checkpoint." in p for p in mine):
        from deltalake import DeltaTable

        DeltaTable(str(where), version=version).create_checkpoint()
        local.sizes.update(local_files(where).sizes)
        mine = [
            p for p in local.log_entries(version - 1, version) if entry_version(p) == (version, 1)
        ]
    return [p for p in mine if ".checkpoint." in p]


def _pointer_version(pointer: Path) -> int:
    import json

    try:
        return int(json.loads(pointer.read_text())["version"])
    except (OSError, ValueError, KeyError, TypeError):
        return 1 << 62  # unreadable: never pushed


def _mirror_vacuum(
    bucket: Bucket,
    table: str,
    local: TableFiles,
    listing: Mapping[str, RemoteObject],
    retain_hours: float,
    done: TableSync,
) -> None:
    """Delete the bucket's data files a local vacuum removed, once older than the retention
    (readers of older versions of the bucket may still read them until then)."""
    cutoff = datetime.now(UTC) - timedelta(hours=retain_hours)
    gone = [p for p in listing if p not in local.sizes and not is_log_path(p)]
    old = [p for p in gone if listing[p].last_modified <= cutoff]
    bucket.delete(table, old)
    done.deleted += len(old)
    done.kept += len(gone) - len(old)


def _write_new(target: Path, content: bytes) -> None:
    """A log entry, whole, at a name that must not exist yet."""
    target.parent.mkdir(parents=True, exist_ok=True)
    scratch = target.with_name(f".{target.name}.sync.tmp")
    scratch.write_bytes(content)
    try:
        os.link(scratch, target)  # fails if the name was taken meanwhile
    except FileExistsError:
        if target.read_bytes() != content:
            raise SyncDiverged(
                f"{target} was written by another writer during the pull",
                "pull again once the other writer is done",
            ) from None
    finally:
        scratch.unlink(missing_ok=True)


def _write_replacing(target: Path, content: bytes) -> None:
    scratch = target.with_name(f".{target.name}.sync.tmp")
    scratch.write_bytes(content)
    os.replace(scratch, target)
