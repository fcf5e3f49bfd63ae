"""The mode added from outside hakiri (tests/support/insert_only_mode.py) runs on the engine
bench too: the fake destination offers `merge`, so it loads the mode without knowing it."""

from __future__ import annotations

from tests.support.insert_only_mode import insert_only_new_keys
from tests.unit.engine.conftest import Bench


def test_the_engine_loads_a_registered_mode_through_its_strategy(bench: Bench) -> None:
    with insert_only_new_keys():
        bench.manifest(load='{ mode = "insert_only_new_keys", upsert_key = ["id"] }')
        bench.write("data/a.csv", "id,name\n1,ada\n2,grace\n")
        assert bench.apply().rows == 2
        bench.write("data/b.csv", "id,name\n2,GRACE\n3,edsger\n")
        second = bench.apply()
        assert second.status == "success" and second.batches == 1
        assert [(r["id"], r["name"]) for r in bench.rows()] == [
            (1, "ada"),
            (2, "grace"),
            (3, "edsger"),
        ]
