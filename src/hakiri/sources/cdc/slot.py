"""The replication slot and publication a cdc_mirror pipeline reads, administered with
plain SQL on a normal connection (no replication protocol).

    ensure_publication(url, "hakiri_shop", [("public", "orders")])
    start = ensure_slot(url, "hakiri_shop")      # the LSN the slot's changes start after
    end = flushed_lsn(url)                       # a batch's range: [start, end)
    advance_slot(url, "hakiri_shop", end)        # only once every table applied `end`

A slot keeps the server's WAL from its confirmed position on, so hakiri moves it forward
only past ranges every table of the pipeline has committed, and `drop_slot` releases it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import psycopg
from psycopg import sql

from hakiri import pgpool
from hakiri.errors import SourceUnreachable
from hakiri.sources.cdc.pgoutput import lsn_from_text, lsn_text

__all__ = [
    "SlotState",
    "advance_slot",
    "drop_slot",
    "ensure_publication",
    "ensure_slot",
    "flushed_lsn",
    "pending_changes",
    "primary_key_of",
    "slot_state",
]

PLUGIN = "pgoutput"


@dataclass(frozen=True)
class SlotState:
    name: str
    plugin: str
    database: str
    active_pid: int | None
    confirmed_flush: int | None  # the changes after it are the slot's
    restart_lsn: int | None  # the WAL the server keeps for it starts here


def _connect(url: str) -> psycopg.Connection[Any]:
    try:
        return pgpool.connect(url, autocommit=True)
    except psycopg.OperationalError as exc:
        raise SourceUnreachable(
            f"cannot connect to the cdc source: {str(exc).strip().splitlines()[0]}",
            "check the connection's URL and that the server is up",
        ) from None


def check_logical_decoding(url: str) -> None:
    """A source whose server does not write logical WAL cannot have a slot: one error with
    the fix, before anything is created."""
    with _connect(url) as conn:
        row = conn.execute("SELECT current_setting('wal_level')").fetchone()
    level = row[0] if row else "unknown"
    if level != "logical":
        raise SourceUnreachable(
            f"cdc_mirror reads the source's WAL by logical decoding, and the server runs with "
            f"wal_level = {level}",
            "set it and restart the server: ALTER SYSTEM SET wal_level = logical; (a restart is "
            "needed for it to take effect)",
        )


def slot_state(url: str, name: str) -> SlotState | None:
    with _connect(url) as conn:
        row = conn.execute(
            "SELECT plugin, database, active_pid, confirmed_flush_lsn::text, restart_lsn::text "
            "FROM pg_replication_slots WHERE slot_name = %s",
            (name,),
        ).fetchone()
    if row is None:
        return None
    plugin, database, pid, confirmed, restart = row
    return SlotState(
        name,
        plugin or "",
        database or "",
        pid,
        lsn_from_text(confirmed) if confirmed else None,
        lsn_from_text(restart) if restart else None,
    )


def flushed_lsn(url: str) -> int:
    """Where the server's WAL is flushed to: every transaction that committed before it can
    be decoded now (the insert position may be ahead of what decoding can read)."""
    with _connect(url) as conn:
        row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return lsn_from_text(row[0])


def ensure_publication(url: str, name: str, tables: list[tuple[str, str]]) -> None:
    """The publication exists and publishes every one of `tables` (added when missing)."""
    with _connect(url) as conn:
        exists = conn.execute("SELECT 1 FROM pg_publication WHERE pubname = %s", (name,)).fetchone()
        listed = {
            (schema, table)
            for schema, table in conn.execute(
                "SELECT schemaname, tablename FROM pg_publication_tables WHERE pubname = %s",
                (name,),
            ).fetchall()
        }
        wanted = [t for t in tables if t not in listed]
        if exists and not wanted:
            return
        names = sql.SQL(", ").join(sql.Identifier(s, t) for s, t in wanted)
        verb = (
            "ALTER PUBLICATION {} ADD TABLE {}" if exists else "CREATE PUBLICATION {} FOR TABLE {}"
        )
        conn.execute(sql.SQL(verb).format(sql.Identifier(name), names))


def ensure_slot(url: str, name: str) -> int:
    """The slot's confirmed position, creating the slot (pgoutput) when missing. A slot of
    another plugin or database, or in use by another process, is refused: reading it would
    take changes another consumer is counting on."""
    with _connect(url) as conn:
        database = conn.execute("SELECT current_database()").fetchone()
        assert database is not None
        state = slot_state(url, name)
        if state is None:
            row = conn.execute(
                "SELECT lsn::text FROM pg_create_logical_replication_slot(%s, %s)",
                (name, PLUGIN),
            ).fetchone()
            assert row is not None
            return lsn_from_text(row[0])
    if state.plugin != PLUGIN or state.database != database[0]:
        raise SourceUnreachable(
            f"replication slot {name} exists for plugin {state.plugin} in database "
            f"{state.database}, not {PLUGIN} in {database[0]}",
            "name another slot in config.cdc.slot, or drop that one if nothing uses it",
        )
    if state.active_pid is not None:
        raise SourceUnreachable(
            f"replication slot {name} is in use by the server process {state.active_pid}",
            "another consumer reads it: give this pipeline its own slot (config.cdc.slot)",
        )
    assert state.confirmed_flush is not None
    return state.confirmed_flush


def advance_slot(url: str, name: str, lsn: int) -> None:
    """Confirm the changes before `lsn`: the server may recycle their WAL."""
    state = slot_state(url, name)
    if state is None or state.confirmed_flush is None or state.confirmed_flush >= lsn:
        return
    with _connect(url) as conn:
        conn.execute("SELECT pg_replication_slot_advance(%s, %s::pg_lsn)", (name, lsn_text(lsn)))


def drop_slot(url: str, name: str) -> bool:
    """Drop the slot; False when there was none."""
    with _connect(url) as conn:
        if slot_state(url, name) is None:
            return False
        conn.execute("SELECT pg_drop_replication_slot(%s)", (name,))
        return True


def primary_key_of(url: str, schema: str, table: str) -> list[str]:
    with _connect(url) as conn:
        rows = conn.execute(
            "SELECT a.attname FROM pg_index i "
            "JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey) "
            "WHERE i.indrelid = %s::regclass AND i.indisprimary ORDER BY a.attnum",
            (sql.Identifier(schema, table).as_string(conn),),
        ).fetchall()
    return [r[0] for r in rows]


def pending_changes(url: str, name: str, publication: str, after: int) -> int | None:
    """Row changes (inserts, updates, deletes) of the publication's tables in the WAL the
    slot holds past `after`, decoded by the server without moving the slot; None while
    another process reads the slot (an apply)."""
    with _connect(url) as conn:
        try:
            row = conn.execute(
                "SELECT count(*) FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL, "
                "'proto_version', '1', 'publication_names', %s) "
                "WHERE lsn >= %s::pg_lsn AND get_byte(data, 0) IN (73, 85, 68)",  # I U D
                (name, publication, lsn_text(after)),
            ).fetchone()
        except psycopg.errors.ObjectInUse:
            return None
    assert row is not None
    return int(row[0])
