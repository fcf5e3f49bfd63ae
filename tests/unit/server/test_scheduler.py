"""Which schedule slot a serve replica fires, and when it leaves a slot to another replica."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hakiri.catalog.records import ScheduleFire
from hakiri.server.scheduler import slot_to_fire
from hakiri.spec.schedule import parse_schedule

EVERY_2S = parse_schedule("every 2s")
HOURLY = parse_schedule("0 * * * *")
T0 = datetime(2026, 11, 26, 8, 0, 0, tzinfo=UTC)


def _fired(slot: datetime, holder: str) -> ScheduleFire:
    return ScheduleFire("p", slot, slot, holder)


def test_the_first_slot_fires_at_once() -> None:
    assert slot_to_fire(EVERY_2S, None, T0 + timedelta(seconds=1), "a") == T0


def test_a_fired_slot_does_not_fire_again() -> None:
    assert slot_to_fire(EVERY_2S, _fired(T0, "a"), T0 + timedelta(seconds=1.9), "b") is None


def test_missed_slots_collapse_into_the_latest() -> None:
    now = T0 + timedelta(minutes=10, seconds=1)
    assert slot_to_fire(EVERY_2S, _fired(T0, "a"), now, "a") == T0 + timedelta(minutes=10)
    assert slot_to_fire(HOURLY, _fired(T0, "a"), T0 + timedelta(hours=5, minutes=3), "b") == (
        T0 + timedelta(hours=5)
    )


def test_the_replica_that_fired_last_leaves_the_next_slot_to_the_others_for_a_moment() -> None:
    last = _fired(T0, "a")
    next_slot = T0 + timedelta(seconds=2)
    just_due = next_slot + timedelta(seconds=0.1)
    assert slot_to_fire(EVERY_2S, last, just_due, "a") is None
    assert slot_to_fire(EVERY_2S, last, just_due, "b") == next_slot
    # Alone, "a" still fires it, a moment later.
    assert slot_to_fire(EVERY_2S, last, next_slot + timedelta(seconds=0.9), "a") == next_slot


def test_the_turn_is_short_next_to_a_short_interval() -> None:
    every_1s = parse_schedule("every 1s")
    last = _fired(T0, "a")
    assert slot_to_fire(every_1s, last, T0 + timedelta(seconds=1.6), "a") == T0 + timedelta(
        seconds=1
    )
