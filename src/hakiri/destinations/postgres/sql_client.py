"""The one place that talks to the PostgreSQL driver: connections, and driver errors as HakiriErrors.

    psycopg / pgjdbc error                       becomes
    cannot connect, wrong password, lost link     DestinationUnreachable
    lock not granted in time, deadlock            TransientLoadError (the caller may retry the transaction)
    permission denied                             LoadError "no permission to … on schema/table X" + GRANT hint
    type clash (22xxx, 42804, 42846, 42883)        LoadError naming the table (and column) + cast hint
    constraint violated (23xxx)                   LoadError naming the constraint
    anything else                                 LoadError with the driver's first line

Every reason is one line with the connection's password scrubbed; the hint says what to do.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hakiri.errors import DestinationUnreachable, HakiriError, LoadError
from hakiri.spec.interpolate import first_line_without_password, mask_url, password_of

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "TransientLoadError",
    "Where",
    "connect",
    "driver_errors",
    "translate",
    "translate_spark_write_error",
]

CONNECT_TIMEOUT_SECONDS = 10

_COLUMN_IN_MESSAGE = re.compile(r'column "((?:[^"]|"")+)"')
_DENIED_FOR = re.compile(r"permission denied for (schema|table|relation|database|sequence) (.+)$")
_PSQL_EXCEPTION = re.compile(r"org\.postgresql\.util\.PSQLException: (.+)")
# The COPY writer's error, raised in a Spark Python worker: psycopg's class and first line.
_PSYCOPG_ERROR = re.compile(r"^psycopg\.(?:errors\.)?\w+: (.+)$", re.MULTILINE)
_UNREACHABLE_WORDS = (
    "Connection refused",
    "connection attempt failed",
    "password authentication failed",
    "no pg_hba.conf entry",
    "does not exist",  # database "x" does not exist (at connect time)
    "UnknownHostException",
    "Connection to",
)


class TransientLoadError(LoadError):
    """A lock was not granted in time or a deadlock was broken: the transaction rolled back and may be retried."""


@dataclass(frozen=True)
class Where:
    """What was being done, to which schema/table: the context a driver error is reported in."""

    url: str
    schema: str
    table: str | None = None
    action: str = "load"  # a verb phrase: "create a staging table", "load", "drop leftover tables"
    user: str | None = None

    @property
    def qualified(self) -> str:
        return f"{self.schema}.{self.table}" if self.table else self.schema


def connect(url: str, *, autocommit: bool = False) -> psycopg.Connection[Any]:
    """A connection in UTC (watermarks and markers must not depend on the server's time zone)."""
    import psycopg

    from hakiri import pgpool

    try:
        conn = pgpool.connect(url, autocommit=True, connect_timeout=CONNECT_TIMEOUT_SECONDS)
    except psycopg.Error as exc:
        raise _unreachable(exc, url) from None
    try:
        conn.execute("SET TIME ZONE 'UTC'")
    except psycopg.Error as exc:
        conn.close()
        raise _unreachable(exc, url) from None
    conn.autocommit = autocommit
    return conn


@contextmanager
def driver_errors(where: Where) -> Iterator[None]:
    """Turn any psycopg error raised inside into the matching HakiriError."""
    import psycopg

    try:
        yield
    except psycopg.Error as exc:
        raise translate(exc, where) from exc


# A connection that worked and then went away: the server shut down or restarted, an
# administrator ended the session, the network dropped it (SQLSTATE classes 08 and 57P).
_LOST_WORDS = (
    "terminating connection",
    "server closed the connection",
    "the database system is shutting down",
    "the database system is starting up",
    "An I/O error occurred while sending to the backend",
    "This connection has been closed",
    "Connection reset",
    "connection reset",
    "consuming input failed",
    "SSL SYSCALL error",
)
# What a value the target type cannot hold looks like in PostgreSQL's words.
_VALUE_WORDS = ("invalid input syntax", "out of range", "value too long", "invalid byte sequence")


def _unreachable(exc: BaseException, url: str) -> DestinationUnreachable:
    line = first_line_without_password(exc, url)
    if "password authentication failed" in line or "no password supplied" in line:
        hint = "check the user and password of the destination connection"
    else:
        hint = (
            "check the destination connection's host, port and database, and that the server is up"
        )
    return DestinationUnreachable(f"cannot connect to PostgreSQL at {mask_url(url)}: {line}", hint)


def translate(exc: psycopg.Error, where: Where) -> HakiriError:
    """The HakiriError a user should see for a driver error raised while doing `where.action`."""
    import psycopg
    from psycopg import errors as e

    line = _one_line(first_line_without_password(exc, where.url))
    target = where.qualified
    if isinstance(exc, e.LockNotAvailable | e.DeadlockDetected | e.SerializationFailure):
        return TransientLoadError(
            f"{target} is busy: {line}",
            "another session holds a lock on the target (a long query or transaction); "
            "let it finish or end it, then apply again",
        )
    if isinstance(exc, e.InsufficientPrivilege):
        return _permission(exc, line, where)
    lost = exc.sqlstate is None or exc.sqlstate.startswith(("08", "57P"))
    if lost and isinstance(exc, psycopg.OperationalError | psycopg.InterfaceError):
        return DestinationUnreachable(
            f"lost the connection to PostgreSQL at {mask_url(where.url)} while doing: {where.action} {target}: {line}",
            "check that the server is up and reachable, then apply again (nothing was committed)",
        )
    if isinstance(exc, e.DataError | e.DatatypeMismatch | e.CannotCoerce | e.UndefinedFunction):
        column = _column_of(exc)
        at = f", column {column}" if column else ""
        return LoadError(
            f"type clash loading {target}{at}: {line}",
            "cast the column to the target's type in a transform, or change the target column's type",
        )
    if isinstance(exc, e.CardinalityViolation):
        return LoadError(
            f"the batch has several rows with the same upsert key for {target}: {line}",
            "deduplicate the rows per key in a transform (e.g. keep the latest), or fix `upsert_key`",
        )
    if isinstance(exc, e.InvalidColumnReference) and "ON CONFLICT" in line:
        return LoadError(
            f"upsert into {target} needs a unique constraint on the upsert key: {line}",
            "add one (ALTER TABLE … ADD PRIMARY KEY (…) or CREATE UNIQUE INDEX … ON …), or fix `upsert_key`",
        )
    if isinstance(exc, e.IntegrityError):
        constraint = exc.diag.constraint_name
        named = f" {constraint}" if constraint else ""
        return LoadError(
            f"constraint{named} violated loading {target}: {line}",
            "the new rows break a constraint of the target: fix them in a transform or a row rule, "
            "or relax the constraint",
        )
    if isinstance(exc, e.DependentObjectsStillExist):
        detail = _one_line(exc.diag.message_detail or "")
        return LoadError(
            f"cannot replace {target}: {line}" + (f" ({detail})" if detail else ""),
            "drop or re-point the objects that depend on the old table, or use load mode 'truncate'",
        )
    if isinstance(exc, e.FeatureNotSupported) and "foreign key" in line:
        return LoadError(
            f"cannot truncate {target}: {line}",
            "use load mode 'blue_green' (it keeps foreign keys that reference the target) or 'upsert'",
        )
    return LoadError(
        f"{where.action} {target} failed: {line}",
        "fix the cause named above and apply again; the target was left as it was",
    )


def _permission(exc: psycopg.Error, line: str, where: Where) -> LoadError:
    from psycopg import sql

    role = where.user or "the loading role"
    grantee = sql.Identifier(where.user).as_string() if where.user else "<role>"
    match = _DENIED_FOR.search(line)
    kind, name = (match.group(1), match.group(2)) if match else ("", "")
    if kind == "schema":
        return LoadError(
            f"no permission to {where.action} on schema {name} (role {role})",
            f"GRANT USAGE, CREATE ON SCHEMA {sql.Identifier(name).as_string()} TO {grantee};",
        )
    if kind == "database":
        return LoadError(
            f"no permission to {where.action}: cannot create schema _hakiri in database {name} (role {role})",
            f"GRANT CREATE ON DATABASE {sql.Identifier(name).as_string()} TO {grantee}; "
            "or have an administrator create schema _hakiri owned by that role",
        )
    if kind in ("table", "relation", "sequence"):
        table = f"{where.schema}.{name}" if "." not in name else name
        return LoadError(
            f"no permission to {where.action} {kind} {table} (role {role})",
            f"GRANT SELECT, INSERT, UPDATE, DELETE, TRUNCATE ON {sql.Identifier(where.schema, name).as_string()} "
            f"TO {grantee};",
        )
    return LoadError(
        f"no permission to {where.action} {where.qualified} (role {role}): {line}",
        f"make {role} the owner of {where.qualified} (ALTER TABLE … OWNER TO …), or grant it the owner's role",
    )


def _column_of(exc: psycopg.Error) -> str | None:
    if exc.diag.column_name:
        return exc.diag.column_name
    match = _COLUMN_IN_MESSAGE.search(str(exc))
    return match.group(1).replace('""', '"') if match else None


def _one_line(text: str) -> str:
    return " ".join(text.split())


def translate_spark_write_error(exc: BaseException, where: Where) -> HakiriError:
    """A failed Spark write of the staging table as one line from the driver's own message:
    pgjdbc's (the JDBC writer, a Py4J error with a Java stack) or psycopg's (the COPY
    writer, raised in a Python worker)."""
    text = str(exc)
    password = password_of(where.url)
    if password:
        text = text.replace(password, "***")
    found = _PSQL_EXCEPTION.findall(text) or _PSYCOPG_ERROR.findall(text)
    line = (
        _one_line(found[-1])
        if found
        else _one_line(text.strip().splitlines()[0] if text.strip() else "")
    )
    if any(word in line for word in _UNREACHABLE_WORDS) and not line.startswith("ERROR"):
        return DestinationUnreachable(
            f"Spark cannot connect to PostgreSQL at {mask_url(where.url)}: {line}",
            "check the destination connection; on a cluster, every Spark executor must reach that host",
        )
    if "permission denied" in line:
        return LoadError(
            f"no permission to {where.action} {where.qualified} (role {where.user or 'the loading role'}): {line}",
            "grant the loading role INSERT on the schema's tables (GRANT … ON SCHEMA … ), then apply again",
        )
    if any(word in line for word in _LOST_WORDS):
        return DestinationUnreachable(
            f"lost the connection to PostgreSQL at {mask_url(where.url)} while Spark wrote the "
            f"staging table {where.qualified}: {line[:300]}",
            "the server shut down, restarted or ended the session: check that it is up, then "
            "apply again (nothing was committed)",
        )
    value = any(word in line for word in _VALUE_WORDS)
    return LoadError(
        f"Spark could not write the staging table {where.qualified}: {line[:500]}",
        "a value the target type cannot hold: fix it in a transform or a row rule, then apply again"
        if value
        else "fix the cause named above and apply again; the target was left as it was",
    )
