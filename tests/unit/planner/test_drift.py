"""find_drift: a mark compared with the target now, change by change."""

from __future__ import annotations

from dataclasses import replace

from hakiri.catalog.records import TargetMark
from hakiri.destinations.base import TargetColumn, TargetObservation
from hakiri.planner.drift import find_drift

MARK = TargetMark(
    "p", "t", "public.t", (("id", "bigint"), ("name", "text")), ("id",), 10, run_id="r1"
)


def _now(*columns: tuple[str, str], key: tuple[str, ...] = ("id",)) -> TargetObservation:
    return TargetObservation(
        "t", "public", True, tuple(TargetColumn(n, t, True) for n, t in columns), key
    )


def test_the_target_as_marked_has_no_drift() -> None:
    assert find_drift(MARK, _now(("id", "bigint"), ("name", "text")), 10) is None


def test_rows_are_compared_only_when_counted() -> None:
    assert find_drift(MARK, _now(("id", "bigint"), ("name", "text")), None) is None
    drift = find_drift(MARK, _now(("id", "bigint"), ("name", "text")), 7)
    assert drift is not None and not drift.of_schema
    assert drift.changes() == ["3 rows deleted"]


def test_each_change_by_hand_is_named() -> None:
    now = _now(("id", "integer"), ("note", "text"), key=())
    drift = find_drift(MARK, now, 11)
    assert drift is not None and drift.of_schema
    assert drift.changes() == [
        "column note added (text)",
        "column name dropped",
        "column id changed type from bigint to integer",
        "primary key changed from (id) to none",
        "1 row added",
    ]
    assert drift.describe().startswith("public.t changed by hand since hakiri last loaded it: ")
    assert drift.as_dict()["rows"] == {"was": 10, "now": 11}


def test_a_dropped_table_is_drift_and_the_fingerprint_follows_the_change() -> None:
    gone = find_drift(MARK, TargetObservation("t", "public", False), None)
    assert gone is not None and gone.changes() == ["the table was dropped"]
    one = find_drift(MARK, _now(("id", "bigint"), ("name", "text")), 9)
    two = find_drift(MARK, _now(("id", "bigint"), ("name", "text")), 8)
    assert one is not None and two is not None and one.fingerprint != two.fingerprint
    again = find_drift(MARK, _now(("id", "bigint"), ("name", "text")), 9)
    assert again is not None and again.fingerprint == one.fingerprint


def test_a_table_dropped_and_created_again_has_another_identity() -> None:
    marked = replace(MARK, identity="oid:16384")
    same = replace(_now(("id", "bigint"), ("name", "text")), identity="oid:16384")
    assert find_drift(marked, same, 10) is None
    other = replace(same, identity="oid:16999")
    drift = find_drift(marked, other, 0)
    assert drift is not None and drift.lost and drift.replaced_table and not drift.dropped_table
    assert drift.changes() == ["the table was dropped and created again"]
    # A mark from before identities compares columns and rows only.
    assert find_drift(MARK, other, 10) is None
