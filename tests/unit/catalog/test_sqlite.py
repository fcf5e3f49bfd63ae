"""SQLite habits: WAL, writers that queue instead of failing, readers that never wait."""

from __future__ import annotations

import sqlite3
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from sqlalchemy import Connection, text
from sqlalchemy.exc import IntegrityError, OperationalError

from hakiri.catalog import db as catalog_db
from hakiri.catalog.records import Phase
from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'catalog.sqlite'}"


def test_the_catalog_is_in_wal_mode(url: str, tmp_path: Path) -> None:
    Catalog.open(url, migrate=True).close()
    with sqlite3.connect(tmp_path / "catalog.sqlite") as conn:
        assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert (tmp_path / "catalog.sqlite.lock").exists()


def test_readers_do_not_wait_for_a_writer(url: str) -> None:
    with (
        Catalog.open(url, migrate=True) as writer,
        Catalog.open(url, migrate=False) as reader,
        ThreadPoolExecutor(1) as pool,
    ):
        writer.record_applied("orders", {}, "h", Phase.STREAMING)
        with writer._db._writer.begin() as conn:  # an open write transaction, holding the lock
            conn.execute(text("UPDATE pipelines SET spec_hash = 'h2'"))
            # The write stays open until the reader has answered: a reader that waited for it
            # would get no answer before its busy timeout, only "database is locked" after it.
            reading = pool.submit(reader.pipeline_state, "orders")
            try:
                state = reading.result(timeout=catalog_db.BUSY_TIMEOUT_MS / 1000)  # hang guard
            except TimeoutError:
                pytest.fail("the reader waited for the open write transaction")
            assert conn.in_transaction()
            assert conn.execute(text("SELECT spec_hash FROM pipelines")).scalar_one() == "h2"
            # It read the last committed state, not the write in progress.
            assert state is not None and state.spec_hash == "h"


def test_a_second_writer_waits_for_the_first(url: str) -> None:
    with Catalog.open(url, migrate=True) as first, Catalog.open(url, migrate=True) as second:
        done = threading.Event()

        def write() -> None:
            second.set_cursor("orders", "t", {"v": 2})
            done.set()

        with first._db._writer.begin() as conn:
            conn.execute(text("SELECT 1"))  # BEGIN IMMEDIATE: the write lock is taken already
            worker = threading.Thread(target=write)
            worker.start()
            assert not done.wait(0.3)  # blocked on the lock, not failing
        worker.join(10)
        assert done.is_set()
        assert first.get_cursor("orders", "t") == {"v": 2}


def test_locked_writes_are_retried_then_reported(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(catalog_db.time, "sleep", lambda _: None)
    database = catalog_db.Database.memory("sqlite:///x.sqlite")
    calls = []

    def locked_twice(conn: Connection) -> str:
        calls.append(1)
        if len(calls) <= 2:
            raise OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))
        return "done"

    assert database.write(locked_twice) == "done"
    assert len(calls) == 3

    def always_locked(conn: Connection) -> None:
        raise OperationalError("INSERT", {}, sqlite3.OperationalError("database is locked"))

    with pytest.raises(
        CatalogError, match=r"catalog sqlite:///x\.sqlite failed: database is locked"
    ):
        database.write(always_locked)

    def a_bug(conn: Connection) -> None:
        raise IntegrityError("INSERT", {}, sqlite3.IntegrityError("UNIQUE constraint failed"))

    with pytest.raises(IntegrityError):  # not retried, not dressed up: a bug
        database.write(a_bug)
    database.close()
