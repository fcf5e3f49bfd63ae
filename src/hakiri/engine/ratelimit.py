"""`rate_budget`: a token bucket on source reads, shared by every chunk worker of a run.

'60/min' refills one token per second and holds at most a second's worth (at
least one token), so reads never burst past the budget. A read that needs
more tokens than the bucket holds waits for them one refill at a time.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["TokenBucket", "parse_rate"]

_PER = {"s": 1.0, "min": 60.0, "h": 3600.0}


def parse_rate(text: str) -> float:
    """'60/min' -> 1.0 token per second."""
    count, _, unit = text.partition("/")
    return int(count) / _PER[unit]


class TokenBucket:
    def __init__(
        self,
        rate_per_second: float,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.rate = rate_per_second
        self.capacity = max(1.0, rate_per_second)
        self._tokens = self.capacity
        self._clock, self._sleep = clock, sleep
        self._stamp = clock()
        self._lock = threading.Lock()
        self.waited_seconds = 0.0  # total time readers spent waiting

    def acquire(self, tokens: int = 1) -> float:
        """Take `tokens`, one at a time, waiting as long as the budget needs; returns the seconds waited."""
        waited = 0.0
        for _ in range(tokens):
            while True:
                with self._lock:
                    now = self._clock()
                    self._tokens = min(
                        self.capacity, self._tokens + (now - self._stamp) * self.rate
                    )
                    self._stamp = now
                    # A hair short of a token is a token: float refills must not spin forever.
                    if self._tokens >= 1.0 - 1e-9:
                        self._tokens = max(0.0, self._tokens - 1.0)
                        break
                    pause = (1.0 - self._tokens) / self.rate
                self._sleep(pause)
                waited += pause
        with self._lock:
            self.waited_seconds += waited
        return waited
