"""`hakiri gc` for the context store: staging areas that crashed runs left under `<store>/_staging/`.

A staging area is removed when it is older than the threshold and its run (if its
manifest names one) is not still running. Data files moved into a table but never
committed are not touched here: they are invisible to readers, and
`hakiri context vacuum` removes them with the table's other unreferenced files.
"""

from __future__ import annotations

import shutil
import time
from collections.abc import Collection
from pathlib import Path

from hakiri.destinations.base import Garbage, KeptLeftover
from hakiri.destinations.context.staging import STAGING_DIR, staging_area

__all__ = ["gc_context"]


def gc_context(
    store: Path, *, live_runs: Collection[str] = (), older_than_seconds: float = 3600.0
) -> Garbage:
    """Remove stale staging areas of one store; the paths removed, and those kept with why."""
    root = store / STAGING_DIR
    found = Garbage()
    if not root.is_dir():
        return found
    cutoff = time.time() - older_than_seconds
    for path in sorted(p for p in root.iterdir() if p.is_dir()):
        if path.stat().st_mtime > cutoff:
            found.kept.append(KeptLeftover(str(path), "young"))
            continue
        if staging_area(store, path.name).manifest().get("run_id") in live_runs:
            found.kept.append(KeptLeftover(str(path), "running"))
            continue
        shutil.rmtree(path, ignore_errors=True)
        found.dropped.append(str(path))
    return found
