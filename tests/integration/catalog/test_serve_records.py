"""What serve keeps in the catalog: schedule slots fired once, and runs requested over HTTP."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hakiri.catalog.records import RunStatus
from hakiri.catalog.store import Catalog

SLOT = datetime(2026, 11, 26, 8, 0, tzinfo=UTC)


def test_a_slot_is_fired_by_one_holder_only_and_never_again(catalog: Catalog) -> None:
    assert catalog.last_fire("p") is None
    assert catalog.claim_fire("p", SLOT, "replica-a")
    assert not catalog.claim_fire("p", SLOT, "replica-b")  # the same slot, another replica
    assert not catalog.claim_fire("p", SLOT - timedelta(minutes=1), "replica-b")  # older
    fire = catalog.last_fire("p")
    assert fire is not None and (fire.slot, fire.holder) == (SLOT, "replica-a")
    assert catalog.claim_fire("p", SLOT + timedelta(minutes=1), "replica-b")
    fire = catalog.last_fire("p")
    assert fire is not None and (fire.slot, fire.holder) == (
        SLOT + timedelta(minutes=1),
        "replica-b",
    )
    assert catalog.last_fire("q") is None  # per pipeline


def test_a_requested_run_waits_pending_then_starts_under_its_own_id(catalog: Catalog) -> None:
    first = catalog.request_run("p", reason="vendor drop")
    second = catalog.request_run("p")
    catalog.request_run("q")
    assert [r.run_id for r in catalog.pending_runs("p")] == [first.run_id, second.run_id]
    assert len(catalog.pending_runs()) == 3

    started = catalog.start_run("p", run_id=first.run_id, trace_id="ab" * 16, trigger="ignored")
    assert (started.status, started.trigger, started.trigger_reason) == (
        RunStatus.RUNNING,
        "event",
        "vendor drop",
    )
    assert started.trace_id == "ab" * 16
    assert [r.run_id for r in catalog.pending_runs("p")] == [second.run_id]
    done = catalog.finish_run(first.run_id, RunStatus.SUCCESS, row_count=3)
    assert (done.status, done.row_count, done.trigger) == (RunStatus.SUCCESS, 3, "event")


def test_a_run_started_without_a_request_records_its_trigger(catalog: Catalog) -> None:
    run = catalog.start_run("p", trigger="schedule")
    assert catalog.runs("p")[0].trigger == "schedule"
    assert catalog.runs("p")[0].run_id == run.run_id
    assert catalog.ping()
