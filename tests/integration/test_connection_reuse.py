"""A long-lived process keeps its PostgreSQL connections (`hakiri.pgpool`): reused while it
runs, handed out as new ones would be, never a dead one, all closed when it stops."""

from __future__ import annotations

import time

import psycopg
import pytest

from hakiri import pgpool
from hakiri.destinations.postgres.sql_client import connect as destination_connect
from hakiri.errors import DestinationUnreachable
from tests.support.postgres import _free_port


def _pid(conn: psycopg.Connection) -> int:
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    return int(row[0])


def _sessions(pg_conn: psycopg.Connection, pids: set[int]) -> set[int]:
    rows = pg_conn.execute(
        "SELECT pid FROM pg_stat_activity WHERE pid = ANY(%s)", (list(pids),)
    ).fetchall()
    return {r[0] for r in rows}


def _closed(pg_conn: psycopg.Connection, pids: set[int]) -> bool:
    """Have these sessions ended? (A backend exits a moment after its client closes.)"""
    deadline = time.monotonic() + 5
    while _sessions(pg_conn, pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not _sessions(pg_conn, pids)


def test_without_keep_open_every_connection_is_new_and_closed(pg_url: str, pg_conn) -> None:
    with pgpool.connect(pg_url, autocommit=True) as first:
        one = _pid(first)
    with pgpool.connect(pg_url, autocommit=True) as second:
        two = _pid(second)
    assert one != two
    assert pgpool.kept() == 0
    assert _closed(pg_conn, {one, two})


def test_kept_connections_are_reused_clean_and_closed_at_the_end(pg_url: str, pg_conn) -> None:
    with pgpool.keep_open():
        with pgpool.connect(pg_url, autocommit=True) as conn:
            first = _pid(conn)
            # What a user of the session leaves behind must not reach the next one.
            conn.execute("SET statement_timeout = '1234ms'")
            conn.execute("CREATE TEMP TABLE left_behind (x int)")
            conn.execute("SELECT pg_advisory_lock(4242)")
        assert pgpool.kept() == 1
        with pgpool.connect(pg_url, autocommit=True) as conn:
            assert _pid(conn) == first
            assert conn.execute("SHOW statement_timeout").fetchone() == ("0",)
            assert conn.execute("SELECT to_regclass('pg_temp.left_behind')").fetchone() == (None,)
            held = pg_conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND pid = %s", (first,)
            ).fetchone()
            assert held == (0,)
        # Other options are another connection: psycopg's transaction settings stay as asked.
        with pgpool.connect(pg_url) as conn:
            assert not conn.autocommit
            assert _pid(conn) != first
            conn.execute("SELECT 1")
        # A transaction left open is rolled back and its connection closed, not kept.
        conn = pgpool.connect(pg_url)
        dirty = _pid(conn)
        conn.execute("SELECT 1")  # opens a transaction (not autocommit)
        conn.close()
        assert dirty not in {_pid(c) for c in _idle()}
    assert pgpool.kept() == 0
    assert _closed(pg_conn, {first, dirty})


def test_a_kept_connection_the_server_dropped_is_replaced_not_handed_out(
    pg_url: str, pg_conn
) -> None:
    with pgpool.keep_open():
        conn = destination_connect(pg_url, autocommit=True)
        dropped = _pid(conn)
        conn.close()
        pg_conn.execute("SELECT pg_terminate_backend(%s)", (dropped,))
        conn = destination_connect(pg_url, autocommit=True)
        try:
            assert _pid(conn) != dropped
            # hakiri's own session settings are made again on the connection handed out
            assert conn.execute("SHOW TimeZone").fetchone() == ("UTC",)
        finally:
            conn.close()


def test_a_connection_idle_past_the_limit_is_closed_while_the_process_runs(
    pg_url: str, pg_conn, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pgpool, "IDLE_SECONDS", 0.4)
    with pgpool.keep_open():
        with pgpool.connect(pg_url, autocommit=True) as conn:
            idle = _pid(conn)
        assert _sessions(pg_conn, {idle}) == {idle}
        deadline = time.monotonic() + 10
        while pgpool.kept() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert pgpool.kept() == 0
        assert _closed(pg_conn, {idle})


def test_an_unreachable_server_is_still_one_clear_error() -> None:
    url = f"postgresql://nobody@127.0.0.1:{_free_port()}/none"
    with pgpool.keep_open(), pytest.raises(DestinationUnreachable):
        destination_connect(url)


def _idle() -> list[pgpool.KeptConnection]:
    with pgpool._LOCK:
        return [c for kept in pgpool._IDLE.values() for _, c in kept]
