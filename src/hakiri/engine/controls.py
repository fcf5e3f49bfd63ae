"""What a run reports (Outcome), how a caller steers it (RunControls), and who holds a claim.

Kept apart from the runner so services and serve can name these without the engine's
machinery, and so the runner stays about running.
"""

from __future__ import annotations

import os
import socket
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from hakiri.engine.crash import crashed, note_holder

BATCH_TTL_SECONDS = 600.0
PIPELINE_LEASE_TTL_SECONDS = 3600.0


@dataclass
class Outcome:
    """What happened to one pipeline in this apply."""

    pipeline_id: str
    status: str  # 'success' | 'no-op' | 'failed' | 'retired' (in no manifest any more)
    mode: str
    run_id: str | None = None
    rows: int = 0
    # rows deleted, marked deleted, closed (scd2) or replaced (replace_window) by the load modes
    deleted: int = 0
    batches: int = 0
    recovered: int = 0  # batches found in the destination's ledger after a crash
    # batches ended without loading: their file changed (superseded) or vanished (gone) first
    superseded: int = 0
    gone: int = 0
    # the applied spec was new or changed: `apply` recorded it in the catalog
    spec_recorded: bool = False
    malformed: int = 0
    quarantined: int = 0  # rule-violation records written to the quarantine table
    remaining: int = 0  # batches left pending (max_chunks_per_tick reached)
    seconds: float = 0.0
    error: str | None = None
    hint: str | None = None
    notes: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)  # printed on every apply, like plan's
    # per batch: seconds reading+staging, in the destination commit, in the catalog
    timings: list[dict[str, float]] = field(default_factory=list)
    # The plan steps this apply executed (enqueue, evolve, load, retire), in the form
    # `hakiri plan --json` prints them: equal to the plan's when nothing changed in between.
    steps: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class RunControls:
    """How a caller steers a run. `apply` uses the defaults; `hakiri serve` shortens the leases
    (a dead replica's work is taken over sooner), drains on SIGTERM and caps chunks in flight
    across all the pipelines of the process."""

    lease_ttl: float = PIPELINE_LEASE_TTL_SECONDS  # the pipeline lease, renewed by a heartbeat
    claim_ttl: float = BATCH_TTL_SECONDS  # each chunk claim, renewed by a heartbeat
    draining: threading.Event | None = None  # once set: claim no more batches
    capacity: threading.BoundedSemaphore | None = None  # one permit per batch in flight
    trigger: str = "apply"  # recorded on the run: apply | schedule | event
    # `apply plan.json`: the saved plan's enqueue steps for this pipeline; a source that now
    # makes other batches is refused (the plan is stale), never loaded beyond the plan.
    planned: dict[str, list[str]] | None = None  # table -> batch ids to enqueue
    # `apply --restore-partial`: a target dropped by hand is loaded again with what its source
    # still has, even when part of it cannot come back (`engine.restore`).
    restore_partial: bool = False

    def stopping(self) -> bool:
        return self.draining is not None and self.draining.is_set()


def holder_id() -> str:
    holder = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
    note_holder(holder)
    return holder


def holder_is_dead(holder: str | None) -> bool:
    """A holder on this host whose process is gone (it crashed); other hosts wait for lease expiry."""
    if not holder:
        return False
    if crashed(holder):  # an in-process run stopped by SimulatedCrash (engine.crash)
        return True
    host, _, rest = holder.partition(":")
    pid_text = rest.split(":", 1)[0]
    if host != socket.gethostname() or not pid_text.isdigit():
        return False
    try:
        os.kill(int(pid_text), 0)  # signal 0: only asks whether the process exists
    except ProcessLookupError:
        return True
    except PermissionError:
        return False
    return False
