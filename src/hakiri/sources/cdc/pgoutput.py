"""Decode PostgreSQL's `pgoutput` logical replication messages (protocol version 1).

Pure data, no I/O: whoever reads the slot (`pg_logical_slot_peek_binary_changes`
over SQL, or a walsender) hands each message's bytes to `Decoder.feed`, which
returns the row changes it carries. Message layouts are PostgreSQL's
"Logical Replication Message Formats" (docs/15/protocol-logicalrep-message-formats).

Values stay in the text form PostgreSQL prints (`'42'`, `'2026-01-01 00:00:00+00'`),
decoded as UTF-8, the suite's and the usual database encoding; turning them into
typed values needs the column types and is the caller's business.
"""

from __future__ import annotations

import itertools
import re
import struct
from dataclasses import dataclass
from typing import Literal

__all__ = [
    "UNCHANGED",
    "Change",
    "Column",
    "Decoder",
    "Relation",
    "Unchanged",
    "lsn_from_text",
    "lsn_text",
]

_LSN = re.compile(r"[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}")


def lsn_from_text(text: str) -> int:
    """`16/B374D848` (PostgreSQL's pg_lsn text) -> the 64-bit WAL position."""
    if not _LSN.fullmatch(text):
        raise ValueError(
            f"not a PostgreSQL LSN: {text!r} (expected X/X, two hex numbers of 32 bits)"
        )
    high, low = text.split("/")
    return (int(high, 16) << 32) | int(low, 16)


def lsn_text(lsn: int) -> str:
    """The 64-bit WAL position as PostgreSQL prints a pg_lsn: `16/B374D848`."""
    return f"{lsn >> 32:X}/{lsn & 0xFFFFFFFF:X}"


class Unchanged:
    """A TOASTed value an update did not touch: pgoutput sends no value for it ('u'),
    so the row's new image does not know it. It is not NULL: the value is the one the row
    had before (which only REPLICA IDENTITY FULL puts in the change, in its old image)."""

    def __repr__(self) -> str:
        return "UNCHANGED"


UNCHANGED = Unchanged()

Value = str | None | Unchanged
Row = dict[str, Value]
Op = Literal["insert", "update", "delete", "truncate"]


@dataclass(frozen=True)
class Column:
    name: str
    type_oid: int
    key: bool  # part of the replica identity (every column under REPLICA IDENTITY FULL)


@dataclass(frozen=True)
class Relation:
    """A table as the Relation message describes it: only the columns the publication sends."""

    oid: int
    schema: str  # empty for pg_catalog, as pgoutput sends it
    name: str
    replica_identity: str  # 'd' default, 'n' nothing, 'f' full, 'i' index
    columns: tuple[Column, ...]


@dataclass(frozen=True)
class Change:
    """One row change (one per truncated table for a TRUNCATE), in decoding order (`seq`).

    `commit_lsn` is the LSN of its transaction's commit record, shared by every change of
    the transaction: the position to resume after once the whole transaction is stored.
    `old` is the key (only the replica identity's columns) or the whole old row under
    REPLICA IDENTITY FULL; None when PostgreSQL sent no old image (an update that kept the key).
    """

    op: Op
    relation: Relation
    commit_lsn: int
    xid: int
    seq: int
    new: Row | None
    old: Row | None


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data = data
        self.at = 0

    def unpack(self, fmt: str) -> tuple[int, ...]:
        values = struct.unpack_from("!" + fmt, self.data, self.at)
        self.at += struct.calcsize("!" + fmt)
        return values

    def byte(self) -> str:
        return chr(self.unpack("B")[0])

    def int(self, fmt: str) -> int:
        return self.unpack(fmt)[0]

    def string(self) -> str:
        end = self.data.find(b"\0", self.at)
        if end < 0:
            raise IndexError(self.at)
        text = self.data[self.at : end].decode()
        self.at = end + 1
        return text

    def take(self, size: int) -> bytes:
        if self.at + size > len(self.data):
            raise IndexError(size)
        chunk = self.data[self.at : self.at + size]
        self.at += size
        return chunk


# Messages that carry no rows: Origin, Type (a custom type's name) and Message
# (pg_logical_emit_message, sent only with the 'messages' option).
_NO_ROWS = frozenset("OYM")


class Decoder:
    """Decodes one slot's messages in order, remembering what later messages refer to:
    the relations described so far and the transaction being decoded."""

    def __init__(self) -> None:
        self.relations: dict[int, Relation] = {}
        self._commit_lsn: int | None = None
        self._xid = 0
        self._seq = itertools.count()

    def feed(self, data: bytes) -> list[Change]:
        """Decode one pgoutput message; return the row changes it carries (often none)."""
        reader = _Reader(data)
        try:
            return self._decode(reader.byte(), reader)
        except (struct.error, IndexError):
            raise ValueError(
                f"pgoutput message cut short: {bytes(data[:1])!r}, {len(data)} bytes"
            ) from None

    def _decode(self, kind: str, reader: _Reader) -> list[Change]:
        if kind == "B":
            self._commit_lsn, _commit_time, self._xid = reader.unpack("QqI")
        elif kind == "C":
            self._commit_lsn = None
        elif kind == "R":
            relation = _read_relation(reader)
            self.relations[relation.oid] = relation
        elif kind == "I":
            relation = self._relation(reader.int("I"))
            _expect(reader, "N", relation)
            return [self._change("insert", relation, new=_read_tuple(reader, relation))]
        elif kind == "U":
            relation = self._relation(reader.int("I"))
            old, image = None, reader.byte()
            if image in ("K", "O"):
                old, image = _read_tuple(reader, relation, keys_only=image == "K"), reader.byte()
            if image != "N":
                raise ValueError(
                    f"update of {relation.name}: expected the new tuple 'N', got {image!r}"
                )
            return [self._change("update", relation, new=_read_tuple(reader, relation), old=old)]
        elif kind == "D":
            relation = self._relation(reader.int("I"))
            image = reader.byte()
            if image not in ("K", "O"):
                raise ValueError(f"delete from {relation.name}: expected 'K' or 'O', got {image!r}")
            old = _read_tuple(reader, relation, keys_only=image == "K")
            return [self._change("delete", relation, old=old)]
        elif kind == "T":
            count, _options = reader.unpack("IB")
            relations = [self._relation(oid) for oid in reader.unpack(f"{count}I")]
            return [self._change("truncate", relation) for relation in relations]
        elif kind not in _NO_ROWS:
            raise ValueError(
                f"unknown pgoutput message type {kind!r} (protocol version 1 expected)"
            )
        return []

    def _relation(self, oid: int) -> Relation:
        try:
            return self.relations[oid]
        except KeyError:
            raise ValueError(
                f"change for relation oid {oid}, which no Relation message described"
            ) from None

    def _change(
        self, op: Op, relation: Relation, new: Row | None = None, old: Row | None = None
    ) -> Change:
        if self._commit_lsn is None:
            raise ValueError(f"{op} on {relation.name} outside a transaction (no Begin message)")
        return Change(op, relation, self._commit_lsn, self._xid, next(self._seq), new, old)


def _expect(reader: _Reader, wanted: str, relation: Relation) -> None:
    got = reader.byte()
    if got != wanted:
        raise ValueError(f"change of {relation.name}: expected tuple {wanted!r}, got {got!r}")


def _read_relation(reader: _Reader) -> Relation:
    oid = reader.int("I")
    schema, name = reader.string(), reader.string()
    identity = reader.byte()
    columns = []
    for _ in range(reader.int("H")):
        flags = reader.int("B")
        column_name = reader.string()
        type_oid, _typmod = reader.unpack("Ii")
        columns.append(Column(column_name, type_oid, key=bool(flags & 1)))
    return Relation(oid, schema, name, identity, tuple(columns))


def _read_tuple(reader: _Reader, relation: Relation, keys_only: bool = False) -> Row:
    """TupleData: one value per column of the relation. A key image ('K') holds NULL in
    every column outside the replica identity; those NULLs mean "not sent", so they are left out."""
    count = reader.int("H")
    if count != len(relation.columns):
        raise ValueError(
            f"tuple of {relation.name} has {count} columns, its Relation message {len(relation.columns)}"
        )
    values: Row = {}
    for column in relation.columns:
        kind = reader.byte()
        value: Value
        if kind == "n":
            value = None
        elif kind == "u":
            value = UNCHANGED
        elif kind == "t":
            value = reader.take(reader.int("I")).decode()
        elif kind == "b":
            raise ValueError(
                f"column {column.name} of {relation.name} came in binary format ('b'); "
                "read the slot without the 'binary' option to get text values"
            )
        else:
            raise ValueError(
                f"column {column.name} of {relation.name}: unknown value kind {kind!r}"
            )
        if column.key or not keys_only:
            values[column.name] = value
    return values
