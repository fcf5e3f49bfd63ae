"""Where SQLite and PostgreSQL differ: engines, transactions, locks, upserts, driver errors.

Everything above this module is one SQL code path for both dialects.

SQLite: WAL, a busy timeout, and `BEGIN IMMEDIATE` for every write transaction,
so a writer takes the database's write lock before it reads what it will change
(two claimers cannot both see a batch as pending). Reads use a plain deferred
`BEGIN`. PostgreSQL: READ COMMITTED; claims use `FOR UPDATE SKIP LOCKED`.
A write that still meets "database is locked", a deadlock or a serialization
failure is retried a few times with backoff; other driver failures become a
one-line CatalogError.
"""

from __future__ import annotations

import contextlib
import fcntl
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from sqlalchemy import URL, Connection, Engine, Table, create_engine, event, func, select, text
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.exc import ArgumentError, DBAPIError, InterfaceError, OperationalError
from sqlalchemy.pool import StaticPool

from hakiri.errors import CatalogError

T = TypeVar("T")

_WRITE = "hakiri_write"  # execution option: this transaction writes (BEGIN IMMEDIATE on SQLite)
BUSY_TIMEOUT_MS = 30_000
RETRIES = 6
LOCK_WAIT_SECONDS = 60.0
# pg_advisory_xact_lock key serialising catalog migrations ("haki" in ASCII); advisory locks
# are scoped to one database, so catalogs in different databases do not wait for each other.
MIGRATION_LOCK_KEY = 0x68616B69
_RETRY_SQLSTATES = {"40001", "40P01"}  # serialization_failure, deadlock_detected


def parse_url(url: str, display: str) -> URL:
    """A SQLAlchemy URL for SQLite or PostgreSQL (psycopg 3), or a CatalogError."""
    from sqlalchemy.engine import make_url

    try:
        parsed = make_url(url)
    except ArgumentError:
        raise CatalogError(
            f"catalog URL {display} is not a valid database URL",
            "use sqlite:////absolute/path.sqlite or postgresql://user@host/db "
            "([catalog] url in hakiri.toml or HAKIRI_CATALOG_URL)",
        ) from None
    if parsed.drivername in ("postgres", "postgresql"):  # psycopg 3, not SQLAlchemy's psycopg2
        parsed = parsed.set(drivername="postgresql+psycopg")
    backend = parsed.get_backend_name()
    if backend not in ("sqlite", "postgresql"):
        raise CatalogError(
            f"catalog URL {display} names {backend!r}; the catalog runs on SQLite or PostgreSQL",
            "use sqlite:////absolute/path.sqlite or postgresql://user@host/db",
        )
    return parsed


def file_failure(display: str, exc: OSError) -> CatalogError:
    where = f" ({exc.filename})" if exc.filename else ""
    return CatalogError(
        f"catalog {display} cannot be created: {exc.strerror or exc}{where}",
        "check that the catalog's directory can be created and written to",
    )


def sqlite_path(url: URL) -> Path | None:
    """The database file of a SQLite URL; None for an in-memory database."""
    database = url.database or ""
    if database in ("", ":memory:") or database.startswith("file:"):
        return None
    return Path(database)


class Database:
    """An engine plus the dialect-specific habits the catalog relies on."""

    def __init__(self, engine: Engine, display: str) -> None:
        self.engine = engine
        self.dialect: str = engine.dialect.name
        self.display = display
        self._writer = engine.execution_options(**{_WRITE: True})

    @classmethod
    def connect(cls, url: URL, display: str) -> Database:
        if url.get_backend_name() == "sqlite":
            engine = create_engine(url, connect_args={"timeout": BUSY_TIMEOUT_MS / 1000})
            _install_sqlite_habits(engine)
        else:
            connect_args: dict[str, Any] = {"application_name": "hakiri"}
            if "connect_timeout" not in url.query:
                connect_args["connect_timeout"] = 10
            engine = create_engine(url, pool_pre_ping=True, connect_args=connect_args)
        database = cls(engine, display)
        database._ping()
        return database

    @classmethod
    def memory(cls, display: str) -> Database:
        """A private in-memory SQLite database (one connection shared by every caller),
        standing in for the catalog at `display` while that does not exist."""
        engine = create_engine(
            "sqlite://", poolclass=StaticPool, connect_args={"check_same_thread": False}
        )
        _install_sqlite_habits(engine)
        return cls(engine, display)

    def close(self) -> None:
        self.engine.dispose()

    # -- transactions --------------------------------------------------------

    def read(self, work: Callable[[Connection], T]) -> T:
        return self._run(self.engine, work)

    def write(self, work: Callable[[Connection], T]) -> T:
        """Run `work` in one write transaction; retried from the start on lock contention."""
        return self._run(self._writer, work)

    def _run(self, engine: Engine, work: Callable[[Connection], T]) -> T:
        delay = 0.05
        for attempt in range(1, RETRIES + 1):
            try:
                with engine.begin() as conn:
                    return work(conn)
            except DBAPIError as exc:
                if attempt < RETRIES and self._retryable(exc):
                    time.sleep(delay * (1 + random.random()))
                    delay *= 2
                    continue
                if isinstance(exc, OperationalError | InterfaceError):
                    raise self.failure(exc, "failed") from exc
                raise
        raise AssertionError("unreachable")

    def _retryable(self, exc: DBAPIError) -> bool:
        if self.dialect == "sqlite":
            message = str(exc.orig).lower()
            return "database is locked" in message or "database is busy" in message
        return getattr(exc.orig, "sqlstate", None) in _RETRY_SQLSTATES

    def _ping(self) -> None:
        try:
            with self.engine.connect() as conn:
                conn.execute(select(1))
        except DBAPIError as exc:
            self.close()
            raise self.failure(exc, "cannot be opened") from exc

    def failure(self, exc: DBAPIError, what: str) -> CatalogError:
        lines = [line.strip() for line in str(exc.orig).splitlines() if line.strip()]
        detail = lines[0] if lines else type(exc.orig).__name__
        if self.dialect == "sqlite":
            hint = "check that the catalog file and its directory exist and are writable"
        else:
            hint = (
                "check that the PostgreSQL server is up and the catalog URL "
                "([catalog] url or HAKIRI_CATALOG_URL) is right"
            )
        return CatalogError(f"catalog {self.display} {what}: {detail}", hint)

    # -- migrations ----------------------------------------------------------

    @contextlib.contextmanager
    def migrating(self) -> Iterator[Connection]:
        """A write transaction that no other process migrates alongside (flock / advisory lock)."""
        try:
            if self.dialect == "sqlite":
                path = sqlite_path(self.engine.url)
                lock = _flock(Path(f"{path}.lock")) if path else contextlib.nullcontext()
                with lock:
                    self._use_wal()
                    with self._writer.begin() as conn:
                        yield conn
            else:
                with self._writer.begin() as conn:
                    conn.execute(text(f"SET LOCAL lock_timeout = '{int(LOCK_WAIT_SECONDS)}s'"))
                    conn.execute(select(func.pg_advisory_xact_lock(MIGRATION_LOCK_KEY)))
                    yield conn
        except DBAPIError as exc:  # unreachable, or e.g. no right to create tables
            raise self.failure(exc, "could not be migrated") from exc
        except OSError as exc:  # the lock file
            raise file_failure(self.display, exc) from exc

    def _use_wal(self) -> None:
        # Persistent in the file; must run outside a transaction, hence the raw connection.
        if sqlite_path(self.engine.url) is None:
            return
        raw = self.engine.raw_connection()
        try:
            raw.driver_connection.execute("PRAGMA journal_mode=WAL")  # type: ignore[union-attr]
        finally:
            raw.close()

    # -- statements that differ per dialect -------------------------------------

    def insert(self, table: Table) -> sqlite.Insert | postgresql.Insert:
        """INSERT with `on_conflict_do_nothing/do_update` (same API on both dialects)."""
        return sqlite.insert(table) if self.dialect == "sqlite" else postgresql.insert(table)


def _install_sqlite_habits(engine: Engine) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, _record: Any) -> None:
        # Let SQLAlchemy's "begin" event, not the driver, decide when transactions start.
        dbapi_connection.isolation_level = None
        dbapi_connection.execute(f"PRAGMA busy_timeout = {BUSY_TIMEOUT_MS}")
        dbapi_connection.execute("PRAGMA synchronous = NORMAL")

    @event.listens_for(engine, "begin")
    def _on_begin(conn: Connection) -> None:
        writes = conn.get_execution_options().get(_WRITE, False)
        conn.exec_driver_sql("BEGIN IMMEDIATE" if writes else "BEGIN")


@contextlib.contextmanager
def _flock(path: Path) -> Iterator[None]:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as handle:
        deadline = time.monotonic() + LOCK_WAIT_SECONDS
        while True:
            try:
                fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() > deadline:
                    raise CatalogError(
                        f"waited {LOCK_WAIT_SECONDS:.0f}s for the migration lock {path}",
                        "another hakiri is migrating this catalog; retry when it is done",
                    ) from None
                time.sleep(0.05)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)
