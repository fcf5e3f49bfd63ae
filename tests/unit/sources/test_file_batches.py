"""Queued file batches bound to their bytes: which ones a plan retires, and what it queues."""

from __future__ import annotations

from hakiri.catalog.records import Batch, BatchStatus
from hakiri.sources.base import Reload, SourceFile
from hakiri.sources.files.batches import (
    file_batch_id,
    plan_file_batches,
    reloadable_files,
    retired_file_batches,
    snapshot_batch_id,
)
from hakiri.spec.load import LoadMode
from hakiri.spec.pipeline import FilesConfig

CONFIG = FilesConfig(path="in/*.csv")


def _file_batch(path: str, digest: str, status: BatchStatus = BatchStatus.FAILED) -> Batch:
    return Batch(file_batch_id("t", digest), "p", "t", "file", status, 1, 1, path, digest)


def test_a_queued_file_whose_bytes_changed_is_superseded_and_one_that_vanished_is_gone() -> None:
    queued = [
        _file_batch("in/b.csv", "sha256:bad0"),
        _file_batch("in/c.csv", "sha256:c0", BatchStatus.PENDING),
        _file_batch("in/d.csv", "sha256:d0"),
    ]
    files = [SourceFile("in/b.csv", 10, "sha256:fixed"), SourceFile("in/d.csv", 5, "sha256:d0")]
    retired = retired_file_batches("t", LoadMode.APPEND, files, queued)
    assert [(r.batch_id, r.status) for r in retired] == [
        (queued[0].batch_id, BatchStatus.SUPERSEDED),
        (queued[1].batch_id, BatchStatus.GONE),
    ]
    assert retired[0].reason == (
        "in/b.csv changed before it was loaded (planned from sha256:bad0, now sha256:fixed): "
        "its current content loads as a new batch"
    )
    assert (
        retired[1].reason
        == "in/c.csv is gone (deleted, moved, or no longer matched) before it was loaded"
    )


def test_committed_processing_and_retired_batches_are_left_alone() -> None:
    files = [SourceFile("in/b.csv", 10, "sha256:new")]
    kept = [
        _file_batch("in/b.csv", "sha256:old", status)
        for status in (
            BatchStatus.COMMITTED,
            BatchStatus.PROCESSING,
            BatchStatus.SUPERSEDED,
            BatchStatus.GONE,
        )
    ]
    assert retired_file_batches("t", LoadMode.APPEND, files, kept) == []


def test_a_snapshot_whose_files_changed_is_superseded_and_one_with_no_file_left_is_gone() -> None:
    planned = [SourceFile("in/a.csv", 1, "sha256:a"), SourceFile("in/b.csv", 1, "sha256:b")]
    snapshot = Batch(
        snapshot_batch_id("t", planned),
        "p",
        "t",
        "snapshot",
        BatchStatus.PENDING,
        0,
        1,
        predicate='[["in/a.csv", "sha256:a"], ["in/b.csv", "sha256:b"]]',
    )
    now = [SourceFile("in/a.csv", 1, "sha256:a2"), SourceFile("in/c.csv", 1, "sha256:c")]
    [changed] = retired_file_batches("t", LoadMode.TRUNCATE, now, [snapshot])
    assert changed.status is BatchStatus.SUPERSEDED
    assert "(in/a.csv changed, in/c.csv new, in/b.csv gone)" in changed.reason
    [gone] = retired_file_batches("t", LoadMode.TRUNCATE, [], [snapshot])
    assert gone.status is BatchStatus.GONE
    assert retired_file_batches("t", LoadMode.TRUNCATE, planned, [snapshot]) == []


def test_content_seen_again_is_planned_when_its_batch_is_not_known_any_more() -> None:
    files = [SourceFile("in/b.csv", 10, "sha256:v1")]
    again = plan_file_batches("t", LoadMode.APPEND, CONFIG, files, committed={}, known=set())
    assert [b.batch_id for b in again] == [file_batch_id("t", "sha256:v1")]
    queued = plan_file_batches(
        "t", LoadMode.APPEND, CONFIG, files, committed={}, known={file_batch_id("t", "sha256:v1")}
    )
    assert queued == []


def _committed(batch_id: str, path: str | None, digest: str | None, seq: int, **kw) -> Batch:
    kind = "file" if path else "snapshot"
    return Batch(batch_id, "p", "t", kind, BatchStatus.COMMITTED, 1, seq, path, digest, **kw)


def test_a_file_edited_back_to_bytes_it_held_loads_again_once() -> None:
    v1 = _committed(file_batch_id("t", "sha256:v1"), "in/b.csv", "sha256:v1", 1)
    v2 = _committed(file_batch_id("t", "sha256:v2"), "in/b.csv", "sha256:v2", 2)
    files = [SourceFile("in/b.csv", 10, "sha256:v1")]
    history = [v1, v2]
    known = {v1.batch_id, v2.batch_id}
    committed = {"in/b.csv": "sha256:v2"}
    [again] = plan_file_batches("t", LoadMode.UPSERT, CONFIG, files, committed, known, history)
    assert again.batch_id == file_batch_id("t", "sha256:v1", after=v2.batch_id)
    assert again.batch_id not in known
    queued = Batch(
        again.batch_id, "p", "t", "file", BatchStatus.PENDING, 0, 3, "in/b.csv", "sha256:v1"
    )
    assert (
        plan_file_batches(
            "t",
            LoadMode.UPSERT,
            CONFIG,
            files,
            committed,
            {*known, again.batch_id},
            [*history, queued],
        )
        == []
    )


def test_a_snapshot_of_files_as_they_were_two_loads_ago_loads_again() -> None:
    first = [SourceFile("in/a.csv", 1, "sha256:a1")]
    second = [SourceFile("in/a.csv", 1, "sha256:a2")]
    s1 = _committed(
        snapshot_batch_id("t", first), None, None, 1, predicate='[["in/a.csv", "sha256:a1"]]'
    )
    s2 = _committed(
        snapshot_batch_id("t", second), None, None, 2, predicate='[["in/a.csv", "sha256:a2"]]'
    )
    known = {s1.batch_id, s2.batch_id}
    assert plan_file_batches("t", LoadMode.TRUNCATE, CONFIG, second, {}, known, [s1, s2]) == []
    [back] = plan_file_batches("t", LoadMode.TRUNCATE, CONFIG, first, {}, known, [s1, s2])
    assert back.batch_id == snapshot_batch_id("t", first, after=s2.batch_id)


def test_a_lost_target_reloads_the_files_that_still_hold_what_loaded_and_names_the_rest() -> None:
    committed = [
        _file_batch("in/a.csv", "sha256:a0", BatchStatus.COMMITTED),
        _file_batch("in/b.csv", "sha256:b0", BatchStatus.COMMITTED),
        _file_batch("in/c.csv", "sha256:c0", BatchStatus.COMMITTED),
    ]
    files = [SourceFile("in/a.csv", 3, "sha256:a0"), SourceFile("in/b.csv", 3, "sha256:b1")]
    reload = reloadable_files("p", committed, files)
    assert reload.batches == (committed[0],)
    assert reload.lost == ("in/b.csv changed since it was loaded", "in/c.csv is gone")
    assert reload.hint is not None and "hakiri apply p --restore-partial" in reload.hint
    whole = reloadable_files("p", committed[:1], files)
    assert (whole.batches, whole.lost, whole.hint) == ((committed[0],), (), None)


def test_a_lost_snapshot_target_reloads_its_newest_snapshot_while_its_files_are_unchanged() -> None:
    files = [SourceFile("in/a.csv", 3, "sha256:a0")]
    older = Batch(
        "s1",
        "p",
        "t",
        "snapshot",
        BatchStatus.COMMITTED,
        1,
        1,
        predicate='[["in/x.csv", "sha256:x"]]',
    )
    newest = Batch(
        "s2",
        "p",
        "t",
        "snapshot",
        BatchStatus.COMMITTED,
        1,
        2,
        predicate='[["in/a.csv", "sha256:a0"]]',
    )
    assert reloadable_files("p", [older, newest], files).batches == (newest,)
    # The files changed since: the new snapshot plan_file_batches queues replaces the table.
    changed = [SourceFile("in/a.csv", 3, "sha256:a1")]
    assert reloadable_files("p", [older, newest], changed) == Reload()
