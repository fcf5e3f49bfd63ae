"""Named crash points, to prove exactly-once: HAKIRI_CRASH_AT=<point>[:<n>] ends the process there.

The process exits with os._exit, as a power cut would: no cleanup, no finally
blocks, no flushed buffers beyond what we flush here. `<point>` alone crashes the
first time the point is reached; `<point>:<n>` the n-th time in this process (e.g.
`after_dest_commit:2`: while the second batch commits, into a target the first one
already filled). Tests crash at every point and assert that a re-run leaves the
target exactly as a clean run would.

In-process tests use `crashing_at(point)` instead: the point raises `SimulatedCrash`, which
`except Exception` does not catch, so the run stops there as a dead process would (its
commits made, nothing after them) and the test goes on to run it again in the same process.
With `process_dies=True`, every claim holder made inside the block counts as dead once
its SimulatedCrash is raised (`crashed`), as a killed process's does: the next run takes
its claims over at once instead of waiting for them to expire.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
from collections import Counter
from collections.abc import Iterator

CRASH_ENV = "HAKIRI_CRASH_AT"
CRASH_EXIT_CODE = 137
# The points of one batch's commit protocol (the crash matrix runs each).
POINTS = ("after_stage", "before_dest_commit", "after_dest_commit", "before_catalog_commit")
# serve: a replica that won a schedule slot and dies before the run starts.
SERVE_POINTS = ("after_fire_claim",)
# sync: after each file it moved to or from the bucket (data, then log entries, in order).
SYNC_POINTS = ("sync_file",)

_hits: Counter[str] = Counter()
_lock = threading.Lock()  # chunk workers reach the points from several threads
# (point, hit, hits so far, process_dies) while a `crashing_at` block runs: one for the
# whole process, since the point may be reached in a chunk worker's thread.
_armed: list[tuple[str, int, Counter[str], bool]] = []
# Holders made while a `crashing_at` block runs, and those of blocks that crashed.
_holders_in_block: set[str] = set()
_crashed_holders: set[str] = set()


class SimulatedCrash(BaseException):
    """A crash point reached inside `crashing_at`. A BaseException, like KeyboardInterrupt:
    the engine's `except Exception` and `except HakiriError` let it through, as they could
    not stop a real crash."""

    def __init__(self, point: str, hit: int) -> None:
        super().__init__(f"simulated crash at {point} (hit {hit})")
        self.point, self.hit = point, hit


@contextlib.contextmanager
def crashing_at(point: str, hit: int = 1, *, process_dies: bool = False) -> Iterator[None]:
    """While the block runs, the `hit`-th time `point` is reached raises SimulatedCrash
    (hits counted from the block's start); HAKIRI_CRASH_AT is not consulted.

    `process_dies`: the claim holders the block made count as dead from the crash on, as a
    killed process's on this host do; otherwise they look alive (a process on another
    host, say) and their claims are taken back only once they expire."""
    _check(point)
    if hit < 1:
        raise ValueError(f"the hit to crash at must be 1 or more, not {hit}")
    with _lock:
        if _armed:
            raise RuntimeError(f"already crashing at {_armed[0][0]}: one crash point at a time")
        _armed.append((point, hit, Counter(), process_dies))
    try:
        yield
    finally:
        with _lock:
            _armed.clear()
            _holders_in_block.clear()


def note_holder(holder: str) -> None:
    """Remember a claim holder made while a `crashing_at` block runs (see `crashed`)."""
    with _lock:
        if _armed:
            _holders_in_block.add(holder)


def crashed(holder: str) -> bool:
    """Was `holder` made inside a `crashing_at` block whose SimulatedCrash was raised?"""
    with _lock:
        return holder in _crashed_holders


def crash_point(name: str) -> None:
    """End the process abruptly if HAKIRI_CRASH_AT names this point (and this hit of it);
    inside `crashing_at`, raise SimulatedCrash at the point and hit it names instead."""
    _check(name)
    if _armed:
        _simulate(name)
        return
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


def _simulate(name: str) -> None:
    """Raise SimulatedCrash if the `crashing_at` block running names this point and hit."""
    with _lock:
        if not _armed:
            return  # the block ended meanwhile, in another thread
        point, hit, seen, dies = _armed[0]
        if point != name:
            return
        seen[name] += 1
        if seen[name] != hit:
            return
        if dies:
            _crashed_holders.update(_holders_in_block)  # dead from now on, like a killed process
    raise SimulatedCrash(name, hit)


def _check(name: str) -> None:
    # a typo would make a crash test pass vacuously
    if name not in (*POINTS, *SERVE_POINTS, *SYNC_POINTS):
        raise ValueError(f"unknown crash point {name!r}")
