"""An endpoint read once per `for_each` entry: its paths, what the manifest refuses, the
columns and walks of a table, its lineage."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from hakiri.catalog.records import Batch, BatchStatus
from hakiri.sources.cursors.ranges import CursorRange
from hakiri.sources.kinds import source_datasets
from hakiri.sources.rest.source import RestTableSource
from hakiri.spec.pipeline import PipelineSpec, TableSpec
from hakiri.spec.rest import RestEndpoint


def test_a_for_each_endpoint_has_one_path_per_entry_and_its_values_as_columns() -> None:
    endpoint = RestEndpoint(
        path="stores/{store}/{kind}/refunds",
        for_each=[{"store": "eu", "kind": "a"}, {"kind": "b", "store": "us"}],
    )
    assert endpoint.paths() == [
        ("stores/eu/a/refunds", {"store": "eu", "kind": "a"}),
        ("stores/us/b/refunds", {"store": "us", "kind": "b"}),
    ]
    assert endpoint.for_each_fields == ["store", "kind"]
    assert RestEndpoint(path="orders").paths() == [("orders", {})]


@pytest.mark.parametrize(
    ("keys", "refused"),
    [
        ({"path": "s/{store}/x", "for_each": [{"store": "a"}, {"shop": "b"}]}, "the same fields"),
        ({"path": "s/{store}/x", "for_each": [{"shop": "a"}]}, "names store, not in for_each"),
        ({"path": "s/{id}/x", "for_each": [{"id": "a"}], "parent": "p"}, "not both"),
        ({"path": "x", "for_each": [{"id": "a"}], "columns": {"id": "int"}}, "declared column"),
        ({"path": "x", "for_each": [{"id": "a"}], "parent_columns": {"a": "b"}}, "no `parent`"),
    ],
)
def test_a_for_each_that_does_not_fit_its_path_is_refused(
    keys: dict[str, Any], refused: str
) -> None:
    with pytest.raises(ValidationError, match=refused):
        RestEndpoint.model_validate(keys)


def _rest_spec(**backfill: Any) -> PipelineSpec:
    doc: dict[str, Any] = {
        "id": "shops",
        "tables": ["refunds"],
        "incremental": "updated_at",
        "destination": {"connector": "context"},
        "load": {"mode": "upsert", "upsert_key": ["id"]},
        "source": {
            "connector": "rest",
            "config": {
                "base_url": "https://api.example.com/v1",
                "endpoints": {
                    "refunds": {
                        "path": "stores/{store}/refunds",
                        "params": {"since": "{cursor}"},
                        "columns": {"id": "bigint", "updated_at": "timestamp"},
                        "for_each": [{"store": "eu"}, {"store": "us"}],
                    }
                },
            },
        },
    }
    if backfill:
        doc["backfill"] = backfill
    return PipelineSpec.model_validate(doc)


def _chunk(lo: str | None, hi: str | None) -> Batch:
    chunk = CursorRange("updated_at", "timestamp", "timestamp with time zone", lo, hi, True, False)
    return Batch(
        pipeline_id="p",
        batch_id="chunk:x",
        table_name="refunds",
        kind="chunk",
        predicate=chunk.to_predicate(),
        status=BatchStatus.PENDING,
        attempt=0,
        seq=0,
    )


def test_a_rest_for_each_table_observes_its_values_and_reads_one_walk_each(
    tmp_path: Path,
) -> None:
    spec = _rest_spec()
    source = RestTableSource(tmp_path, spec, spec.source.config, {})  # type: ignore[arg-type]
    observed = source.observe(TableSpec(name="refunds"))
    assert [(c.name, c.type) for c in observed.columns or ()] == [
        ("id", "bigint"),
        ("updated_at", "timestamp"),
        ("store", "string"),
    ]
    endpoint = spec.source.config.endpoints["refunds"]  # type: ignore[union-attr]
    batch = _chunk("2024-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00")
    walks = source._walks(endpoint, batch, CursorRange.from_predicate(batch.predicate or ""))
    assert [(w.path, dict(w.params), dict(w.values), w.until) for w in walks] == [
        ("stores/eu/refunds", {"since": "2024-01-01T00:00:00Z"}, {"store": "eu"}, None),
        ("stores/us/refunds", {"since": "2024-01-01T00:00:00Z"}, {"store": "us"}, None),
    ]
    assert source_datasets(tmp_path, None, spec, TableSpec(name="refunds"), {}) == [  # type: ignore[arg-type]
        ("https://api.example.com", "/v1/stores/eu/refunds"),
        ("https://api.example.com", "/v1/stores/us/refunds"),
    ]
