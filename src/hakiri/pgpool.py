"""PostgreSQL connections kept open between uses, for the length of a command.

The modules that talk to PostgreSQL open a connection for each thing they ask a server
and close it after. A process that does the same work every second (`hakiri apply
--follow`, `hakiri serve`) would open some fifty connections a round that way: 5 ms each on
a local server, tens of milliseconds over TLS, more than the round's own work (an apply
opens about ten). While a `with keep_open():` block runs (around an apply, a follower's or
serve's whole life), `connect` hands out a connection opened earlier for the same URL and
options when one is idle, and a connection's `close()` (the end of its `with` block
included) puts it back instead of closing it: the modules keep their open-use-close code
whether reuse is on or not.

A connection goes back only when it is idle (no transaction open, not broken) and comes
back as a new one would: `DISCARD ALL` on the way back drops what its last user left in the
session (settings made with SET, temporary tables, advisory locks, prepared statements,
LISTENs); psycopg's own transaction characteristics are reset when it is handed out again;
it is asked `SELECT 1` before it is handed out, and a connection the server or the network
dropped meanwhile is closed and a new one opened. Connections idle for more than
`IDLE_SECONDS` are closed (a thread looks every quarter of that), at most `IDLE_PER_KEY`
are kept per URL and options, and all are closed when the last block ends. Connections made
in an engine task (`copy_writer`) are not this module's: they live in the engine's workers.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg

__all__ = ["IDLE_PER_KEY", "IDLE_SECONDS", "KeptConnection", "connect", "keep_open", "kept"]

IDLE_SECONDS = 60.0  # a connection idle longer is closed, not handed out
IDLE_PER_KEY = 8  # idle connections kept per URL and options

_LOCK = threading.Lock()
_REUSE = [0]  # the blocks of `keep_open` running now
_IDLE: dict[tuple[str, tuple[tuple[str, Any], ...]], list[tuple[float, KeptConnection]]] = {}


@contextmanager
def keep_open() -> Iterator[None]:
    """While the block runs, this process reuses its PostgreSQL connections (see the module);
    when the last such block ends, the idle ones are closed."""
    with _LOCK:
        _REUSE[0] += 1
    done = threading.Event()
    reaper = threading.Thread(target=_reap, args=(done,), name="hakiri-pg-idle", daemon=True)
    reaper.start()
    try:
        yield
    finally:
        done.set()
        with _LOCK:
            _REUSE[0] -= 1
            idle = [c for kept_ in _IDLE.values() for _, c in kept_] if not _REUSE[0] else []
            if not _REUSE[0]:
                _IDLE.clear()
        for conn in idle:
            conn.close_for_good()


def _reap(done: threading.Event) -> None:
    """Close the connections idle longer than IDLE_SECONDS, every few seconds, until `done`."""
    while not done.wait(IDLE_SECONDS / 4):
        _close_stale()


def _close_stale() -> None:
    now, stale = time.monotonic(), []
    with _LOCK:
        for idle in _IDLE.values():
            stale += [c for since, c in idle if now - since > IDLE_SECONDS]
            idle[:] = [(since, c) for since, c in idle if now - since <= IDLE_SECONDS]
    for conn in stale:
        conn.close_for_good()


def kept() -> int:
    """How many idle connections are kept now (tests and benches look)."""
    with _LOCK:
        return sum(len(idle) for idle in _IDLE.values())


def connect(url: str, **options: Any) -> KeptConnection:
    """`psycopg.connect(url, **options)`, or an idle connection made with the same URL and
    options when this process keeps them (`keep_open`). Raises what psycopg.connect raises."""
    key = (url, tuple(sorted(options.items())))
    while _REUSE[0]:
        with _LOCK:
            idle = _IDLE.get(key)
            if not idle:
                break
            since, conn = idle.pop()
        if time.monotonic() - since > IDLE_SECONDS or not _answers(conn):
            conn.close_for_good()
            continue
        conn.handed_out(options)
        return conn
    conn = KeptConnection.connect(url, **options)
    conn.key = key
    if _REUSE[0]:
        conn.prepare_threshold = None  # DISCARD ALL drops what psycopg would have prepared
    return conn


def _answers(conn: KeptConnection) -> bool:
    try:
        conn.execute("SELECT 1")
    except psycopg.Error:
        return False
    return True


class KeptConnection(psycopg.Connection[Any]):
    """A psycopg connection whose `close()` puts it back for reuse when the process keeps
    connections and it is idle and healthy; otherwise it closes as any connection does."""

    key: tuple[str, tuple[tuple[str, Any], ...]] | None = None

    def handed_out(self, options: dict[str, Any]) -> None:
        """As psycopg.connect(**options) would make it: its transaction characteristics."""
        self.autocommit = bool(options.get("autocommit", False))
        self.read_only = None
        self.isolation_level = None
        self.deferrable = None

    def close(self) -> None:
        if not self._put_back():
            super().close()

    def close_for_good(self) -> None:
        super().close()

    def _put_back(self) -> bool:
        if not _REUSE[0] or self.key is None or self.closed or self.broken:
            return False
        if self.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            return False  # a transaction left open: closing rolls it back
        try:
            self.autocommit = True
            self.prepare_threshold = None
            self.execute("DISCARD ALL")
        except psycopg.Error:
            return False
        with _LOCK:
            idle = _IDLE.setdefault(self.key, [])
            full = len(idle) >= IDLE_PER_KEY
            if not full:
                idle.append((time.monotonic(), self))
        return not full
