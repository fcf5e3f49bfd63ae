"""A WAL range decoded once for every table (`sources.cdc.ranges.RangeEvents`), on a real
PostgreSQL slot: each table's share equals what that table's own engine task reads
(`events_of` for it alone), a later start keeps only the changes from there, a change one
table cannot mirror (a TRUNCATE) fails that table's read only, and a range past the limit
is left to the engine."""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pyarrow as pa
import pytest
from psycopg import sql

from hakiri.errors import SourceDataError
from hakiri.sources.cdc.pgoutput import lsn_from_text
from hakiri.sources.cdc.ranges import LSN_COLUMN, RangeEvents, events_of
from hakiri.sources.cdc.slot import ensure_publication, ensure_slot, flushed_lsn
from tests.support.cdc_workload import drop_mirror

pytestmark = [pytest.mark.integration, pytest.mark.engine_free]

_TABLES = ("a", "b", "c")


@pytest.fixture
def slot(pg_url: str, pg_schema: str) -> Iterator[tuple[str, int]]:
    """Three tables in the publication and a slot; yields (slot, its start)."""
    name = f"s_{pg_schema}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for table in _TABLES:
            conn.execute(
                sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, v text)").format(
                    sql.Identifier(pg_schema, table)
                )
            )
    ensure_publication(pg_url, name, [(pg_schema, t) for t in _TABLES])
    start = ensure_slot(pg_url, name)
    try:
        yield name, start
    finally:
        drop_mirror(pg_url, name, name)


def _connect(pg_url: str) -> psycopg.Connection:
    """A connection whose commits are flushed when they return (decoding reads flushed WAL
    only; the suite's server does not flush at commit by default)."""
    conn = psycopg.connect(pg_url)
    conn.execute("SET synchronous_commit = on")
    return conn


def _run(pg_url: str, schema: str, statement: str) -> int:
    """Run `statement` (with {t} for each table) on every table, one transaction; the WAL
    position after its commit."""
    with _connect(pg_url) as conn:
        for table in _TABLES:
            conn.execute(
                sql.SQL(statement.replace("{t}", "{}")).format(sql.Identifier(schema, table))
            )
    with psycopg.connect(pg_url) as conn:
        row = conn.execute("SELECT pg_current_wal_flush_lsn()::text").fetchone()
    assert row is not None
    return lsn_from_text(row[0])


def _alone(pg_url: str, slot: str, schema: str, table: str, start: int, end: int) -> pa.Table:
    """The table's events as its own engine task reads them."""
    names = (["id", "v"], ["id"])
    batches = [
        b for _, b in events_of(pg_url, slot, slot, end, {(schema, table): names}, start=start)
    ]
    schema_ = pa.schema([(n, pa.string()) for n in batches[0].schema.names]) if batches else None
    return pa.Table.from_batches(batches, schema=schema_)


def test_one_decode_gives_each_table_what_its_own_read_would(
    pg_url: str, pg_schema: str, slot: tuple[str, int]
) -> None:
    name, start = slot
    _run(pg_url, pg_schema, "INSERT INTO {t} SELECT g, 'v' || g FROM generate_series(1, 50) g")
    middle = _run(pg_url, pg_schema, "UPDATE {t} SET v = v || '!' WHERE id % 3 = 0")
    _run(pg_url, pg_schema, "DELETE FROM {t} WHERE id % 5 = 0")
    with _connect(pg_url) as conn:  # a key update in b: a delete and an insert
        conn.execute(
            sql.SQL("UPDATE {} SET id = 1000 WHERE id = 1").format(sql.Identifier(pg_schema, "b"))
        )
    end = flushed_lsn(pg_url)
    tables = {(pg_schema, t): (["id", "v"], ["id"]) for t in _TABLES}
    events = RangeEvents(pg_url, name, name, tables)
    for table in _TABLES:
        mine = events.of((pg_schema, table), start, end)
        assert mine.equals(_alone(pg_url, name, pg_schema, table, start, end))
        assert mine.num_rows == 50 + 16 + 10 + (2 if table == "b" else 0)
        later = events.of((pg_schema, table), middle, end)
        assert later.equals(_alone(pg_url, name, pg_schema, table, middle, end))
        assert later.num_rows == 10 + (2 if table == "b" else 0)
        assert all(int(lsn) >= middle for lsn in later[LSN_COLUMN].to_pylist())
    assert events.decodes == 1


def test_a_change_one_table_cannot_mirror_fails_that_table_only(
    pg_url: str, pg_schema: str, slot: tuple[str, int]
) -> None:
    name, start = slot
    _run(pg_url, pg_schema, "INSERT INTO {t} VALUES (1, 'x')")
    with _connect(pg_url) as conn:
        conn.execute(sql.SQL("TRUNCATE {}").format(sql.Identifier(pg_schema, "c")))
    end = flushed_lsn(pg_url)
    tables = {(pg_schema, t): (["id", "v"], ["id"]) for t in _TABLES}
    events = RangeEvents(pg_url, name, name, tables)
    assert events.of((pg_schema, "a"), start, end).num_rows == 1
    with pytest.raises(SourceDataError, match="TRUNCATE is not mirrored yet"):
        events.of((pg_schema, "c"), start, end)
    assert events.of((pg_schema, "b"), start, end).num_rows == 1
    # Past the limit, nothing is held: the tables' engine tasks read the range.
    small = RangeEvents(pg_url, name, name, tables, limit=2)
    assert small.of((pg_schema, "a"), start, end) is None
