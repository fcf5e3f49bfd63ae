"""A real PostgreSQL's pgoutput stream, read with pg_logical_slot_peek_binary_changes and
decoded by hakiri's Decoder: every kind of change a CDC source must survive."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import psycopg
import pytest
from psycopg import sql

from hakiri.sources.cdc.pgoutput import UNCHANGED, Change, Decoder

pytestmark = pytest.mark.engine_free("PostgreSQL's replication stream, decoded in Python")

BIG_BIO = "a" * 10_000  # over the 8 kB page: stored out of line, in the TOAST table


@dataclass(frozen=True)
class Stream:
    conn: psycopg.Connection
    schema: str
    slot: str
    publication: str

    def execute(self, query: str, *tables: str, params: list[object] | None = None) -> list[tuple]:
        """Run `query` with {} replaced by the schema-qualified `tables`."""
        names = [sql.Identifier(self.schema, table) for table in tables]
        cursor = self.conn.execute(sql.SQL(query).format(*names), params)  # type: ignore[arg-type]
        return cursor.fetchall() if cursor.description else []

    def peek(self) -> list[tuple[str, int, bytes]]:
        """Every message the slot holds, in the order PostgreSQL returns them; peeking
        leaves them in the slot."""
        rows = self.conn.execute(
            "SELECT lsn::text, xid::text::bigint, data"
            " FROM pg_logical_slot_peek_binary_changes(%s, NULL, NULL,"
            " 'proto_version', '1', 'publication_names', %s)",
            [self.slot, self.publication],
        ).fetchall()
        return [(lsn, xid, bytes(data)) for lsn, xid, data in rows]


@pytest.fixture
def stream(pg_url: str, pg_schema: str) -> Iterator[Stream]:
    """Tables `accounts` (bio TOASTed when long) and `orders`, a publication of both and a
    pgoutput slot created after them; the slot and publication are dropped afterwards,
    since a slot keeps the server's WAL until it goes."""
    # The suite's server runs with synchronous_commit=off, and a slot decodes only WAL already
    # flushed: without this a commit can stay invisible to a peek for up to ~0.6 s.
    with psycopg.connect(pg_url, autocommit=True, options="-c synchronous_commit=on") as conn:
        # Named after the schema: the suite runs in parallel on one server.
        stream = Stream(conn, pg_schema, slot=f"hakiri_{pg_schema}", publication=f"{pg_schema}_pub")
        stream.execute("CREATE TABLE {} (id int PRIMARY KEY, name text, bio text)", "accounts")
        stream.execute("ALTER TABLE {} ALTER COLUMN bio SET STORAGE EXTERNAL", "accounts")
        stream.execute(
            "CREATE TABLE {} (id int PRIMARY KEY, account_id int, amount numeric(10,2))", "orders"
        )
        publication = sql.Identifier(stream.publication)
        try:
            conn.execute(
                sql.SQL("CREATE PUBLICATION {} FOR TABLE {}, {}").format(
                    publication,
                    sql.Identifier(pg_schema, "accounts"),
                    sql.Identifier(pg_schema, "orders"),
                )
            )
            conn.execute("SELECT pg_create_logical_replication_slot(%s, 'pgoutput')", [stream.slot])
            yield stream
        finally:
            conn.execute(
                "SELECT pg_drop_replication_slot(slot_name) FROM pg_replication_slots"
                " WHERE slot_name = %s",
                [stream.slot],
            )
            conn.execute(sql.SQL("DROP PUBLICATION IF EXISTS {}").format(publication))


def decode(rows: list[tuple[str, int, bytes]]) -> list[Change]:
    decoder = Decoder()
    return [change for _lsn, _xid, data in rows for change in decoder.feed(data)]


def test_every_kind_of_change_decodes_with_its_transaction(stream: Stream) -> None:
    stream.execute(
        "INSERT INTO {} VALUES (1, 'ada', %s), (2, 'bob', 'short bio')",
        "accounts",
        params=[BIG_BIO],
    )
    # The long bio really went to the TOAST table (what makes an update send it as unchanged).
    [(toast_table,)] = stream.execute(
        "SELECT reltoastrelid::regclass::text FROM pg_class WHERE oid = %s::regclass",
        params=[f"{stream.schema}.accounts"],
    )
    [(chunks,)] = stream.conn.execute(
        sql.SQL("SELECT count(*) FROM {}").format(sql.SQL(toast_table))
    ).fetchall()
    assert chunks > 0
    stream.execute("UPDATE {} SET id = 3 WHERE id = 2", "accounts")
    stream.execute("UPDATE {} SET name = 'ada lovelace' WHERE id = 1", "accounts")
    stream.execute("DELETE FROM {} WHERE id = 3", "accounts")
    with stream.conn.transaction():
        stream.execute("INSERT INTO {} VALUES (10, 1, 9.99)", "orders")
        stream.execute("UPDATE {} SET name = 'ada' WHERE id = 1", "accounts")
    stream.execute("TRUNCATE {}, {}", "accounts", "orders")
    rows = stream.peek()
    changes = decode(rows)

    assert [(c.op, c.relation.name, c.new, c.old) for c in changes] == [
        ("insert", "accounts", {"id": "1", "name": "ada", "bio": BIG_BIO}, None),
        ("insert", "accounts", {"id": "2", "name": "bob", "bio": "short bio"}, None),
        # REPLICA IDENTITY DEFAULT: a key update sends the old key alone
        ("update", "accounts", {"id": "3", "name": "bob", "bio": "short bio"}, {"id": "2"}),
        # the TOASTed bio was not touched: no value is sent for it
        ("update", "accounts", {"id": "1", "name": "ada lovelace", "bio": UNCHANGED}, None),
        ("delete", "accounts", None, {"id": "3"}),
        ("insert", "orders", {"id": "10", "account_id": "1", "amount": "9.99"}, None),
        ("update", "accounts", {"id": "1", "name": "ada", "bio": UNCHANGED}, None),
        ("truncate", "accounts", None, None),
        ("truncate", "orders", None, None),
    ]
    assert {c.relation.schema for c in changes} == {stream.schema}
    assert [c.seq for c in changes] == list(range(len(changes)))
    assert {c.xid for c in changes} <= {xid for _lsn, xid, _data in rows}

    # one commit per statement outside the explicit transaction: inserts, key update,
    # update, delete, the two-table transaction, truncate
    by_commit = [(c.commit_lsn, c.xid) for c in changes]
    assert len(set(by_commit)) == 6
    assert by_commit[0] == by_commit[1]  # both rows of one INSERT
    assert by_commit[5] == by_commit[6]  # orders and accounts in one transaction
    assert by_commit[7] == by_commit[8]  # one TRUNCATE of both tables
    commit_lsns = [c.commit_lsn for c in changes]
    assert commit_lsns == sorted(commit_lsns)


def test_each_peek_describes_the_relations_again(stream: Stream) -> None:
    stream.execute("INSERT INTO {} VALUES (1, 'ada', 'bio')", "accounts")

    first, second = stream.peek(), stream.peek()

    # Each call is a decoding session of its own, so it sends the Relation message again:
    # a fresh Decoder per call decodes it, and peeking consumed nothing.
    assert first == second
    assert [data[:1] for _lsn, _xid, data in first] == [b"B", b"R", b"I", b"C"]
    [change] = decode(second)
    assert change.new == {"id": "1", "name": "ada", "bio": "bio"}
