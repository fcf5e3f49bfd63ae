"""Pipelines, runs, cursors, the schema log and alerts: what the catalog remembers."""

from __future__ import annotations

import time
from datetime import UTC, timedelta

import pytest

from hakiri.catalog.records import Phase, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError

SPEC = {"id": "orders", "source": {"type": "files", "path": "${DATA}/orders"}, "n": [1, 2.5, None]}


def test_record_applied_keeps_the_spec_unexpanded(catalog: Catalog) -> None:
    catalog.record_applied("orders", SPEC, "hash-1", Phase.BACKFILLING)
    state = catalog.pipeline_state("orders")
    assert state is not None
    assert state.applied_spec == SPEC
    assert (state.spec_hash, state.phase) == ("hash-1", Phase.BACKFILLING)
    assert state.applied_at.tzinfo is UTC
    assert catalog.pipeline_state("nobody") is None


def test_record_applied_again_replaces_hash_spec_and_phase(catalog: Catalog) -> None:
    catalog.record_applied("orders", SPEC, "hash-1", Phase.BACKFILLING)
    first = catalog.pipeline_state("orders")
    catalog.record_applied("orders", {**SPEC, "n": []}, "hash-2", Phase.STREAMING)
    catalog.record_applied("users", {"id": "users"}, "hash-u", Phase.STREAMING)
    states = catalog.pipeline_states()
    assert list(states) == ["orders", "users"]
    assert states["orders"].spec_hash == "hash-2"
    assert states["orders"].applied_spec["n"] == []
    assert states["orders"].phase is Phase.STREAMING
    assert first is not None and states["orders"].applied_at >= first.applied_at


def test_set_phase_and_retire_keep_everything_else(catalog: Catalog) -> None:
    catalog.record_applied("orders", SPEC, "hash-1", Phase.BACKFILLING)
    catalog.set_cursor("orders", "orders", {"updated_at": "2024-01-01"})
    run = catalog.start_run("orders")
    catalog.set_phase("orders", Phase.STREAMING)
    assert catalog.pipeline_state("orders").phase is Phase.STREAMING  # type: ignore[union-attr]
    catalog.retire("orders")
    state = catalog.pipeline_state("orders")
    assert state is not None and state.phase is Phase.RETIRED and state.spec_hash == "hash-1"
    assert catalog.cursors("orders") == {"orders": {"updated_at": "2024-01-01"}}
    assert [r.run_id for r in catalog.runs("orders")] == [run.run_id]


def test_set_phase_of_an_unknown_pipeline_is_an_error(catalog: Catalog) -> None:
    with pytest.raises(CatalogError, match="`ghost` has never been applied"):
        catalog.set_phase("ghost", Phase.STREAMING)


def test_a_run_starts_running_and_finishes(catalog: Catalog) -> None:
    run = catalog.start_run("orders", trace_id="abc123")
    assert run.status is RunStatus.RUNNING and run.ended_at is None
    assert len(run.run_id) == 32 and run.trace_id == "abc123"
    assert catalog.runs("orders") == [run]

    done = catalog.finish_run(
        run.run_id,
        RunStatus.FAILED,
        row_count=10,
        bytes=2048,
        error_kind="SourceUnreachable",
        error_msg="connection refused",
    )
    assert done.status is RunStatus.FAILED
    assert (done.row_count, done.bytes, done.error_kind) == (10, 2048, "SourceUnreachable")
    assert done.error_msg == "connection refused" and done.trace_id == "abc123"
    assert done.ended_at is not None and done.ended_at >= done.started_at
    assert catalog.runs("orders") == [done]


def test_runs_are_newest_first_filtered_and_limited(catalog: Catalog) -> None:
    started = []
    for i in range(4):
        started.append(catalog.start_run("orders" if i % 2 == 0 else "users", run_id=f"run-{i}"))
        time.sleep(0.002)
    assert [r.run_id for r in catalog.runs()] == ["run-3", "run-2", "run-1", "run-0"]
    assert [r.run_id for r in catalog.runs("orders")] == ["run-2", "run-0"]
    assert [r.run_id for r in catalog.runs(limit=1)] == ["run-3"]
    assert catalog.runs("nobody") == []


def test_finishing_an_unknown_run_is_an_error(catalog: Catalog) -> None:
    with pytest.raises(CatalogError, match="no run `nope`"):
        catalog.finish_run("nope", RunStatus.SUCCESS)


def test_cursors_last_write_wins(catalog: Catalog) -> None:
    assert catalog.get_cursor("orders", "orders") is None
    catalog.set_cursor("orders", "orders", {"column": "updated_at", "value": "2024-01-01T00:00:00"})
    catalog.set_cursor("orders", "lines", {"column": "id", "value": 10})
    catalog.set_cursor("orders", "orders", {"column": "updated_at", "value": "2024-02-01T00:00:00"})
    catalog.set_cursor("users", "users", {"value": 1})
    assert catalog.get_cursor("orders", "orders") == {
        "column": "updated_at",
        "value": "2024-02-01T00:00:00",
    }
    assert catalog.cursors("orders") == {
        "lines": {"column": "id", "value": 10},
        "orders": {"column": "updated_at", "value": "2024-02-01T00:00:00"},
    }
    assert catalog.cursors("nobody") == {}


def test_schema_events_are_kept_oldest_first(catalog: Catalog) -> None:
    first = catalog.log_schema_event(
        "orders", "orders", "add_column", {"column": "note", "type": "text"}, run_id="r1"
    )
    second = catalog.log_schema_event(
        "orders", "orders", "widen", {"column": "qty", "from": "int", "to": "bigint"}
    )
    catalog.log_schema_event("users", "users", "accept", {})
    events = catalog.schema_events("orders")
    assert events == [first, second]
    assert events[0].detail == {"column": "note", "type": "text"} and events[0].run_id == "r1"
    assert first.event_id is not None and second.event_id is not None
    assert first.event_id < second.event_id
    assert events[0].created_at is not None and events[0].created_at.tzinfo is UTC


def test_alerts_newest_first_with_filters(catalog: Catalog) -> None:
    old = catalog.add_alert("warning", "empty_source", "no new files", pipeline_id="orders")
    time.sleep(0.002)
    mid = catalog.add_alert("error", "validator", "3 nulls in id", pipeline_id="users", run_id="r9")
    time.sleep(0.002)
    new = catalog.add_alert("info", "anomaly", "row count 10x the usual")
    assert catalog.alerts() == [new, mid, old]
    assert catalog.alerts(pipeline_id="orders") == [old]
    assert catalog.alerts(limit=2) == [new, mid]
    assert mid.created_at is not None
    assert catalog.alerts(since=mid.created_at) == [new, mid]
    assert catalog.alerts(since=mid.created_at.astimezone(UTC) + timedelta(days=1)) == []
    assert (mid.severity, mid.kind, mid.run_id) == ("error", "validator", "r9")
