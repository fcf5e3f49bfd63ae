"""The net-change rules (`sources.cdc.net.net_of`) on hand-made events: the last event of
a key wins, a value left out is carried from the key's latest earlier event that had it,
else listed as unchanged, never from another key's events."""

from __future__ import annotations

import pyarrow as pa

from hakiri.sources.cdc.net import net_of
from hakiri.sources.cdc.ranges import LSN_COLUMN, SEQ_COLUMN
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN

NAMES = ["id", "big", "note", "n"]


def events(*rows: tuple) -> pa.Table:
    columns = [OP_COLUMN, LSN_COLUMN, SEQ_COLUMN, UNCHANGED_COLUMN, *NAMES]
    return pa.table({c: pa.array([r[i] for r in rows], pa.string()) for i, c in enumerate(columns)})


def net(table: pa.Table) -> dict[str, dict]:
    found = net_of(table, NAMES, ["id"], ["big", "note"]).to_pylist()
    return {row["id"]: row for row in found}


def test_the_last_event_wins_ordered_by_commit_then_order_not_by_arrival() -> None:
    found = net(
        events(
            ("u", "30", "1", None, "1", "c", "c", "3"),
            ("d", "30", "0", None, "1", None, None, None),
            ("u", "9", "0", None, "1", "a", "a", "1"),
            ("d", "100", "0", None, "2", None, None, None),
            ("u", "20", "0", None, "2", "b", "b", "2"),
        )
    )
    assert found["1"][OP_COLUMN] == "u" and found["1"]["n"] == "3"  # 100 > 30 > 9 as numbers
    assert found["2"][OP_COLUMN] == "d" and found["2"]["big"] is None


def test_a_value_left_out_is_carried_from_the_same_keys_latest_event_that_had_it() -> None:
    found = net(
        events(
            ("u", "10", "0", None, "1", "A", "n1", "1"),
            ("u", "20", "0", '["big"]', "1", None, "n2", "2"),
            ("u", "30", "0", '["big", "note"]', "1", None, None, "3"),
            ("u", "5", "0", None, "2", "other key", "x", "9"),
            ("u", "40", "0", '["big","note"]', "3", None, None, "7"),
            ("u", "50", "0", '["note"]', "3", "B", None, "8"),
        )
    )
    assert (found["1"]["big"], found["1"]["note"], found["1"]["n"]) == ("A", "n2", "3")
    assert found["1"][UNCHANGED_COLUMN] is None
    # key 3 never had them in the range: left to the target, listed as Spark lists them
    assert (found["3"]["big"], found["3"]["note"]) == ("B", None)
    assert found["3"][UNCHANGED_COLUMN] == '["note"]'
    only = net(events(("u", "40", "0", '["big", "note"]', "4", None, None, "1")))
    assert only["4"][UNCHANGED_COLUMN] == '["big","note"]'


def test_a_delete_then_an_insert_keeps_nothing_of_the_deleted_row() -> None:
    found = net(
        events(
            ("u", "1", "0", None, "1", "old", "old", "1"),
            ("d", "2", "0", None, "1", None, None, None),
            ("u", "2", "1", None, "1", "new", "new", "2"),
        )
    )
    assert (found["1"]["big"], found["1"][OP_COLUMN], found["1"]["n"]) == ("new", "u", "2")


def test_no_events_give_no_rows_with_the_columns() -> None:
    found = net_of(events(), NAMES, ["id"], ["big", "note"])
    assert found.num_rows == 0
    assert found.column_names == [*NAMES, OP_COLUMN, UNCHANGED_COLUMN]
