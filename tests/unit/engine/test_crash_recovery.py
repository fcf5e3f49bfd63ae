"""Exactly once, in-process: crash a run at every point of the commit protocol, run it again
on the same catalog and destination, and the target holds each row once.

The crash is `crashing_at` (engine.crash): the point raises SimulatedCrash, and the run stops
there as a killed process would. What the crashed run claimed stays claimed until its claim
expires (a short TTL here; a dead process on another host leaves the same), then the next
run takes it over. The subprocess matrix with HAKIRI_CRASH_AT (os._exit) against the real
destinations is tests/integration/engine/test_crash_points.py.
"""

from __future__ import annotations

import time

import pytest

from hakiri.catalog.records import BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.engine.controls import RunControls
from hakiri.engine.crash import POINTS, SimulatedCrash, crashing_at
from tests.unit.engine.conftest import Bench

CLAIM_TTL = 0.2  # what the crashed run claimed is free again this soon
FILES = {
    "data/part-1.csv": "id,name\n1,ada\n2,grace\n3,edsger\n",
    "data/part-2.csv": "id,name\n2,grace hopper\n4,barbara\n",
}
LOADS = {
    "append": '{ mode = "append" }',
    "upsert": '{ mode = "upsert", upsert_key = ["id"] }',
    "truncate": '{ mode = "truncate" }',
}
# What a clean run leaves, by mode (truncate: both files are one snapshot batch).
EVERY_ROW = [(1, "ada"), (2, "grace"), (2, "grace hopper"), (3, "edsger"), (4, "barbara")]
CLEAN = {
    "append": EVERY_ROW,
    "upsert": [(1, "ada"), (2, "grace hopper"), (3, "edsger"), (4, "barbara")],
    "truncate": EVERY_ROW,
}
# The batch crashed: the second where there are two (the first is committed by then).
CRASHED_HIT = {"append": 2, "upsert": 2, "truncate": 1}


def _bench(bench: Bench, mode: str) -> Bench:
    bench.manifest(load=LOADS[mode])
    for path, text in FILES.items():
        bench.write(path, text)
    return bench


def _rows(bench: Bench) -> list[tuple[object, ...]]:
    return sorted((r["id"], r["name"]) for r in bench.rows())


def _crash(bench: Bench, point: str, hit: int) -> None:
    with crashing_at(point, hit), pytest.raises(SimulatedCrash):
        bench.apply(RunControls(claim_ttl=CLAIM_TTL))


@pytest.mark.parametrize("mode", LOADS)
def test_a_clean_run_is_what_every_recovery_is_compared_with(bench: Bench, mode: str) -> None:
    outcome = _bench(bench, mode).apply()

    assert outcome.batches == 2 if CRASHED_HIT[mode] == 2 else 1
    assert _rows(bench) == CLEAN[mode]


@pytest.mark.parametrize("mode", LOADS)
@pytest.mark.parametrize("point", POINTS)
def test_a_crash_at_any_point_is_recovered_exactly_once(
    bench: Bench, mode: str, point: str
) -> None:
    _bench(bench, mode)
    fake = bench.destination

    _crash(bench, point, CRASHED_HIT[mode])

    # The crash is where it was said to be: the target holds the crashed batch's rows only
    # once its destination commit happened, and the catalog never marked that batch.
    with Catalog.open(bench.catalog_url, migrate=False) as catalog:
        crashed = catalog.batches("p", status=BatchStatus.PROCESSING)
    assert len(crashed) == 1
    committed_in_destination = point in ("after_dest_commit", "before_catalog_commit")
    assert len(fake.ledger) == CRASHED_HIT[mode] - 1 + committed_in_destination
    assert bool(fake.staging) == (point == "after_stage")  # staged, never committed

    time.sleep(CLAIM_TTL * 1.5)
    resumed = bench.apply()

    # A batch the ledger has is marked committed without loading: then nothing is left to load.
    assert resumed.status == ("no-op" if committed_in_destination else "success"), resumed.error
    assert _rows(bench) == CLEAN[mode]
    assert resumed.recovered == (1 if committed_in_destination else 0)
    assert resumed.batches == (0 if committed_in_destination else 1)
    with Catalog.open(bench.catalog_url, migrate=False) as catalog:
        statuses = {b.status for b in catalog.batches("p")}
    assert statuses == {BatchStatus.COMMITTED}
    assert bench.apply().status == "no-op"
    assert _rows(bench) == CLEAN[mode]
