"""The pipeline lease: one process works a pipeline at a time, and what a dead one left is taken back.

A run takes the lease (breaking it when its holder's process died on this host),
renews it before each claim, and on start recovers what a crashed run left: its run
record closed as failed, its claimed batches back to pending, failed batches retried.
"""

from __future__ import annotations

from hakiri.catalog.records import BatchStatus, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.engine.controls import holder_is_dead
from hakiri.errors import LeaseHeld

__all__ = ["keep_lease", "recover_stale_claims", "take_lease"]


def take_lease(catalog: Catalog, pipeline_id: str, holder: str, ttl: float, timeout: float) -> None:
    lease = catalog.acquire_lease(pipeline_id, holder, ttl)
    if not lease.acquired and holder_is_dead(lease.holder):
        catalog.release_lease(pipeline_id, lease.holder)  # its process crashed on this host
    if not lease.acquired:
        catalog.wait_for_lease(pipeline_id, holder, ttl, timeout)


def keep_lease(catalog: Catalog, pipeline_id: str, holder: str, ttl: float) -> None:
    """Renew the pipeline lease between batches, so a long run is never overlapped (a single
    batch longer than the lease's TTL still can be)."""
    if not catalog.renew_lease(pipeline_id, holder, ttl):
        raise LeaseHeld(
            f"pipeline `{pipeline_id}`: this apply lost its lease (it ran out, or was broken)",
            "the batches committed so far are kept; apply again to load the rest",
        )


def recover_stale_claims(catalog: Catalog, pipeline_id: str, keep: str | None = None) -> None:
    """Under the pipeline lease, a run still "running" and a batch still processing were left
    by a process that died: close the run, release the batch. `keep` is a run id requested
    over HTTP that this run is about to start."""
    for run in catalog.runs(pipeline_id, limit=50):
        if run.status is RunStatus.RUNNING and run.run_id != keep:
            catalog.finish_run(
                run.run_id,
                RunStatus.FAILED,
                error_kind="Interrupted",
                error_msg="the process ended before the run finished",
            )
    for batch in catalog.batches(pipeline_id, status=BatchStatus.PROCESSING):
        if holder_is_dead(batch.holder):
            catalog.release(pipeline_id, batch.batch_id, batch.holder or "")
    catalog.reclaim_expired(pipeline_id)
    # Converging means trying failed batches again (the cause may have been fixed).
    failed = [b.batch_id for b in catalog.batches(pipeline_id, status=BatchStatus.FAILED)]
    if failed:
        catalog.reset_batches(pipeline_id, failed)
