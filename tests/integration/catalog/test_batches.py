"""Batches: persisted before data moves, claimed one holder at a time, committed once."""

from __future__ import annotations

import time

import pytest

from hakiri.catalog.records import BatchCounts, BatchStatus, NewBatch, Retirement
from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError

# A lease that must still be held by the next statement, then expire: long enough for a
# loaded two-core machine (0.05 s was not: a PostgreSQL catalog round trip outlived it).
SHORT_LEASE = 1.0
P = "orders"


def files(*names: str, table: str = "orders") -> list[NewBatch]:
    return [
        NewBatch(f"h-{n}", table, "file", f"data/{n}.csv", f"h-{n}", size_bytes=100) for n in names
    ]


def chunk(n: int, generation: int = 0) -> NewBatch:
    return NewBatch(
        f"c{n}g{generation}",
        "orders",
        "chunk",
        predicate=f"id >= {n * 100} AND id < {(n + 1) * 100}",
        generation=generation,
    )


def test_add_batches_is_idempotent_and_keeps_order(catalog: Catalog) -> None:
    assert catalog.add_batches(P, files("b", "a")) == 2
    assert catalog.add_batches(P, [*files("a"), chunk(1), *files("c")], run_id="r1") == 2
    assert catalog.add_batches(P, []) == 0
    listed = catalog.batches(P)
    assert [b.batch_id for b in listed] == ["h-b", "h-a", "c1g0", "h-c"]
    assert [b.seq for b in listed] == sorted(b.seq for b in listed)
    assert len({b.seq for b in listed}) == 4
    assert all(b.status is BatchStatus.PENDING and b.attempt == 0 for b in listed)
    first = catalog.batch(P, "h-a")
    assert first is not None and first.run_id is None  # left as it was
    assert catalog.batch(P, "c1g0").run_id == "r1"  # type: ignore[union-attr]
    assert catalog.batch(P, "c1g0").predicate == "id >= 100 AND id < 200"  # type: ignore[union-attr]
    assert catalog.batch(P, "nope") is None


def test_retired_batches_end_in_the_same_call_and_come_back_when_planned_again(
    catalog: Catalog,
) -> None:
    catalog.add_batches(P, files("a", "b", "c"))
    done = catalog.claim_batch(P, "run-a", 60)
    assert done is not None and done.batch_id == "h-a"
    catalog.mark_committed(P, "h-a", "run-a", rows=1)
    catalog.claim_batch(P, "run-a", 60)
    catalog.mark_failed(P, "h-b", "run-a", "bad record")
    retire = [
        Retirement("h-a", BatchStatus.SUPERSEDED, "committed: left alone"),
        Retirement("h-b", BatchStatus.SUPERSEDED, "b.csv changed"),
        Retirement("h-c", BatchStatus.GONE, "c.csv is gone"),
    ]
    assert catalog.add_batches(P, files("d"), retire=retire) == 1
    status = {b.batch_id: (b.status, b.error) for b in catalog.batches(P)}
    assert status == {
        "h-a": (BatchStatus.COMMITTED, None),
        "h-b": (BatchStatus.SUPERSEDED, "b.csv changed"),
        "h-c": (BatchStatus.GONE, "c.csv is gone"),
        "h-d": (BatchStatus.PENDING, None),
    }
    counts = catalog.batch_counts(P)
    assert (counts.superseded, counts.gone, counts.total) == (1, 1, 4)
    # c.csv's bytes turn up again (restored, or under another name): queued again, last
    moved = NewBatch("h-c", "orders", "file", "data/moved.csv", "h-c", size_bytes=100)
    assert catalog.add_batches(P, [moved, *files("a")]) == 1
    again = catalog.batch(P, "h-c")
    assert again is not None
    assert (again.status, again.file_path, again.error) == (
        BatchStatus.PENDING,
        "data/moved.csv",
        None,
    )
    assert again.seq == max(b.seq for b in catalog.batches(P))
    assert catalog.batch(P, "h-a").status is BatchStatus.COMMITTED  # type: ignore[union-attr]


def test_a_claimed_batch_is_retired_only_by_its_holder(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a"))
    catalog.claim_batch(P, "run-a", 60)
    assert not catalog.mark_retired(P, "h-a", "run-b", BatchStatus.GONE, "a.csv is gone")
    assert catalog.mark_retired(P, "h-a", "run-a", BatchStatus.GONE, "a.csv is gone")
    gone = catalog.batch(P, "h-a")
    assert gone is not None and (gone.status, gone.holder) == (BatchStatus.GONE, None)
    with pytest.raises(ValueError, match="not a status a batch retires with"):
        catalog.mark_retired(P, "h-a", "run-a", BatchStatus.FAILED, "no")


def test_duplicates_within_one_call_count_once(catalog: Catalog) -> None:
    assert catalog.add_batches(P, [*files("a"), *files("a")]) == 1


def test_the_same_batch_id_in_two_pipelines_is_two_batches(catalog: Catalog) -> None:
    assert catalog.add_batches(P, files("a")) == 1
    assert catalog.add_batches("users", files("a", table="users")) == 1
    assert catalog.batch_counts(P).pending == catalog.batch_counts("users").pending == 1


def test_many_batches_in_one_call(catalog: Catalog) -> None:
    many = [chunk(n) for n in range(1234)]
    assert catalog.add_batches(P, many) == 1234
    assert catalog.add_batches(P, many) == 0
    assert [b.batch_id for b in catalog.batches(P)] == [b.batch_id for b in many]


def test_claim_takes_the_lowest_seq_pending_batch(catalog: Catalog) -> None:
    catalog.add_batches(P, files("z", "y"))
    claimed = catalog.claim_batch(P, "worker-1", 60, run_id="run-1")
    assert claimed is not None
    assert claimed.batch_id == "h-z"
    assert claimed.status is BatchStatus.PROCESSING
    assert (claimed.holder, claimed.attempt, claimed.run_id) == ("worker-1", 1, "run-1")
    assert claimed.lease_expires_at is not None and claimed.created_at is not None
    assert 55 < (claimed.lease_expires_at - claimed.created_at).total_seconds() < 65
    assert catalog.batch(P, "h-z") == claimed
    second = catalog.claim_batch(P, "worker-2", 60)
    assert second is not None and second.batch_id == "h-y"
    assert catalog.claim_batch(P, "worker-3", 60) is None
    assert catalog.claim_batch("other", "worker-3", 60) is None


def test_an_expired_claim_is_claimed_again(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a"))
    first = catalog.claim_batch(P, "dead", SHORT_LEASE)
    assert catalog.claim_batch(P, "alive", 60) is None  # still leased
    time.sleep(SHORT_LEASE + 0.1)
    again = catalog.claim_batch(P, "alive", 60)
    assert first is not None and again is not None
    assert (again.batch_id, again.holder, again.attempt) == (first.batch_id, "alive", 2)
    # the dead holder has lost it for good
    assert not catalog.heartbeat(P, "h-a", "dead", 60)
    assert not catalog.mark_committed(P, "h-a", "dead")
    assert catalog.mark_committed(P, "h-a", "alive", rows=5)


def test_heartbeat_extends_only_a_live_claim_of_its_holder(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a", "b"))
    claimed = catalog.claim_batch(P, "w1", 5)
    assert claimed is not None and claimed.lease_expires_at is not None
    assert catalog.heartbeat(P, "h-a", "w1", 120)
    extended = catalog.batch(P, "h-a")
    assert extended is not None and extended.lease_expires_at is not None
    assert extended.lease_expires_at > claimed.lease_expires_at
    assert not catalog.heartbeat(P, "h-a", "w2", 120)
    assert not catalog.heartbeat(P, "h-b", "w1", 120)  # pending, not held
    catalog.claim_batch(P, "w1", 0.05)
    time.sleep(0.1)
    assert not catalog.heartbeat(P, "h-b", "w1", 120)  # expired


def test_mark_committed_by_the_holder(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a"))
    catalog.claim_batch(P, "w1", 60)
    assert not catalog.mark_committed(P, "h-a", "w2")
    assert catalog.batch(P, "h-a").status is BatchStatus.PROCESSING  # type: ignore[union-attr]
    assert catalog.mark_committed(P, "h-a", "w1", rows=42)
    done = catalog.batch(P, "h-a")
    assert done is not None
    assert (done.status, done.rows, done.holder) == (BatchStatus.COMMITTED, 42, "w1")
    assert done.committed_at is not None and done.lease_expires_at is None
    assert catalog.mark_committed(P, "h-a", "w1", rows=42)  # repeating it is harmless
    assert catalog.claim_batch(P, "w1", 60) is None


def test_marking_an_unknown_batch_is_an_error(catalog: Catalog) -> None:
    with pytest.raises(CatalogError, match="no batch `ghost`"):
        catalog.mark_committed(P, "ghost", "w1")
    with pytest.raises(CatalogError):
        catalog.mark_committed_from_ledger(P, "ghost")


def test_a_batch_found_in_the_ledger_is_committed_whoever_held_it(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a", "b", "c"))
    catalog.claim_batch(P, "crashed", 60)
    assert catalog.mark_committed_from_ledger(P, "h-a")  # processing, held by someone else
    assert catalog.mark_committed_from_ledger(P, "h-b")  # never claimed
    assert catalog.mark_committed_from_ledger(P, "h-b")  # already committed: still fine
    assert catalog.batch(P, "h-a").status is BatchStatus.COMMITTED  # type: ignore[union-attr]
    assert catalog.batch_counts(P) == BatchCounts(pending=1, committed=2)


def test_mark_failed_stops_retries_until_reset(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a"))
    catalog.claim_batch(P, "w1", 60)
    assert not catalog.mark_failed(P, "h-a", "w2", "not mine")
    assert catalog.mark_failed(P, "h-a", "w1", "ValidationFailed: 3 nulls in id")
    failed = catalog.batch(P, "h-a")
    assert failed is not None and failed.status is BatchStatus.FAILED
    assert failed.error == "ValidationFailed: 3 nulls in id"
    assert catalog.claim_batch(P, "w1", 60) is None
    assert catalog.batches(P, status=BatchStatus.FAILED) == [failed]

    assert catalog.reset_batches(P, ["h-a", "ghost"]) == 1
    reset = catalog.batch(P, "h-a")
    assert reset is not None and reset.status is BatchStatus.PENDING
    assert reset.attempt == 1 and reset.error is None and reset.holder is None
    again = catalog.claim_batch(P, "w1", 60)
    assert again is not None and again.attempt == 2


def test_release_hands_the_batch_back(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a", "b"))
    catalog.claim_batch(P, "w1", 60)
    assert not catalog.release(P, "h-a", "w2")
    assert catalog.release(P, "h-a", "w1")
    released = catalog.batch(P, "h-a")
    assert released is not None
    assert (released.status, released.holder, released.lease_expires_at) == (
        BatchStatus.PENDING,
        None,
        None,
    )
    assert catalog.batch_counts(P) == BatchCounts(pending=2)
    again = catalog.claim_batch(P, "w2", 60)
    assert again is not None and again.batch_id == "h-a" and again.attempt == 2


def test_reclaim_expired_returns_dead_claims_to_pending(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a", "b", "c"))
    catalog.add_batches("users", files("u", table="users"))
    catalog.claim_batch(P, "dead", SHORT_LEASE)
    catalog.claim_batch(P, "alive", 60)  # h-b: h-a is still the dead holder's
    catalog.claim_batch("users", "dead", SHORT_LEASE)
    time.sleep(SHORT_LEASE + 0.1)
    assert catalog.reclaim_expired(P) == 1
    assert catalog.batch(P, "h-a").status is BatchStatus.PENDING  # type: ignore[union-attr]
    assert catalog.batch(P, "h-b").holder == "alive"  # type: ignore[union-attr]
    assert catalog.reclaim_expired() == 1  # the users one
    assert catalog.reclaim_expired() == 0
    assert catalog.batch_counts(P) == BatchCounts(pending=2, processing=1)
    assert catalog.batch_counts("users") == BatchCounts(pending=1)


def test_batches_by_status_and_counts(catalog: Catalog) -> None:
    catalog.add_batches(P, files("a", "b", "c", "d"))
    for holder in ("w1", "w2", "w3"):
        catalog.claim_batch(P, holder, 60)
    catalog.mark_committed(P, "h-a", "w1")
    catalog.mark_failed(P, "h-b", "w2", "boom")
    counts = catalog.batch_counts(P)
    assert counts == BatchCounts(pending=1, processing=1, committed=1, failed=1)
    assert counts.total == 4
    assert [b.batch_id for b in catalog.batches(P, status=BatchStatus.PROCESSING)] == ["h-c"]
    assert [b.batch_id for b in catalog.batches(P, status=BatchStatus.PENDING)] == ["h-d"]
    assert catalog.batch_counts("nobody") == BatchCounts()


def test_committed_hashes_hold_the_latest_commit_per_file(catalog: Catalog) -> None:
    v1 = NewBatch("hash-v1", "orders", "file", "data/orders/1.csv", "hash-v1")
    v2 = NewBatch("hash-v2", "orders", "file", "data/orders/1.csv", "hash-v2")  # the file changed
    other = NewBatch("hash-2", "orders", "file", "data/orders/2.csv", "hash-2")
    users = NewBatch("hash-u", "users", "file", "data/users/1.csv", "hash-u")
    pending = NewBatch("hash-3", "orders", "file", "data/orders/3.csv", "hash-3")
    catalog.add_batches(P, [v1, other, users, chunk(1)])
    for _ in range(4):
        claimed = catalog.claim_batch(P, "w", 60)
        assert claimed is not None
        catalog.mark_committed(P, claimed.batch_id, "w")
    catalog.add_batches(P, [v2, pending])
    claimed = catalog.claim_batch(P, "w", 60)
    assert claimed is not None and claimed.batch_id == "hash-v2"
    catalog.mark_committed(P, "hash-v2", "w")

    assert catalog.committed_hashes(P, "orders") == {
        "data/orders/1.csv": "hash-v2",
        "data/orders/2.csv": "hash-2",
    }
    assert catalog.committed_hashes(P) == {
        "data/orders/1.csv": "hash-v2",
        "data/orders/2.csv": "hash-2",
        "data/users/1.csv": "hash-u",
    }
    assert catalog.committed_hashes("nobody") == {}


def test_reset_of_committed_chunks_makes_them_pending_again(catalog: Catalog) -> None:
    catalog.add_batches(P, [chunk(0), chunk(1)])
    for _ in range(2):
        claimed = catalog.claim_batch(P, "w", 60)
        assert claimed is not None
        catalog.mark_committed(P, claimed.batch_id, "w", rows=100)
    assert catalog.reset_batches(P, ["c0g0", "c1g0", "c0g0"]) == 2
    reset = catalog.batch(P, "c0g0")
    assert reset is not None
    assert (reset.status, reset.committed_at, reset.rows, reset.attempt) == (
        BatchStatus.PENDING,
        None,
        None,
        1,
    )
    assert catalog.reset_batches(P, []) == 0
