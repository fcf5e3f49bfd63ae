"""Schedule slots: what is due now given the last fire, so a restart neither skips nor doubles a slot."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from hakiri.spec.schedule import parse_schedule


def at(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


def test_every_slots_fall_on_multiples_of_the_interval() -> None:
    every = parse_schedule("every 15m")
    assert every.latest_slot(at("2026-01-01T10:22:05")) == at("2026-01-01T10:15:00")
    assert every.latest_slot(at("2026-01-01T10:30:00")) == at("2026-01-01T10:30:00")
    assert every.next_slot(at("2026-01-01T10:30:00")) == at("2026-01-01T10:45:00")


def test_cron_slots() -> None:
    hourly = parse_schedule("0 */2 * * *")
    assert hourly.latest_slot(at("2026-01-01T03:59:59")) == at("2026-01-01T02:00:00")
    assert hourly.latest_slot(at("2026-01-01T04:00:00")) == at("2026-01-01T04:00:00")
    assert hourly.latest_slot(at("2026-01-01T04:00:00.5")) == at("2026-01-01T04:00:00")
    assert hourly.next_slot(at("2026-01-01T04:00:00")) == at("2026-01-01T06:00:00")


@pytest.mark.parametrize("text", ["every 2s", "every 1h", "*/5 * * * *", "30 6 * * 1"])
def test_a_slot_fires_once_and_missed_slots_collapse_into_the_latest(text: str) -> None:
    schedule = parse_schedule(text)
    now = at("2026-03-02T06:31:07")
    slot = schedule.due(None, now)
    assert slot == schedule.latest_slot(now)  # never fired: the latest slot, once
    assert schedule.due(slot, now) is None  # fired: not again, even after a restart
    later = schedule.next_slot(now)
    assert schedule.due(slot, later) == later
    # Down for ten slots: one run at the latest, not ten.
    much_later = later
    for _ in range(10):
        much_later = schedule.next_slot(much_later)
    assert schedule.due(slot, much_later + timedelta(seconds=1)) == much_later


def test_naive_times_are_refused() -> None:
    with pytest.raises(ValueError, match="naive datetime"):
        parse_schedule("every 1m").due(None, datetime(2026, 1, 1))
