"""pgoutput messages built byte by byte, as PostgreSQL 15 lays them out, through the Decoder."""

from __future__ import annotations

import struct

import pytest

from hakiri.sources.cdc.pgoutput import (
    UNCHANGED,
    Change,
    Column,
    Decoder,
    Relation,
    Unchanged,
    lsn_from_text,
    lsn_text,
)

USERS = 16385
ORDERS = 16390
TEXT, INT8 = 25, 20


def _cstring(text: str) -> bytes:
    return text.encode() + b"\0"


def begin(final_lsn: int, xid: int) -> bytes:
    return b"B" + struct.pack("!QqI", final_lsn, 0, xid)


def commit(lsn: int) -> bytes:
    return b"C" + struct.pack("!BQQq", 0, lsn, lsn + 48, 0)


def relation(
    oid: int, name: str, columns: list[tuple[str, int, bool]], identity: str = "d"
) -> bytes:
    body = struct.pack("!I", oid) + _cstring("public") + _cstring(name) + identity.encode()
    body += struct.pack("!H", len(columns))
    for column, type_oid, key in columns:
        body += struct.pack("!B", int(key)) + _cstring(column) + struct.pack("!Ii", type_oid, -1)
    return b"R" + body


def tuple_data(*values: str | bytes | Unchanged | None) -> bytes:
    """str -> 't', bytes -> 'b', None -> 'n', UNCHANGED -> 'u'."""
    body = struct.pack("!H", len(values))
    for value in values:
        if value is None:
            body += b"n"
        elif value is UNCHANGED:
            body += b"u"
        elif isinstance(value, bytes):
            body += b"b" + struct.pack("!I", len(value)) + value
        else:
            encoded = value.encode()
            body += b"t" + struct.pack("!I", len(encoded)) + encoded
    return body


def insert(oid: int, new: bytes) -> bytes:
    return b"I" + struct.pack("!I", oid) + b"N" + new


def update(oid: int, new: bytes, old: bytes | None = None, image: bytes = b"K") -> bytes:
    return b"U" + struct.pack("!I", oid) + (image + old if old else b"") + b"N" + new


def delete(oid: int, old: bytes, image: bytes = b"K") -> bytes:
    return b"D" + struct.pack("!I", oid) + image + old


def truncate(*oids: int) -> bytes:
    return b"T" + struct.pack(f"!IB{len(oids)}I", len(oids), 0, *oids)


USERS_RELATION = relation(
    USERS, "users", [("id", INT8, True), ("name", TEXT, False), ("bio", TEXT, False)]
)
ORDERS_RELATION = relation(ORDERS, "orders", [("id", INT8, True), ("user_id", INT8, False)])


def decode(*messages: bytes) -> list[Change]:
    decoder = Decoder()
    return [change for message in messages for change in decoder.feed(message)]


@pytest.mark.parametrize(
    ("text", "lsn"),
    [
        ("0/0", 0),
        ("16/B374D848", 0x16_B374_D848),
        ("0/1A2B3C", 0x1A2B3C),
        ("FFFFFFFF/FFFFFFFF", 2**64 - 1),
    ],
)
def test_lsn_text_round_trips(text: str, lsn: int) -> None:
    assert lsn_from_text(text) == lsn
    assert lsn_text(lsn) == text


def test_lsn_text_accepts_lowercase_and_prints_uppercase() -> None:
    assert lsn_text(lsn_from_text("16/b374d848")) == "16/B374D848"


@pytest.mark.parametrize(
    "text", ["", "16", "16/", "/1", "G/0", "0/100000000", "1/2/3", " 1/0", "+1/0", "1_0/0"]
)
def test_lsn_from_text_rejects_what_is_not_an_lsn(text: str) -> None:
    with pytest.raises(ValueError, match="not a PostgreSQL LSN"):
        lsn_from_text(text)


def test_relation_message_is_remembered_with_its_key_columns() -> None:
    decoder = Decoder()

    assert decoder.feed(USERS_RELATION) == []
    assert decoder.relations == {
        USERS: Relation(
            USERS,
            "public",
            "users",
            "d",
            (
                Column("id", INT8, key=True),
                Column("name", TEXT, key=False),
                Column("bio", TEXT, key=False),
            ),
        )
    }


def test_insert_carries_its_transactions_commit_lsn_and_xid() -> None:
    changes = decode(begin(0x500, 731), USERS_RELATION, insert(USERS, tuple_data("1", "ada", None)))

    [change] = changes
    assert change.op == "insert" and change.relation.name == "users"
    assert (change.commit_lsn, change.xid, change.seq) == (0x500, 731, 0)
    assert change.new == {"id": "1", "name": "ada", "bio": None}
    assert change.old is None


def test_update_of_the_key_sends_the_old_key_alone() -> None:
    # Under REPLICA IDENTITY DEFAULT the 'K' tuple has a NULL in every non-key column:
    # those mean "not sent", not NULL, so the old image holds the key only.
    [change] = decode(
        begin(0x600, 732),
        USERS_RELATION,
        update(USERS, tuple_data("2", "ada", "x"), old=tuple_data("1", None, None)),
    )

    assert change.op == "update"
    assert change.old == {"id": "1"}
    assert change.new == {"id": "2", "name": "ada", "bio": "x"}


def test_update_under_replica_identity_full_sends_the_whole_old_row() -> None:
    full = relation(
        USERS, "users", [("id", INT8, True), ("name", TEXT, True), ("bio", TEXT, True)], "f"
    )
    [change] = decode(
        begin(0x600, 732),
        full,
        update(USERS, tuple_data("1", "bob", None), old=tuple_data("1", "ada", None), image=b"O"),
    )

    assert change.relation.replica_identity == "f"
    assert change.old == {"id": "1", "name": "ada", "bio": None}
    assert change.new == {"id": "1", "name": "bob", "bio": None}


def test_update_that_keeps_the_key_and_a_toasted_value() -> None:
    [change] = decode(
        begin(0x700, 733), USERS_RELATION, update(USERS, tuple_data("1", "bob", UNCHANGED))
    )

    assert change.old is None
    assert change.new == {"id": "1", "name": "bob", "bio": UNCHANGED}
    assert change.new["bio"] is UNCHANGED and repr(UNCHANGED) == "UNCHANGED"


def test_delete_sends_the_old_key() -> None:
    [change] = decode(begin(0x800, 734), USERS_RELATION, delete(USERS, tuple_data("1", None, None)))

    assert change.op == "delete"
    assert change.new is None and change.old == {"id": "1"}


def test_truncate_is_one_change_per_table() -> None:
    changes = decode(begin(0x900, 735), USERS_RELATION, ORDERS_RELATION, truncate(USERS, ORDERS))

    assert [(c.op, c.relation.name, c.new, c.old) for c in changes] == [
        ("truncate", "users", None, None),
        ("truncate", "orders", None, None),
    ]
    assert {(c.commit_lsn, c.xid) for c in changes} == {(0x900, 735)}


def test_seq_counts_changes_across_transactions() -> None:
    changes = decode(
        begin(0x100, 10),
        USERS_RELATION,
        ORDERS_RELATION,
        insert(USERS, tuple_data("1", "ada", None)),
        insert(ORDERS, tuple_data("7", "1")),
        commit(0x100),
        begin(0x200, 11),
        delete(ORDERS, tuple_data("7", None)),
        commit(0x200),
    )

    assert [(c.seq, c.commit_lsn, c.xid, c.relation.name) for c in changes] == [
        (0, 0x100, 10, "users"),
        (1, 0x100, 10, "orders"),
        (2, 0x200, 11, "orders"),
    ]


def test_messages_without_rows_decode_to_nothing() -> None:
    origin = b"O" + struct.pack("!Q", 0x42) + _cstring("upstream")
    type_message = b"Y" + struct.pack("!I", 16400) + _cstring("public") + _cstring("mood")
    logical_message = (
        b"M" + struct.pack("!BQ", 1, 0x43) + _cstring("hakiri") + struct.pack("!I", 2) + b"hi"
    )

    decoder = Decoder()
    for message in (begin(0x100, 10), origin, type_message, logical_message, commit(0x100)):
        assert decoder.feed(message) == []


def test_a_new_relation_message_replaces_the_old_description() -> None:
    # PostgreSQL sends the relation again after ALTER TABLE; later tuples follow the new one.
    widened = relation(
        ORDERS, "orders", [("id", INT8, True), ("user_id", INT8, False), ("note", TEXT, False)]
    )
    [change] = decode(
        begin(0x100, 10), ORDERS_RELATION, widened, insert(ORDERS, tuple_data("1", "2", "hi"))
    )

    assert change.new == {"id": "1", "user_id": "2", "note": "hi"}


def test_change_for_an_undescribed_relation_names_its_oid() -> None:
    with pytest.raises(ValueError, match=f"relation oid {ORDERS}"):
        decode(begin(0x100, 10), USERS_RELATION, insert(ORDERS, tuple_data("1", "2")))


def test_truncate_of_an_undescribed_relation_names_its_oid() -> None:
    with pytest.raises(ValueError, match=f"relation oid {ORDERS}"):
        decode(begin(0x100, 10), USERS_RELATION, truncate(USERS, ORDERS))


def test_binary_values_are_refused() -> None:
    with pytest.raises(ValueError, match=r"column name of users came in binary format \('b'\)"):
        decode(begin(0x100, 10), USERS_RELATION, insert(USERS, tuple_data("1", b"\x00\x01", None)))


def test_change_outside_a_transaction_is_refused() -> None:
    with pytest.raises(ValueError, match="outside a transaction"):
        decode(
            begin(0x100, 10),
            USERS_RELATION,
            commit(0x100),
            insert(USERS, tuple_data("1", "a", None)),
        )


def test_tuple_with_another_column_count_than_its_relation_is_refused() -> None:
    with pytest.raises(ValueError, match="has 2 columns, its Relation message 3"):
        decode(begin(0x100, 10), USERS_RELATION, insert(USERS, tuple_data("1", "a")))


def test_message_cut_short_is_refused() -> None:
    whole = insert(USERS, tuple_data("1", "ada", None))
    with pytest.raises(ValueError, match="cut short"):
        decode(begin(0x100, 10), USERS_RELATION, whole[:-8])


def test_unknown_message_type_is_refused() -> None:
    # 'S' opens a streamed transaction, which protocol version 1 never sends.
    with pytest.raises(ValueError, match="unknown pgoutput message type 'S'"):
        decode(b"S" + struct.pack("!IB", 10, 1))
