"""`hakiri sync` against the suite's S3-compatible server, with stores written by delta-rs
(the context store's format; no engine needed to make or move them): another reader of the
bucket never sees a broken or foreign version, a sync killed anywhere converges, pull gives
back an equal store, vacuum's deletions follow after the retention, and two histories on one
prefix are refused."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pyarrow as pa
import pytest
from deltalake import DeltaTable, write_deltalake
from tests.support.bucket_reader import bucket_table, local_table, same_table
from tests.support.engines import HAKIRI
from tests.support.s3_server import S3Server

from hakiri.engine.crash import CRASH_ENV, CRASH_EXIT_CODE

pytestmark = pytest.mark.engine_free("sync moves files with obstore; delta-rs writes the stores")

STORE = ".hakiri/context"


def _project(root: Path, bucket: str, server: S3Server) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "synced"

        [sync]
        bucket = "s3://{bucket}/store"
        endpoint = "{server.endpoint}"
        """)
    )
    return root


def _append(root: Path, table: str, versions: int, *, first: int = 0, rows: int = 20) -> None:
    for v in range(versions):
        start = (first + v) * rows
        batch = pa.table({"id": list(range(start, start + rows)), "v": [first + v] * rows})
        write_deltalake(str(root / STORE / table), batch, mode="append")


def _hakiri(root: Path, server: S3Server, *args: str, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [*HAKIRI, *args, "--project", str(root)],
        env={**os.environ, **server.env(), **env},
        capture_output=True,
        text=True,
        timeout=300,
    )


def _remote(server: S3Server, bucket: str, table: str) -> dict | None:
    """What a delta-rs reader of the bucket sees now (in a process of its own)."""
    return bucket_table(server.storage_options(), f"s3://{bucket}/store/{table}")


def _local(root: Path, table: str, version: int | None = None) -> dict:
    return local_table(root / STORE / table, version)


def _objects(server: S3Server, bucket: str, table: str) -> dict[str, int]:
    base = server.root / bucket / "store" / table
    return {
        p.relative_to(base).as_posix(): p.stat().st_size for p in base.rglob("*") if p.is_file()
    }


def _files(root: Path, table: str) -> dict[str, int]:
    base = root / STORE / table
    return {
        p.relative_to(base).as_posix(): p.stat().st_size
        for p in base.rglob("*")
        if p.is_file() and not p.name.startswith(".")
    }


def test_a_reader_polling_the_bucket_never_fails_nor_sees_a_version_the_store_lacks(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 25)
    _append(root, "users", 6, rows=5)
    write_deltalake(str(root / STORE / "users"), pa.table({"id": [1], "v": [99]}), mode="overwrite")
    stop, seen = tmp_path / "stop", tmp_path / "seen.jsonl"
    uris = [f"s3://{s3_bucket}/store/{t}" for t in ("events", "users")]
    reader = subprocess.Popen(
        [sys.executable, "-m", "tests.support.bucket_reader", "poll", str(stop), str(seen), *uris],
        env={**os.environ, **s3_server.storage_options()},
    )
    try:
        first = _hakiri(root, s3_server, "sync")
        assert first.returncode == 0, first.stderr
        _wait_until_seen(seen, uris[0], version=24)
        _append(root, "events", 30, first=25)  # 30 more commits, pushed one after another
        second = _hakiri(root, s3_server, "sync")
        assert second.returncode == 0, second.stderr
        _wait_until_seen(seen, uris[0], version=54)
    finally:
        stop.touch()
        reader.wait(timeout=60)
    assert reader.returncode == 0

    observations = [json.loads(line) for line in seen.read_text().splitlines()]
    by_table: dict[str, list[dict]] = {u: [o for o in observations if o["uri"] == u] for u in uris}
    for uri, seen_here in by_table.items():
        table = uri.rsplit("/", 1)[-1]
        opened = [i for i, o in enumerate(seen_here) if "error" not in o]
        assert opened, f"the reader never opened {table}"
        # before the table's first commit is in the bucket there is no table; after, never an error
        failures = [o["error"] for o in seen_here[opened[0] :] if "error" in o]
        assert failures == [], failures[:3]
        assert all(
            "TableNotFound" in o["error"]
            or "no log" in o["error"].lower()
            or "not a delta table" in o["error"].lower()
            for o in seen_here[: opened[0]]
        )
        for version in sorted({o["version"] for o in seen_here if "error" not in o}):
            local = _local(root, table, version)
            match = [o for o in seen_here if o.get("version") == version]
            assert all(same_table(o, local) for o in match), (table, version)
    events = {o["version"] for o in by_table[uris[0]] if "error" not in o}
    assert {24, 54} <= events  # it read the bucket between the two syncs and after them
    assert same_table(_remote(s3_server, s3_bucket, "events"), _local(root, "events"))
    assert same_table(_remote(s3_server, s3_bucket, "users"), _local(root, "users"))


def _wait_until_seen(seen: Path, uri: str, *, version: int, timeout: float = 60.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if seen.exists():
            for line in seen.read_text().splitlines():
                o = json.loads(line)
                if o["uri"] == uri and o.get("version") == version:
                    return
        time.sleep(0.05)
    raise AssertionError(f"the reader never saw version {version} of {uri}")


@pytest.mark.parametrize("hit", [1, 12, 13, 20])
def test_a_sync_killed_at_any_file_converges_on_the_next(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str, hit: int
) -> None:
    """12 versions: 12 data files, then 12 commits; killed after the hit-th file moved."""
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 12)
    killed = _hakiri(root, s3_server, "sync", **{CRASH_ENV: f"sync_file:{hit}"})
    assert killed.returncode == CRASH_EXIT_CODE, killed.stderr
    pushed_commits = sorted(
        p for p in _objects(s3_server, s3_bucket, "events") if p.endswith(".json")
    )
    if pushed_commits:  # what a reader finds meanwhile is a whole version of ours
        remote = _remote(s3_server, s3_bucket, "events")
        assert same_table(remote, _local(root, "events", remote["version"]))
    assert len(pushed_commits) == max(0, hit - 12)

    _converges(root, s3_server, s3_bucket, "events")


def _converges(root: Path, server: S3Server, bucket: str, table: str) -> None:
    """One more sync, and the bucket holds the table's files and rows exactly."""
    again = _hakiri(root, server, "sync")
    assert again.returncode == 0, again.stderr
    assert _objects(server, bucket, table) == _files(root, table)
    assert same_table(_remote(server, bucket, table), _local(root, table))


def test_a_sync_killed_from_outside_converges(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 60)
    sync = subprocess.Popen(
        [*HAKIRI, "sync", "--project", str(root)],
        env={**os.environ, **s3_server.env()},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    base = s3_server.root / s3_bucket / "store" / "events"
    deadline = time.monotonic() + 60
    while sync.poll() is None and time.monotonic() < deadline:
        if base.is_dir() and sum(1 for _ in base.rglob("*.parquet")) >= 5:
            break
        time.sleep(0.005)
    sync.send_signal(signal.SIGKILL)
    sync.wait(timeout=30)

    _converges(root, s3_server, s3_bucket, "events")


def test_only_what_the_bucket_lacks_is_pushed_and_status_says_how_far_apart(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 3)
    before = json.loads(_hakiri(root, s3_server, "sync", "--status", "--json").stdout)
    assert [
        (t["table"], t["local_version"], t["remote_version"], t["state"]) for t in before["tables"]
    ] == [("events", 2, -1, "not in the bucket")]
    first = json.loads(_hakiri(root, s3_server, "sync", "--json").stdout)
    assert first["tables"][0]["files"] == 6  # 3 data files, 3 commits
    _append(root, "events", 1, first=3)
    behind = json.loads(_hakiri(root, s3_server, "sync", "--status", "--json").stdout)
    assert behind["tables"][0]["state"] == "1 version(s) to push"
    assert behind["tables"][0]["files_to_push"] == 2
    second = json.loads(_hakiri(root, s3_server, "sync", "--json").stdout)
    assert (second["tables"][0]["version_before"], second["tables"][0]["version"]) == (2, 3)
    assert second["tables"][0]["files"] == 2  # the new data file and its commit, nothing else
    after = json.loads(_hakiri(root, s3_server, "sync", "--status", "--json").stdout)
    assert after["tables"][0]["state"] == "in sync"
    text = _hakiri(root, s3_server, "sync", "--status")
    assert "events: local 3, bucket 3: in sync" in text.stdout


def test_pull_on_an_empty_directory_gives_a_store_equal_to_the_original(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 4)
    write_deltalake(str(root / STORE / "events"), pa.table({"id": [7], "v": [7]}), mode="overwrite")
    DeltaTable(str(root / STORE / "events")).create_checkpoint()
    _append(root, "events", 2, first=10)
    _append(root, "users", 2, rows=3)
    assert _hakiri(root, s3_server, "sync").returncode == 0

    fresh = _project(tmp_path / "elsewhere", s3_bucket, s3_server)
    pulled = _hakiri(fresh, s3_server, "sync", "pull")
    assert pulled.returncode == 0, pulled.stderr
    for table in ("events", "users"):
        assert _local(fresh, table) == _local(root, table)
        assert _files(fresh, table) == _files(root, table)
    assert _local(fresh, "events", 2) == _local(root, "events", 2)  # time travel too
    again = _hakiri(fresh, s3_server, "sync", "pull")
    assert again.returncode == 0 and "up to date" in again.stdout


def test_vacuumed_files_leave_the_bucket_once_older_than_the_retention(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 3)
    assert _hakiri(root, s3_server, "sync").returncode == 0
    write_deltalake(str(root / STORE / "events"), pa.table({"id": [1], "v": [1]}), mode="overwrite")
    removed = DeltaTable(str(root / STORE / "events")).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    assert len(removed) == 3

    kept = json.loads(_hakiri(root, s3_server, "sync", "--json").stdout)["tables"][0]
    assert (kept["deleted"], kept["kept"]) == (0, 3)  # the table keeps removed files 168 h
    assert all(r in _objects(s3_server, s3_bucket, "events") for r in removed)
    gone = json.loads(_hakiri(root, s3_server, "sync", "--retain-hours", "0", "--json").stdout)
    assert gone["tables"][0]["deleted"] == 3
    assert not any(r in _objects(s3_server, s3_bucket, "events") for r in removed)
    assert same_table(_remote(s3_server, s3_bucket, "events"), _local(root, "events"))


def test_a_version_vacuumed_before_it_was_pushed_is_skipped_whole(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    """The bucket cannot have versions whose files are gone: readers jump to a checkpoint."""
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 1)
    assert _hakiri(root, s3_server, "sync").returncode == 0
    for v in (1, 2):
        write_deltalake(
            str(root / STORE / "events"), pa.table({"id": [v], "v": [v]}), mode="overwrite"
        )
    DeltaTable(str(root / STORE / "events")).vacuum(
        retention_hours=0, enforce_retention_duration=False, dry_run=False
    )
    newest = _local(root, "events")["version"]  # vacuum commits versions of its own too
    done = _hakiri(root, s3_server, "sync")
    assert done.returncode == 0, done.stderr
    assert f"the bucket skips to version {newest}" in done.stderr
    checkpoint = f"_delta_log/{newest:020d}.checkpoint.parquet"
    assert checkpoint in _objects(s3_server, s3_bucket, "events")
    assert same_table(_remote(s3_server, s3_bucket, "events"), _local(root, "events"))


def test_a_second_history_on_the_same_prefix_is_refused_and_writes_nothing(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    mine = _project(tmp_path / "mine", s3_bucket, s3_server)
    _append(mine, "events", 2)
    assert _hakiri(mine, s3_server, "sync").returncode == 0
    theirs = _project(tmp_path / "theirs", s3_bucket, s3_server)
    _append(theirs, "events", 3, first=100)
    before = _objects(s3_server, s3_bucket, "events")

    refused = _hakiri(theirs, s3_server, "sync")
    assert refused.returncode == 1
    assert "the two histories diverged" in refused.stderr
    assert "Traceback" not in refused.stderr
    assert _objects(s3_server, s3_bucket, "events") == before
    assert same_table(_remote(s3_server, s3_bucket, "events"), _local(mine, "events"))


def test_missing_or_wrong_credentials_fail_in_one_line_and_are_never_printed(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 1)
    unset = _hakiri(root, s3_server, "sync", HAKIRI_SYNC_KEY_SECRET="")
    assert unset.returncode == 1
    assert unset.stderr.startswith(
        "error: sync needs the bucket's credentials: HAKIRI_SYNC_KEY_SECRET"
    )
    wrong = "wrong-secret-0123456789"
    refused = _hakiri(root, s3_server, "sync", HAKIRI_SYNC_KEY_SECRET=wrong)
    assert refused.returncode == 1
    assert "refused hakiri's credentials" in refused.stderr
    for output in (unset.stdout + unset.stderr, refused.stdout + refused.stderr):
        assert wrong not in output and s3_server.secret_key not in output
        assert "Traceback" not in output
    assert _objects(s3_server, s3_bucket, "events") == {}


def test_the_view_definitions_travel_with_the_store_and_a_pull_brings_them_back(
    tmp_path: Path, s3_server: S3Server, s3_bucket: str
) -> None:
    from datetime import UTC, datetime

    from hakiri.catalog.records import ViewRecord
    from hakiri.destinations.context.views_table import write_views

    root = _project(tmp_path / "p", s3_bucket, s3_server)
    _append(root, "events", 1)
    sql = "SELECT v, count(*) AS n FROM events GROUP BY v"
    at = datetime(2026, 11, 29, 8, 0, tzinfo=UTC)
    write_views(root / STORE, [ViewRecord("per_v", 3, sql, "Per v.", "h", ("events",), at)])
    pushed = _hakiri(root, s3_server, "sync")
    assert pushed.returncode == 0, pushed.stderr
    assert same_table(_remote(s3_server, s3_bucket, "_views"), _local(root, "_views"))

    fresh = _project(tmp_path / "elsewhere", s3_bucket, s3_server)
    pulled = _hakiri(fresh, s3_server, "sync", "pull")
    assert pulled.returncode == 0, pulled.stderr
    rows = DeltaTable(str(fresh / STORE / "_views")).to_pyarrow_table().to_pylist()
    assert rows == [
        {
            "name": "per_v",
            "version": 3,
            "sql": sql,
            "description": "Per v.",
            "reads": ["events"],
            "applied_at": at,
        }
    ]
