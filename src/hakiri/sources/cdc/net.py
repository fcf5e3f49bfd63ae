"""The net effect of change events on each key: the rules, written once, in Arrow.

A range's events (`ranges.event_columns`: op, commit LSN, order within the commit, the
names of the values the WAL left out, then the table's columns) reduce to one row per key:

- the key's last event wins (ordered by commit LSN, then order; nulls first), its op
  saying whether the row is upserted ('u') or deleted ('d');
- a variable-width value the WAL left out of an event (unchanged TOAST, or a value
  Debezium could not read) is taken from the key's latest earlier event in the range that
  had it; with none, the value stays null and its name is listed in the unchanged column,
  so the target keeps what it holds. Keys and fixed-width values are never left out.

`net_of` applies them to an Arrow table of a key's events, in the hakiri process (a small
range decoded there, `ranges.RangeEvents`) or in engine tasks (`changes.net_changes`, which
first gathers each key's events into one partition). No loop over rows: sorts, a forward
fill and takes.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from hakiri.sources.cdc.ranges import LSN_COLUMN, SEQ_COLUMN
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN

__all__ = ["FIXED_WIDTH", "NetOf", "net_of", "variable_width"]

# Spark types of PostgreSQL's fixed-width types: their values are never left out of the WAL.
FIXED_WIDTH = frozenset(
    {"boolean", "tinyint", "smallint", "int", "bigint", "float", "double", "date", "timestamp"}
)


def variable_width(columns: Sequence[tuple[str, str]], key: Sequence[str]) -> list[str]:
    """The columns (name, Spark type) whose values an event may leave out."""
    return [n for n, kind in columns if n not in key and kind not in FIXED_WIDTH]


def net_of(events: Any, names: Sequence[str], key: Sequence[str], variable: Iterable[str]) -> Any:
    """One row per key of `events` (an Arrow table): `names` as the rules above make them,
    then the op and the unchanged column."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    if events.num_rows == 0:
        fields = [events.schema.field(n) for n in names]
        fields += [pa.field(OP_COLUMN, pa.string()), pa.field(UNCHANGED_COLUMN, pa.string())]
        return pa.schema(fields).empty_table()
    order = pa.table(
        {
            **{f"k{i}": events[k] for i, k in enumerate(key)},
            "lsn": pc.cast(events[LSN_COLUMN], pa.int64()),
            "seq": pc.cast(events[SEQ_COLUMN], pa.int64()),
        }
    )
    sort = [(name, "ascending", "at_start") for name in order.column_names]
    rows = events.take(pc.sort_indices(order, sort_keys=sort))
    n = rows.num_rows
    first = _key_starts(rows, key)  # the first event of each key
    position = pa.array(np.arange(n, dtype=np.int64))
    starts = pc.fill_null_forward(pc.if_else(first, position, pa.scalar(None, pa.int64())))
    # the last event of each key: the row before the next key's first, and the last row
    last = pc.indices_nonzero(pa.concat_arrays([first.slice(1), pa.array([True])]))
    unchanged = rows[UNCHANGED_COLUMN]
    out: dict[str, Any] = {}
    still: list[Any] = []
    variable = set(variable)
    for name in names:
        column = rows[name]
        if name not in variable:
            out[name] = column.take(last)
            continue
        # present: the event carries the value (it is not among the names left out)
        pattern = r"[\[, ]" + re.escape(json.dumps(name)) + r"[,\]]"
        left_out = pc.fill_null(pc.match_substring_regex(unchanged, pattern), False)
        had = pc.fill_null_forward(
            pc.if_else(left_out, pa.scalar(None, pa.int64()), position)
        )  # the latest event so far that had the value...
        had = pc.if_else(pc.greater_equal(had, starts), had, pa.scalar(None, pa.int64()))
        carried = had.take(last)  # ...within the key's own events
        out[name] = column.take(carried)
        still.append(
            pc.if_else(pc.is_null(carried), pa.scalar("," + json.dumps(name)), pa.scalar(""))
        )
    out[OP_COLUMN] = rows[OP_COLUMN].take(last)
    if still:
        # ',"a","b"' (binary_join's null_handling="skip" drops rows in pyarrow 26)
        listed = pc.binary_join_element_wise(*still, pa.scalar(""))
        wrapped = pc.binary_join_element_wise(
            pa.scalar("["), pc.utf8_slice_codeunits(listed, 1), pa.scalar("]"), pa.scalar("")
        )
        out[UNCHANGED_COLUMN] = pc.if_else(
            pc.equal(listed, ""), pa.scalar(None, pa.string()), wrapped
        )
    else:
        out[UNCHANGED_COLUMN] = pa.nulls(len(last), pa.string())
    return pa.table(out)


def _key_starts(rows: Any, key: Sequence[str]) -> Any:
    """True where a row's key differs from the row before's (sorted rows; nulls equal)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    n = rows.num_rows  # at least one
    differs = pa.repeat(pa.scalar(False), n - 1)
    for k in key:
        column = rows[k].combine_chunks()
        before, after = column.slice(0, n - 1), column.slice(1)
        other = pc.not_equal(before, after)
        nulls = pc.not_equal(pc.is_null(before), pc.is_null(after))
        differs = pc.or_(differs, pc.if_else(pc.is_null(other), nulls, other))
    return pa.concat_arrays([pa.array([True]), differs])


@dataclass(frozen=True)
class NetOf:
    """An engine task's `net_of`: every event of a partition (which holds all of a key's
    events), reduced at its end."""

    names: list[str]
    key: list[str]
    variable: list[str]

    def __call__(self, batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        held = list(batches)
        if not held:
            return
        reduced = net_of(pa.Table.from_batches(held), self.names, self.key, self.variable)
        yield from reduced.to_batches()
