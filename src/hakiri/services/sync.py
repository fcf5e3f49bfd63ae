"""`hakiri sync [--status] | sync pull`: the context store and its `[sync]` bucket.

Push, pull and status walk the store's tables one by one (destinations.context.sync says
in which order the files of one table move, and why a reader of the bucket is always
safe). One sync of a store runs at a time on a machine (a lock file in the store), so an
apply's sync and a hand-run one never interleave.

After an apply that changed the store, `[sync] after_apply` (on by default) syncs too. A
load is committed before its sync begins, so a failed sync never fails it: the command
prints a warning, the catalog keeps an alert (`hakiri alerts`, serve's API), and the next
sync, by hand or after the next apply, picks up where this one stopped.
"""

from __future__ import annotations

import fcntl
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from hakiri.destinations.context.inspect import list_tables, retention_hours
from hakiri.destinations.context.sync.bucket import Bucket
from hakiri.destinations.context.sync.tables import (
    TableState,
    TableSync,
    pull_table,
    push_table,
    table_state,
)
from hakiri.errors import HakiriError, SyncFailed
from hakiri.spec.loader import Project, load_project
from hakiri.spec.sync import SyncSettings

__all__ = [
    "SyncAttempt",
    "SyncReport",
    "project_sync_status",
    "pull_project",
    "sync_after_apply",
    "sync_project",
]

_LOCK = "_sync/lock"


@dataclass
class SyncReport:
    bucket: str
    store: str
    tables: list[TableSync] = field(default_factory=list)
    seconds: float = 0.0


def sync_project(
    root: Path,
    env: Mapping[str, str] | None = None,
    *,
    retain_hours: float | None = None,
    on_file: Callable[[str], None] | None = None,
) -> SyncReport:
    """Push every table of the project's context store that the bucket lacks a part of.
    `retain_hours`: mirror vacuum's deletions older than this, instead of each table's
    own retention."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    return push_store(project, env, retain_hours=retain_hours, on_file=on_file)


def push_store(
    project: Project,
    env: Mapping[str, str],
    *,
    retain_hours: float | None = None,
    on_file: Callable[[str], None] | None = None,
) -> SyncReport:
    settings, store = _settings(project), _store(project)
    bucket = Bucket(settings, env)
    started = time.monotonic()
    report = SyncReport(settings.bucket, str(store))
    with _one_sync_at_a_time(store):
        for table in _published(store):
            keep = retain_hours if retain_hours is not None else _retention(store / table)
            report.tables.append(
                push_table(bucket, store, table, retain_hours=keep, on_file=_moved(on_file))
            )
    report.seconds = time.monotonic() - started
    return report


def project_sync_status(root: Path, env: Mapping[str, str] | None = None) -> dict:
    """Per table, the local and the bucket's versions and what a sync would push."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    settings, store = _settings(project), _store(project)
    bucket = Bucket(settings, env)
    names = sorted(set(_published(store)) | set(_bucket_tables(bucket)))
    states: list[TableState] = [table_state(bucket, store, name) for name in names]
    return {
        "bucket": settings.bucket,
        "endpoint": bucket.endpoint,
        "store": str(store),
        "tables": [
            {
                "table": s.table,
                "local_version": s.local_version,
                "remote_version": s.remote_version,
                "files_to_push": s.to_push,
                "bytes_to_push": s.to_push_bytes,
                "state": s.state,
            }
            for s in states
        ],
    }


def pull_project(
    root: Path,
    env: Mapping[str, str] | None = None,
    *,
    into: Path | None = None,
    tables: Sequence[str] = (),
    on_file: Callable[[str], None] | None = None,
) -> SyncReport:
    """Bring every table of the bucket (or those named) into the store: `into`, else the
    project's `[context] path`."""
    env = os.environ if env is None else env
    project = load_project(root, env)
    settings = _settings(project)
    store = (into if into is not None else _store(project)).resolve()
    bucket = Bucket(settings, env)
    started = time.monotonic()
    report = SyncReport(settings.bucket, str(store))
    names = list(tables) or _bucket_tables(bucket)
    store.mkdir(parents=True, exist_ok=True)
    with _one_sync_at_a_time(store):
        for name in names:
            report.tables.append(pull_table(bucket, store, name, on_file=_moved(on_file)))
    report.seconds = time.monotonic() - started
    return report


@dataclass(frozen=True)
class SyncAttempt:
    ok: bool
    message: str  # what to tell: where it was published, or why not
    moved: bool = False  # some file was pushed or deleted


def sync_after_apply(
    project: Project, env: Mapping[str, str], *, alert: bool = True
) -> SyncAttempt:
    """Publish the store after loads committed to it. Never raises: a failure is alerted in
    the catalog (unless `alert` is off: serve alerts once per run of failures) and comes back
    as the warning to print."""
    settings = _settings(project)
    try:
        report = push_store(project, env)
    except HakiriError as exc:
        message = f"sync to {settings.bucket} failed; the load is committed: {exc.reason}"
        if alert:
            _alert(project, env, message)
        hint = f" ({exc.hint}); `hakiri sync` retries" if exc.hint else "; `hakiri sync` retries"
        return SyncAttempt(False, message + hint)
    notes = [f"{t.table}: {n}" for t in report.tables for n in t.notes]
    moved = any(t.files or t.deleted for t in report.tables)
    return SyncAttempt(True, "; ".join([f"published to {settings.bucket}", *notes]), moved)


# -- the pieces ---------------------------------------------------------------------------


def _moved(on_file: Callable[[str], None] | None) -> Callable[[str], None]:
    """After each file moved: the crash point the kill tests stop a sync at, then `on_file`."""
    from hakiri.engine.crash import crash_point

    def moved(path: str) -> None:
        crash_point("sync_file")
        if on_file is not None:
            on_file(path)

    return moved


def _settings(project: Project) -> SyncSettings:
    if project.settings.sync is None:
        raise SyncFailed(
            "this project has no [sync] section: there is no bucket to sync with",
            'add [sync] with bucket = "s3://…" (docs/sync.md)',
        )
    return project.settings.sync


def _store(project: Project) -> Path:
    from hakiri.spec.connections import project_store

    return project_store(project.root, project.settings)


def _published(store: Path) -> list[str]:
    """The store's tables, and its view definitions (`_views`) when apply wrote them: what a
    reader of the bucket needs to resolve the project's views."""
    from hakiri.destinations.context.inspect import is_delta_table
    from hakiri.destinations.context.views_table import VIEWS_TABLE

    views = [VIEWS_TABLE] if is_delta_table(store / VIEWS_TABLE) else []
    return [*list_tables(store), *views]


def _bucket_tables(bucket: Bucket) -> list[str]:
    from hakiri.destinations.context.views_table import VIEWS_TABLE

    names = bucket.tables()
    return [t for t in names if not t.startswith(("_", "."))] + (
        [VIEWS_TABLE] if VIEWS_TABLE in names else []
    )


def _retention(table: Path) -> float:
    from deltalake import DeltaTable

    try:
        hours = retention_hours(DeltaTable(str(table)))
    except Exception:  # unreadable here: push_table says so
        return float("inf")
    return float("inf") if hours is None else hours


def _alert(project: Project, env: Mapping[str, str], message: str) -> None:
    from hakiri.catalog.store import Catalog
    from hakiri.catalog.url import catalog_url

    try:
        url = catalog_url(project.root, project.settings.catalog.url, env)
        with Catalog.open(url, migrate=False) as catalog:
            catalog.add_alert("warning", "sync", message)
    except HakiriError:
        pass  # the warning is printed all the same


@contextmanager
def _one_sync_at_a_time(store: Path) -> Iterator[None]:
    lock = store / _LOCK
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
