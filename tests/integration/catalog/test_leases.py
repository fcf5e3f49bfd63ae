"""The pipeline lease: one apply per pipeline at a time; a second one waits, then gives up."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest
from sqlalchemy import text

from hakiri.catalog import leases
from hakiri.catalog.records import Lease
from hakiri.catalog.store import Catalog
from hakiri.errors import LeaseHeld
from tests.integration.catalog.rawdb import RawDatabase

P = "orders"


def test_a_free_lease_is_granted_with_who_and_where(catalog: Catalog) -> None:
    lease = catalog.acquire_lease(P, "run-a", 30)
    assert lease.acquired
    assert (lease.pipeline_id, lease.holder, lease.host) == (P, "run-a", socket.gethostname())
    assert 25 < (lease.expires_at - lease.since).total_seconds() <= 30


def test_a_held_lease_is_refused_and_names_its_holder(catalog: Catalog) -> None:
    held = catalog.acquire_lease(P, "run-a", 30)
    refused = catalog.acquire_lease(P, "run-b", 30)
    assert not refused.acquired
    assert (refused.holder, refused.host, refused.since) == ("run-a", held.host, held.since)
    assert catalog.acquire_lease("users", "run-b", 30).acquired  # other pipelines are free


def test_acquiring_again_renews_and_keeps_since(catalog: Catalog) -> None:
    first = catalog.acquire_lease(P, "run-a", 5)
    again = catalog.acquire_lease(P, "run-a", 60)
    assert again.acquired
    assert again.since == first.since
    assert again.expires_at > first.expires_at


def test_an_expired_lease_goes_to_the_next_holder(catalog: Catalog) -> None:
    catalog.acquire_lease(P, "crashed", 0.05)
    time.sleep(0.1)
    taken = catalog.acquire_lease(P, "run-b", 30)
    assert taken.acquired and taken.holder == "run-b"
    assert not catalog.renew_lease(P, "crashed", 30)
    assert not catalog.release_lease(P, "crashed")
    assert catalog.acquire_lease(P, "run-c", 30).holder == "run-b"


def test_renew_lease(catalog: Catalog) -> None:
    first = catalog.acquire_lease(P, "run-a", 5)
    assert catalog.renew_lease(P, "run-a", 60)
    assert not catalog.renew_lease(P, "run-b", 60)
    assert not catalog.renew_lease("users", "run-a", 60)
    later = catalog.acquire_lease(P, "run-b", 1)
    assert not later.acquired and later.expires_at > first.expires_at
    catalog.acquire_lease("users", "run-a", 0.05)
    time.sleep(0.1)
    assert not catalog.renew_lease(
        "users", "run-a", 60
    )  # expired: it may already be someone else's


def test_release_lease_frees_it_only_for_its_holder(catalog: Catalog) -> None:
    catalog.acquire_lease(P, "run-a", 30)
    assert not catalog.release_lease(P, "run-b")
    assert not catalog.acquire_lease(P, "run-b", 30).acquired
    assert catalog.release_lease(P, "run-a")
    assert catalog.acquire_lease(P, "run-b", 30).acquired


def test_wait_for_lease_gets_it_when_the_holder_lets_go(catalog: Catalog) -> None:
    catalog.acquire_lease(P, "run-a", 30)
    releaser = threading.Timer(0.3, catalog.release_lease, args=(P, "run-a"))
    releaser.start()
    try:
        lease = catalog.wait_for_lease(P, "run-b", 30, timeout_seconds=10, poll=0.05)
    finally:
        releaser.join()
    assert lease.acquired and lease.holder == "run-b"


class _Clock:
    """wait_for_lease's clock: sleeping moves it on at once, and every pause is recorded."""

    def __init__(self) -> None:
        self.now = 1000.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_wait_for_lease_gives_up_naming_host_and_time(
    catalog: Catalog, monkeypatch: pytest.MonkeyPatch
) -> None:
    held = catalog.acquire_lease(P, "run-a", 30)
    clock = _Clock()
    monkeypatch.setattr(leases, "time", clock)
    attempts: list[Lease] = []
    acquire = catalog.acquire_lease

    def attempt(pipeline_id: str, holder: str, ttl_seconds: float) -> Lease:
        attempts.append(acquire(pipeline_id, holder, ttl_seconds))
        return attempts[-1]

    monkeypatch.setattr(catalog, "acquire_lease", attempt)

    with pytest.raises(LeaseHeld) as raised:
        catalog.wait_for_lease(P, "run-b", 30, timeout_seconds=1.0, poll=0.25)

    # It waited out its whole timeout, asking again every `poll`, and run-a kept the lease...
    assert clock.sleeps == [0.25] * 4
    assert len(attempts) == 5
    assert all(not a.acquired and a.holder == "run-a" for a in attempts)
    # ...then gave up naming where and since when the pipeline runs.
    since = held.since.strftime("%Y-%m-%d %H:%M:%S UTC")
    assert raised.value.reason == f"pipeline `{P}` is already running on {held.host} since {since}"
    assert raised.value.hint == "wait for it to finish, or pass a longer --lease-timeout"


def test_the_lease_records_this_process(catalog: Catalog, raw_db: RawDatabase) -> None:
    catalog.acquire_lease(P, "run-a", 30)
    with raw_db.connect() as conn:
        pid = conn.execute(text("SELECT pid FROM pipeline_leases")).scalar_one()
    assert pid == os.getpid()
