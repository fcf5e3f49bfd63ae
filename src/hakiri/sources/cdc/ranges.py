"""A WAL range's events, peeked and decoded once for every table that wants them.

`events_of` peeks the slot (`pg_logical_slot_peek_binary_changes`, pgoutput, the
pipeline's publication) up to a range's end, decodes each message once (`pgoutput.Decoder`)
and sorts the row changes committed before the end by table, as events: the row after
the change (op 'u') or the key that went away (op 'd'; a primary-key update is both), with
the change's commit LSN and order, every value as PostgreSQL's text. Peeking leaves the
slot where it was.

Two callers: the engine task of one table (`changes._RangeRead`, a range too large to hold
in the hakiri process), and `RangeEvents`, which holds a small range's events of every
table of the pipeline in the hakiri process, so N tables cost one peek and one decode
instead of N. A change that cannot be mirrored (a TRUNCATE, a key update whose large value
the WAL left out) fails its own table's read only, as it would in that table's engine task.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from hakiri.errors import HakiriError, SourceDataError, SourceUnreachable
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN

__all__ = [
    "IN_PROCESS_ENV",
    "IN_PROCESS_LIMIT",
    "LSN_COLUMN",
    "SEQ_COLUMN",
    "RangeEvents",
    "TooLarge",
    "event_columns",
    "events_of",
]

LSN_COLUMN = "_hakiri_cdc_lsn"  # an event's place: its commit's WAL position
SEQ_COLUMN = "_hakiri_cdc_seq"  # and its order within it
ROWS_PER_BATCH = 20_000
# Events of a range (all tables together) the hakiri process holds before it hands the range
# to the engine, one task per table, instead. Decoding once here is cheaper than N engine
# tasks at any size (each of them decodes every table's changes), so the bound is memory:
# the suite's workload makes ~400 B of Arrow an event (measured: 14,985 events, 6.1 MB), so
# 50,000 are ~20 MB, about 10 s of a 5,000 changes/s source (docs/performance.md).
IN_PROCESS_LIMIT = 50_000
IN_PROCESS_ENV = "HAKIRI_CDC_IN_PROCESS_EVENTS"  # another limit (0: the engine tasks always)
# PostgreSQL writes a UTC offset as +00; Spark's cast wants +00:00.
_SHORT_OFFSET = re.compile(r"([+-]\d\d)$")

Table = tuple[str, str]


class TooLarge(Exception):
    """The range holds more events than the caller would keep (`events_of`'s `limit`)."""


def event_columns(names: Sequence[str]) -> list[str]:
    """The columns of a table's events: the control columns, then the table's."""
    return [OP_COLUMN, LSN_COLUMN, SEQ_COLUMN, UNCHANGED_COLUMN, *names]


@dataclass
class _Found:
    """One table's events so far, column by column (all text)."""

    names: list[str]
    key: list[str]
    columns: dict[str, list[Any]] = field(default_factory=dict)
    error: HakiriError | None = None

    def __post_init__(self) -> None:
        self.clear()

    def clear(self) -> None:
        self.columns = {n: [] for n in event_columns(self.names)}

    def __len__(self) -> int:
        return len(self.columns[OP_COLUMN])

    def add(self, op: str, lsn: int, seq: int, values: Mapping[str, Any]) -> None:
        from hakiri.sources.cdc.pgoutput import UNCHANGED

        left_out = [n for n in self.names if values.get(n) is UNCHANGED]
        self.columns[OP_COLUMN].append(op)
        self.columns[LSN_COLUMN].append(str(lsn))
        self.columns[SEQ_COLUMN].append(str(seq))
        self.columns[UNCHANGED_COLUMN].append(json.dumps(left_out) if left_out else None)
        for n in self.names:
            value = values.get(n)
            self.columns[n].append(
                None if value is None or value is UNCHANGED else _spark_text(value)
            )

    def batch(self) -> Any:
        import pyarrow as pa

        schema = pa.schema([(n, pa.string()) for n in self.columns])
        return pa.RecordBatch.from_pydict(self.columns, schema=schema)


def events_of(
    url: str,
    slot: str,
    publication: str,
    end: int,
    tables: Mapping[Table, tuple[Sequence[str], Sequence[str]]],
    *,
    start: int = 0,
    limit: int | None = None,
) -> Iterator[tuple[Table, Any]]:
    """(table, Arrow record batch of its events) for the changes of `tables` ({table: (column
    names, key)}) committed in [start, end), a batch per table every ROWS_PER_BATCH events
    and the rest at the end; a table whose change cannot be mirrored yields its error instead
    of a batch, once, and nothing more. More than `limit` events raise TooLarge."""
    import psycopg

    from hakiri import pgpool
    from hakiri.sources.cdc.pgoutput import Decoder, lsn_text

    found = {table: _Found(list(n), list(k)) for table, (n, k) in tables.items()}
    total = 0
    try:
        with pgpool.connect(url) as conn:
            conn.execute("SET TimeZone = 'UTC'")
            conn.execute("SET DateStyle = 'ISO'")
            conn.execute("SET extra_float_digits = 3")
            with conn.cursor(name="hakiri_cdc_peek") as cursor:
                cursor.itersize = 5_000
                cursor.execute(
                    "SELECT data FROM pg_logical_slot_peek_binary_changes(%s, %s::pg_lsn, NULL, "
                    "'proto_version', '1', 'publication_names', %s)",
                    (slot, lsn_text(end), publication),
                )
                decoder = Decoder()
                for (data,) in cursor:
                    for change in decoder.feed(bytes(data)):
                        table = (change.relation.schema, change.relation.name)
                        events = found.get(table)
                        if events is None or events.error is not None:
                            continue
                        if not start <= change.commit_lsn < end:
                            continue
                        before = len(events)
                        try:
                            _add(events, table, change)
                        except HakiriError as exc:
                            events.error = exc
                            yield table, exc
                            continue
                        total += len(events) - before
                        if limit is not None and total > limit:
                            raise TooLarge
                        if len(events) >= ROWS_PER_BATCH:
                            yield table, events.batch()
                            events.clear()
    except psycopg.OperationalError as exc:  # the source went away: its error, not the target's
        raise SourceUnreachable(
            f"reading the changes from replication slot {slot}: {str(exc).strip().splitlines()[0]}",
            "check that the source server is up and reachable; the next apply reads the "
            "range again",
        ) from None
    for table, events in found.items():
        if events.error is None and len(events):
            yield table, events.batch()


def _add(events: _Found, table: Table, change: Any) -> None:
    """The events one row change makes in its table."""
    from hakiri.sources.cdc.pgoutput import UNCHANGED, lsn_text

    where = f"{table[0]}.{table[1]} at {lsn_text(change.commit_lsn)}"
    if change.op == "truncate":
        raise SourceDataError(
            f"{where}: TRUNCATE is not mirrored yet",
            "drop the pipeline's replication slot and apply again: a new snapshot of the "
            "table is taken",
        )
    seq = change.seq * 2
    new, old = change.new or {}, change.old or {}
    # A large value an update kept is left out of the new row; under REPLICA IDENTITY FULL
    # the old row carries it whole: the new row takes it from there.
    new = {
        n: old[n] if v is UNCHANGED and old.get(n, UNCHANGED) is not UNCHANGED else v
        for n, v in new.items()
    }
    if change.op == "delete":
        events.add("d", change.commit_lsn, seq, old)
    elif change.op == "update" and old and any(old.get(k) != new.get(k) for k in events.key):
        if any(v is UNCHANGED for v in new.values()):
            raise SourceDataError(
                f"{where}: a primary-key update left a large value out of the WAL, and the "
                "old row it belongs to is deleted by the update",
                f"ALTER TABLE {table[0]}.{table[1]} REPLICA IDENTITY FULL (the old row is "
                "then in the WAL whole), drop the slot and apply again (a new snapshot)",
            )
        events.add("d", change.commit_lsn, seq, old)
        events.add("u", change.commit_lsn, seq + 1, new)
    else:
        events.add("u", change.commit_lsn, seq, new)


def _spark_text(value: str) -> str:
    """PostgreSQL's text of a value as Spark's cast reads it (UTC offsets written whole)."""
    if len(value) > 19 and value[10] == " " and _SHORT_OFFSET.search(value):
        return value + ":00"
    return value


class RangeEvents:
    """The events of the latest range read, for every table of a pipeline, held in the
    hakiri process: the first table's read peeks and decodes the range, the others take
    their share. A range past IN_PROCESS_LIMIT events is not held (`of` answers None): each
    table's engine task reads it instead."""

    def __init__(
        self,
        url: str,
        slot: str,
        publication: str,
        tables: Mapping[Table, tuple[Sequence[str], Sequence[str]]],
        limit: int = IN_PROCESS_LIMIT,
    ) -> None:
        self.url, self.slot, self.publication = url, slot, publication
        self.tables, self.limit = dict(tables), limit
        self._lock = threading.Lock()
        self._end: int | None = None
        self._held: dict[Table, Any] | None = None  # table -> Arrow table or its error
        self.decodes = 0  # ranges peeked and decoded here (tests and the bench count them)

    def of(self, table: Table, start: int, end: int) -> Any:
        """`table`'s events committed in [start, end) as an Arrow table; None when the range
        is too large to hold here; raises the table's own decoding error."""
        import pyarrow as pa
        import pyarrow.compute as pc

        with self._lock:
            if self._end != end:
                self._end, self._held = end, self._decode(end)
            held = self._held
        if held is None:
            return None
        found = held.get(table)
        if isinstance(found, HakiriError):
            raise found
        names, _ = self.tables[table]
        if found is None:
            schema = pa.schema([(n, pa.string()) for n in event_columns(names)])
            return schema.empty_table()
        position = pc.cast(found[LSN_COLUMN], pa.int64())
        return found.filter(pc.greater_equal(position, pa.scalar(start, pa.int64())))

    def _decode(self, end: int) -> dict[Table, Any] | None:
        import pyarrow as pa

        self.decodes += 1
        batches: dict[Table, list[Any]] = {}
        errors: dict[Table, HakiriError] = {}
        try:
            for table, batch in events_of(
                self.url, self.slot, self.publication, end, self.tables, limit=self.limit
            ):
                if isinstance(batch, HakiriError):
                    errors[table] = batch
                else:
                    batches.setdefault(table, []).append(batch)
        except TooLarge:
            return None
        held: dict[Table, Any] = {t: pa.Table.from_batches(b) for t, b in batches.items()}
        return {**held, **errors}
