"""Named crash points, to prove exactly-once: HAKIRI_CRASH_AT=<point>[:<n>] ends the process there.

The process exits with os._exit, as a power cut would: no cleanup, no finally
blocks, no flushed buffers beyond what we flush here. `<point>` alone crashes the
first time the point is reached; `<point>:<n>` the n-th time in this process (e.g.
`after_dest_commit:2`: while the second batch commits, into a target the first one
already filled). Tests crash at every point and assert that a re-run leaves the
target exactly as a clean run would.
"""

from __future__ import annotations

import os
import sys
import threading
from collections import Counter

CRASH_ENV = "HAKIRI_CRASH_AT"
CRASH_EXIT_CODE = 137
# The points of one batch's commit protocol (the crash matrix runs each).
POINTS = ("after_stage", "before_dest_commit", "after_dest_commit", "before_catalog_commit")
# serve: a replica that won a schedule slot and dies before the run starts.
SERVE_POINTS = ("after_fire_claim",)

_hits: Counter[str] = Counter()
_lock = threading.Lock()  # chunk workers reach the points from several threads


def crash_point(name: str) -> None:
    """End the process abruptly if HAKIRI_CRASH_AT names this point (and this hit of it)."""
    if name not in (*POINTS, *SERVE_POINTS):  # a typo would make a crash test pass vacuously
        raise ValueError(f"unknown crash point {name!r}")
    wanted = os.environ.get(CRASH_ENV)
    if not wanted:
        return
    point, _, nth = wanted.partition(":")
    if point != name:
        return
    if nth and not nth.isdigit():
        raise ValueError(f"{CRASH_ENV}={wanted!r}: the hit to crash at must be a number")
    with _lock:
        _hits[name] += 1
        hit = _hits[name]
    if hit == (int(nth) if nth else 1):
        sys.stderr.write(f"hakiri: crashing at {name} (hit {hit}, HAKIRI_CRASH_AT)\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
