"""A rate budget ("60/min") shared by every request of one run, across processes.

    budget = RateBudget(Rate.parse("120/min"), run_dir / "source.budget")
    budget.take()        # blocks until one more request keeps the rate; returns the grant time

The budget is a sliding window: in any `period` there are at most `requests` grants,
whichever process (an engine task, a thread) asked. Its state is a ring of the last
`requests` grant times in one small file, read and written under `fcntl.flock`: a
grant is allowed when the oldest time in the ring is a whole period ago, and replaces
it. One take touches two numbers of the file, whatever the rate, and opens the file
afresh, so a budget can be pickled into forked workers and used from many threads.

A burst of up to `requests` goes at once, then grants follow the window: the same
rule as the APIs' own limits ("5000 requests an hour"), so the budget never asks for
more than the vendor would grant.

The file is shared by the processes of one machine (local engines, Sail, one Spark
worker host). Tasks on the other hosts of a cluster would each need a share of the rate.

An API that reports its own limit in every answer (Shopify's leaky bucket, "32/40" in
X-Shopify-Shop-Api-Call-Limit) counts every client of the account, hakiri's other
tasks and other apps alike: a `LeakyBucket` reads that header and tells the client how
long to wait before its next request, so it slows down before the API refuses it.
"""

from __future__ import annotations

import fcntl
import os
import re
import struct
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = ["LeakyBucket", "Rate", "RateBudget"]

_UNITS = {
    "s": 1.0,
    "sec": 1.0,
    "second": 1.0,
    "m": 60.0,
    "min": 60.0,
    "minute": 60.0,
    "h": 3600.0,
    "hr": 3600.0,
    "hour": 3600.0,
    "d": 86_400.0,
    "day": 86_400.0,
}
_RATE = re.compile(r"^\s*(\d+)\s*/\s*(\d*)\s*([a-z]+?)s?\s*$", re.IGNORECASE)
_MAX_REQUESTS = 1_000_000  # the ring is 8 bytes a request: at most 8 MB of file
_HEADER = struct.Struct("<4sIdI")  # magic, requests, period (s), index of the oldest grant
_MAGIC = b"HKRB"
_SLOT = struct.Struct("<d")


@dataclass(frozen=True)
class Rate:
    """At most `requests` requests in any `seconds`."""

    requests: int
    seconds: float

    @classmethod
    def parse(cls, text: str) -> Rate:
        """'60/min', '5000/h', '10/s', '100/hour', '1000/15min'; ValueError otherwise."""
        match = _RATE.match(text)
        unit = _UNITS.get(match.group(3).lower()) if match else None
        if match is None or unit is None:
            raise ValueError(
                f"cannot read the rate {text!r}: write requests/period, e.g. '60/min', "
                "'5000/h' or '10/s'"
            )
        requests, periods = int(match.group(1)), int(match.group(2) or 1)
        if not 0 < requests <= _MAX_REQUESTS or periods == 0:
            raise ValueError(
                f"the rate {text!r} must allow between 1 and {_MAX_REQUESTS:,} requests "
                "in a period longer than 0"
            )
        return cls(requests, unit * periods)

    def __str__(self) -> str:
        for name, seconds in (("h", 3600.0), ("min", 60.0), ("s", 1.0)):
            if self.seconds == seconds:
                return f"{self.requests}/{name}"
        return f"{self.requests}/{self.seconds:g}s"


@dataclass(frozen=True)
class RateBudget:
    """A `Rate` kept by every process that opens the same `path`."""

    rate: Rate
    path: Path

    def take(
        self,
        *,
        clock: Callable[[], float] = time.time,
        sleep: Callable[[float], None] = time.sleep,
    ) -> float:
        """Block until one more request keeps the rate; returns the grant time (epoch s)."""
        while True:
            wait = self._try_take(clock)
            if wait <= 0:
                return -wait
            sleep(wait)

    def _try_take(self, clock: Callable[[], float]) -> float:
        """Grant now (returns minus the grant time, ≤ 0) or say how long to wait (> 0)."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        except FileNotFoundError:  # made on first use: opening a source (plan) writes nothing
            self.path.parent.mkdir(parents=True, exist_ok=True)
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX)
            oldest_index = self._open_ring(fd)
            slot = _HEADER.size + oldest_index * _SLOT.size
            (oldest,) = _SLOT.unpack(os.pread(fd, _SLOT.size, slot))
            now = clock()
            if oldest > now:  # the clock went back (or a reboot): that grant is stale
                oldest = 0.0
            wait = oldest + self.rate.seconds - now
            if wait > 0:
                return wait
            os.pwrite(fd, _SLOT.pack(now), slot)
            following = (oldest_index + 1) % self.rate.requests
            os.pwrite(fd, struct.pack("<I", following), _HEADER.size - 4)
            return -now
        finally:
            os.close(fd)  # closing releases the lock

    def _open_ring(self, fd: int) -> int:
        """The index of the oldest grant; a missing, foreign or other-rate file starts over."""
        header = os.pread(fd, _HEADER.size, 0)
        if len(header) == _HEADER.size:
            magic, requests, seconds, oldest = _HEADER.unpack(header)
            if (magic, requests, seconds) == (_MAGIC, self.rate.requests, self.rate.seconds):
                return int(oldest)
        os.ftruncate(fd, 0)
        os.pwrite(fd, _HEADER.pack(_MAGIC, self.rate.requests, self.rate.seconds, 0), 0)
        os.ftruncate(fd, _HEADER.size + self.rate.requests * _SLOT.size)  # zeros: long ago
        return 0


def pipeline_budget(root: Path, pipeline_id: str, rate: str | None) -> RateBudget | None:
    """The budget every task of a pipeline's runs on this machine takes from (one file per
    pipeline, under the project's .hakiri directory); None without `rate_budget`."""
    if rate is None:
        return None
    return RateBudget(Rate.parse(rate), root / ".hakiri" / "budgets" / f"{pipeline_id}.budget")


@dataclass(frozen=True)
class LeakyBucket:
    """An API's leaky bucket as its answers report it: `header` holds 'used/size', and the
    bucket leaks `leak` requests a second. A client keeps `headroom` requests of it free."""

    header: str
    leak: float
    headroom: int = 4

    def pause(self, headers: Mapping[str, str]) -> float:
        """Seconds to wait before the next request, by an answer's headers (0: go on)."""
        used, _, size = headers.get(self.header, "").partition("/")
        try:
            over = float(used) + self.headroom - float(size)
        except ValueError:  # no header, or not 'used/size'
            return 0.0
        return over / self.leak if over > 0 else 0.0
