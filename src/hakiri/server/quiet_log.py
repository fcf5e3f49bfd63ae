"""Say a failure that repeats once, again once a minute while it lasts, and when it is over.

`serve` ticks twice a second and fires schedules every few seconds: while the catalog or
a destination is down, every tick or run fails the same way. The operator needs to know
that it started, that it is still going on, and that it ended; not a line per attempt.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["QuietLog"]


@dataclass
class _Failing:
    message: str
    cause: str
    since: float
    said_at: float
    count: int = 1


class QuietLog:
    def __init__(
        self,
        log: Callable[[str], None],
        every: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.log, self.every, self.clock = log, every, clock
        self._failing: dict[str, _Failing] = {}

    def failed(self, key: str, message: str, cause: str | None = None) -> None:
        """`cause` tells one failure from another (default: the message; a run's message
        names its run id, its cause does not)."""
        now = self.clock()
        cause = message if cause is None else cause
        known = self._failing.get(key)
        if known is None or known.cause != cause:
            self._failing[key] = _Failing(message, cause, now, now)
            self.log(f"{message} (said again every {self.every:g}s while it lasts)")
            return
        known.count += 1
        known.message = message
        if now - known.said_at >= self.every:
            known.said_at = now
            self.log(
                f"{message} (still failing after {now - known.since:.0f}s, {known.count} times)"
            )

    def ok(self, key: str, what: str) -> None:
        known = self._failing.pop(key, None)
        if known is not None:
            self.log(
                f"{what} recovered after {self.clock() - known.since:.0f}s "
                f"({known.count} failed attempt(s))"
            )

    def failing(self) -> dict[str, str]:
        """What is failing now: key -> the last message."""
        return {key: f.message for key, f in self._failing.items()}

    def streak(self, key: str) -> int:
        known = self._failing.get(key)
        return known.count if known else 0
