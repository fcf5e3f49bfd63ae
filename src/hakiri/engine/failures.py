"""Failed attempts, recorded where monitoring looks: the run list, `status` and the alerts.

A run that fails while it loads closes its own run record (`engine.runner`). One that
fails before it begins — the destination refuses the connection, a secret is missing,
another process holds the pipeline — has no record yet: `record_failed_attempt` makes
one, failed, with the one-line error, so `hakiri runs`, `status` and `alerts` (and serve's
API) show every failed attempt, not only the ones that got as far as a batch.
"""

from __future__ import annotations

from hakiri.catalog.records import RunStatus
from hakiri.catalog.store import Catalog
from hakiri.errors import HakiriError

__all__ = ["NEVER_MATCHED_ALERT", "RUN_FAILED_ALERT", "alert_run_failed", "record_failed_attempt"]

RUN_FAILED_ALERT = "run_failed"
# A files source whose path has matched no file, ever (raised once per pipeline and path).
NEVER_MATCHED_ALERT = "never_matched"


def record_failed_attempt(
    catalog: Catalog, pipeline_id: str, error: HakiriError, trigger: str
) -> str | None:
    """Record an attempt that failed before its run began; returns the run id, or None when
    the catalog cannot take the record either (its own outage is the error then)."""
    try:
        run = catalog.start_run(pipeline_id, trigger=trigger)
        catalog.finish_run(
            run.run_id,
            RunStatus.FAILED,
            row_count=0,
            error_kind=type(error).__name__,
            error_msg=error.reason,
        )
        alert_run_failed(catalog, pipeline_id, run.run_id, error.reason)
    except HakiriError:
        return None
    return run.run_id


def alert_run_failed(catalog: Catalog, pipeline_id: str, run_id: str, reason: str) -> None:
    """The alert every failed run raises, whether it failed loading or before it began."""
    catalog.add_alert("error", RUN_FAILED_ALERT, reason, pipeline_id=pipeline_id, run_id=run_id)
