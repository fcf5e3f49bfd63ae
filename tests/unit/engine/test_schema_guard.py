"""The schema guard decides before any row of a batch moves: a new source column is added to
the target first (and logged), an incompatible type stops the batch before it is staged."""

from __future__ import annotations

import pytest

from hakiri.catalog.store import Catalog
from hakiri.engine.crash import SimulatedCrash, crashing_at
from tests.unit.engine.conftest import Bench


@pytest.fixture
def loaded(bench: Bench) -> Bench:
    bench.write("data/a.csv", "id,name\n1,ada\n")
    assert bench.apply().status == "success"
    return bench


def _columns(bench: Bench) -> list[tuple[str, str]]:
    return [(c.name, c.type) for c in bench.destination.tables[(None, "t")].columns]


def _events(bench: Bench) -> list[tuple[str, dict]]:
    with Catalog.open(bench.catalog_url, migrate=False) as catalog:
        return [(e.kind, e.detail) for e in catalog.schema_events("p")]


def test_a_new_column_is_added_to_the_target_before_the_batch_is_staged(loaded: Bench) -> None:
    loaded.write("data/b.csv", "id,name,email\n2,grace,g@navy.mil\n")

    # Stopped right after staging: the target has the column, and no row of the batch.
    with crashing_at("after_stage"), pytest.raises(SimulatedCrash):
        loaded.apply()
    assert _columns(loaded) == [("id", "integer"), ("name", "string"), ("email", "string")]
    assert loaded.rows() == [{"id": 1, "name": "ada", "email": None}]
    assert [kind for kind, _ in _events(loaded)] == ["add_column"]

    # The crashed run's claim is handed back (as its expiry would), and the batch loads.
    with Catalog.open(loaded.catalog_url, migrate=False) as catalog:
        [batch] = [b for b in catalog.batches("p") if b.file_path == "data/b.csv"]
        catalog.release("p", batch.batch_id, batch.holder or "")
    resumed = loaded.apply()

    assert resumed.status == "success"
    assert loaded.rows() == [
        {"id": 1, "name": "ada", "email": None},
        {"id": 2, "name": "grace", "email": "g@navy.mil"},
    ]
    assert [kind for kind, _ in _events(loaded)] == ["add_column"]  # decided once


def test_an_incompatible_type_stops_the_batch_before_it_is_staged(loaded: Bench) -> None:
    loaded.write("data/b.csv", "id,name\nx2,grace\n")
    staged_before = list(loaded.destination.staged)

    outcome = loaded.apply()

    assert outcome.status == "failed"
    assert "id" in (outcome.error or "") and "integer" in (outcome.error or "")
    assert loaded.destination.staged == staged_before  # refused before any row moved
    assert loaded.rows() == [{"id": 1, "name": "ada"}]
    assert _columns(loaded) == [("id", "integer"), ("name", "string")]
    [(kind, detail)] = _events(loaded)
    assert kind == "blocked" and ["incompatible", "id"] in detail["changes"]
