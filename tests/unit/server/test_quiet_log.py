"""A failure that repeats is said once, once a minute while it lasts, and when it ends."""

from __future__ import annotations

from hakiri.server.quiet_log import QuietLog


def test_a_repeated_failure_is_said_once_a_minute_and_its_recovery_once() -> None:
    now = [0.0]
    said: list[str] = []
    quiet = QuietLog(said.append, every=60, clock=lambda: now[0])

    for second in range(0, 130, 1):  # two minutes of a failure every second
        now[0] = second
        quiet.failed("tick", "tick failed: catalog down")
    now[0] = 131
    quiet.ok("tick", "the scheduler")
    quiet.ok("tick", "the scheduler")  # nothing was failing any more: nothing to say

    assert said == [
        "tick failed: catalog down (said again every 60s while it lasts)",
        "tick failed: catalog down (still failing after 60s, 61 times)",
        "tick failed: catalog down (still failing after 120s, 121 times)",
        "the scheduler recovered after 131s (130 failed attempt(s))",
    ]
    assert quiet.failing() == {}


def test_another_cause_is_said_at_once_and_the_message_can_change_within_one() -> None:
    said: list[str] = []
    quiet = QuietLog(said.append, clock=lambda: 0.0)

    quiet.failed("p", "p: failed run 1: unreachable", cause="unreachable")
    quiet.failed("p", "p: failed run 2: unreachable", cause="unreachable")
    quiet.failed("p", "p: failed run 3: key missing", cause="key missing")

    assert len(said) == 2 and said[1].startswith("p: failed run 3: key missing")
    assert quiet.failing() == {"p": "p: failed run 3: key missing"}
    assert quiet.streak("p") == 1 and quiet.streak("q") == 0
