"""Named crash points, to prove exactly-once: HAKIRI_CRASH_AT=<point> ends the process there.

The process exits with os._exit, as a power cut would: no cleanup, no finally
blocks, no flushed buffers beyond what we flush here. Tests crash at every point
and assert that a re-run leaves the target exactly as a clean run would.
"""

from __future__ import annotations

import os
import sys

CRASH_ENV = "HAKIRI_CRASH_AT"
CRASH_EXIT_CODE = 137
# The points of one batch's commit protocol (the crash matrix runs each).
POINTS = ("after_stage", "before_dest_commit", "after_dest_commit", "before_catalog_commit")
# serve: a replica that won a schedule slot and dies before the run starts.
SERVE_POINTS = ("after_fire_claim",)


def crash_point(name: str) -> None:
    """End the process abruptly if HAKIRI_CRASH_AT names this point."""
    if name not in (*POINTS, *SERVE_POINTS):  # a typo would make a crash test pass vacuously
        raise ValueError(f"unknown crash point {name!r}")
    if os.environ.get(CRASH_ENV) == name:
        sys.stderr.write(f"hakiri: crashing at {name} (HAKIRI_CRASH_AT)\n")
        sys.stderr.flush()
        os._exit(CRASH_EXIT_CODE)
