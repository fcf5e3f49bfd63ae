"""The CDC tests' and bench's source workload (tests/support/cdc_workload.py) in lanes, on a
real PostgreSQL: two lanes, each a thread with a connection of its own, commit at once
without a failure; each lane's rows are exactly its model of the keys (ids, the lines'
orders, the out-of-line profiles), in its own range of ids; the workload's counts are the
lanes' summed and are what the WAL holds (test_decoding: each transaction one commit, in
one lane's range); and it refuses to start a lane it has no seed rows for."""

from __future__ import annotations

import re
import time
from collections import Counter

import psycopg
import pytest
from psycopg import sql

from tests.support.cdc_workload import LANE_IDS, TABLES, Workload

pytestmark = [
    pytest.mark.integration,
    pytest.mark.engine_free("the test workload on PostgreSQL alone"),
]

SEED = 20261129


def test_two_lanes_commit_disjoint_rows_that_match_their_models_and_counts_sum(
    pg_url: str, pg_schema: str
) -> None:
    workload = Workload(pg_url, pg_schema, seed=SEED)
    workload.create(customers=40, orders=80, lanes=2)
    with pytest.raises(ValueError, match=r"create\(lanes=3\)"):
        workload.start(lanes=3)
    slot = f"s_{pg_schema}"  # what the lanes commit, as the WAL tells it
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute("SELECT pg_create_logical_replication_slot(%s, 'test_decoding')", (slot,))
    try:
        workload.start(rate=None, lanes=2)
        try:
            deadline = time.monotonic() + 8
            # Both lanes well under way (a deadline, not a timing assertion: the counts are).
            while time.monotonic() < deadline and any(
                lane.counts.transactions < 300 for lane in workload.lanes
            ):
                time.sleep(0.1)
        finally:
            committed = workload.stop()  # re-raises a lane's failure
        decoded = _transactions(pg_url, slot, pg_schema)
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute("SELECT pg_drop_replication_slot(%s)", (slot,))

    lanes = workload.lanes
    assert len(lanes) == 2
    assert all(lane.counts.transactions >= 300 for lane in lanes), [lane.counts for lane in lanes]
    assert committed.transactions == sum(lane.counts.transactions for lane in lanes)
    assert committed.changes == sum(lane.counts.changes for lane in lanes)
    assert committed.kinds == sum((lane.counts.kinds for lane in lanes), Counter())
    assert committed.kinds.total() == committed.transactions
    assert committed.changes >= committed.transactions

    with psycopg.connect(pg_url, autocommit=True) as conn:

        def by_lane(query: str) -> dict[int, set[tuple]]:
            found: dict[int, set[tuple]] = {}
            for row in conn.execute(sql.SQL(query).format(schema=sql.Identifier(pg_schema))):
                found.setdefault(row[0] // LANE_IDS, set()).add(row)
            return found

        ids = {table: by_lane(f"SELECT id FROM {{schema}}.{table}") for table in TABLES}
        lines = by_lane("SELECT id, order_id FROM {schema}.order_lines")
        big = by_lane("SELECT id FROM {schema}.customers WHERE length(profile) > 8000")

    for k, lane in enumerate(lanes):
        assert lane.ids.start == k * LANE_IDS + 1
        for table in TABLES:
            live = {(key,) for key in lane._keys(table).items}
            assert ids[table].get(k, set()) == live, f"lane {k}, {table}"
        assert lines.get(k, set()) == set(lane.order_of.items()), f"lane {k}: lines' orders"
        assert big.get(k, set()) == {(key,) for key in lane.big}, f"lane {k}: large profiles"
    # No row outside the lanes' ranges.
    assert {k for table in TABLES for k in ids[table]} == {0, 1}

    # The WAL holds the transactions the counts say, each lane's in its own range, and
    # each transaction's changes together (one commit), never two lanes' in one.
    lanes_of = [{key // LANE_IDS for key in keys} for keys in decoded]
    assert all(len(found) == 1 for found in lanes_of)
    for k, lane in enumerate(lanes):
        mine = [keys for keys, found in zip(decoded, lanes_of, strict=True) if found == {k}]
        assert len(mine) == lane.counts.transactions, f"lane {k}: transactions"
        assert sum(map(len, mine)) == lane.counts.changes, f"lane {k}: changes"
    assert sum(1 for keys in decoded if len(keys) > 1) >= committed.kinds["new_order"]


def _transactions(pg_url: str, slot: str, schema: str) -> list[list[int]]:
    """The committed transactions on `schema`'s tables in the slot, each as the ids of the
    rows it changed (a key update: the old id), in commit order."""
    found: list[list[int]] = []
    with psycopg.connect(pg_url, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT data FROM pg_logical_slot_get_changes(%s, NULL, NULL, "
            "'skip-empty-xacts', '1', 'include-xids', '0')",
            (slot,),
        )
        for (data,) in rows:
            if data == "BEGIN":
                keys: list[int] = []
            elif data.startswith("COMMIT"):
                if keys:  # another test's transaction changes none of these tables
                    found.append(keys)
            elif data.startswith(f"table {schema}."):
                match = re.search(r"\bid\[bigint\]:(\d+)", data)
                assert match, data
                keys.append(int(match[1]))
    return found
