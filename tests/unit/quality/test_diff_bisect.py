"""Hash bisection over two in-memory tables: what it finds, and how little it reads."""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

from hypothesis import given, settings
from hypothesis import strategies as st

from hakiri.quality.diff.bisect import Key, Moved, Sums, bisect, key_order, split_step
from hakiri.quality.diff.canon import key_hash


class Side:
    """A table held in memory, key -> value, hashed as a system would hash it."""

    def __init__(self, rows: dict[int, str]) -> None:
        self.hashed = [
            (key_hash([str(k)]), hashlib.md5(f"{k}|{v}".encode()).hexdigest(), (str(k),))
            for k, v in rows.items()
        ]
        self.moved = Moved()

    def _within(self, within: Sequence[str]) -> list[tuple[str, str, Key]]:
        if not within:
            return self.hashed
        width, wanted = len(within[0]), set(within)
        return [r for r in self.hashed if r[0][:width] in wanted]

    def segments(self, width: int, within: Sequence[str]) -> dict[str, Sums]:
        found: dict[str, Sums] = {}
        for kh, rh, _ in self._within(within):
            was = found.get(kh[:width], Sums(0, 0, 0))
            found[kh[:width]] = Sums(
                was.rows + 1, was.low + int(rh[:8], 16), was.high + int(rh[8:16], 16)
            )
        self.moved.add(segments=len(found))
        return found

    def rows(self, within: Sequence[str]) -> dict[Key, str]:
        found = {key: rh for _, rh, key in self._within(within)}
        self.moved.add(rows=len(found))
        return found


TABLE = {i: f"row {i}" for i in range(1, 100_001)}


def test_identical_tables_cost_one_level_of_sums_and_no_row() -> None:
    source, target = Side(TABLE), Side(TABLE)
    found = bisect(source, target, len(TABLE))
    assert found.identical and found.levels == [4096]
    assert source.moved.rows == target.moved.rows == 0


def test_one_changed_row_in_100_000_is_found_reading_a_few_hundred_rows() -> None:
    changed = {**TABLE, 5: "edited"}
    source, target = Side(TABLE), Side(changed)
    found = bisect(source, target, len(TABLE))
    assert (found.only_in_source, found.only_in_target, found.changed) == ([], [], [("5",)])
    assert source.moved.rows < 100


def test_scattered_differences_are_each_found_once() -> None:
    target = {k: v for k, v in TABLE.items() if k % 1000 != 1}  # 100 missing
    target.update({k: "edited" for k in range(2, 100_001, 500)})  # 200 changed
    target.update({200_000 + k: "new" for k in range(300)})  # 300 extra
    found = bisect(Side(TABLE), Side(target), len(target))
    assert len(found.only_in_source) == 100
    assert len(found.changed) == 200
    assert len(found.only_in_target) == 300
    assert found.only_in_source[:2] == [("1",), ("1001",)]  # numbers in numeric order


@settings(max_examples=40, deadline=None)
@given(
    st.dictionaries(st.integers(0, 5_000), st.sampled_from("abc"), max_size=600),
    st.dictionaries(st.integers(0, 5_000), st.sampled_from("abc"), max_size=600),
)
def test_bisection_finds_exactly_what_a_full_comparison_finds(
    ours: dict[int, str], theirs: dict[int, str]
) -> None:
    found = bisect(Side(ours), Side(theirs), max(len(ours), len(theirs)))
    assert sorted(found.only_in_source) == sorted((str(k),) for k in ours.keys() - theirs.keys())
    assert sorted(found.only_in_target) == sorted((str(k),) for k in theirs.keys() - ours.keys())
    both = ours.keys() & theirs.keys()
    assert sorted(found.changed) == sorted((str(k),) for k in both if ours[k] != theirs[k])


def test_a_split_is_chosen_only_while_it_reads_less() -> None:
    assert split_step(1, 10) == 0  # a few rows: read them
    assert split_step(1_000, 1_465_000) >= 1  # 1,000 segments of ~1,465 rows: split
    assert split_step(4_096, 40_000) == 0  # ~10 rows each: reading them is cheapest


def test_keys_sort_as_a_person_expects() -> None:
    keys = [("10",), ("9",), (None,), ("b",), ("a",), ("-1.5",)]
    assert sorted(keys, key=key_order) == [("-1.5",), ("9",), ("10",), ("a",), ("b",), (None,)]
