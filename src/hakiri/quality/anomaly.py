"""The row-count anomaly check: is this load's row count far from the recent runs' mean?

`check_row_count` is pure; `check_run_row_count` reads the recent successful runs'
row counts from the catalog and records a failed check as a warning alert.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from hakiri.catalog.records import RunStatus
from hakiri.catalog.store import Catalog
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["AnomalyCheck", "check_row_count"]


@dataclass(frozen=True)
class AnomalyCheck:
    """The verdict on one load's row count against the mean of the last `window` runs."""

    ok: bool
    rows: int
    mean: float
    low: float
    high: float
    window: int  # how many prior runs the mean is over
    message: str


def check_row_count(
    rows: int, history: Sequence[int], delta_percent: float, *, min_history: int = 3
) -> AnomalyCheck | None:
    """Judge `rows` against mean(history) * (1 ± delta_percent/100), edges included.

    `history` holds the row counts of the most recent successful runs (newest first,
    already cut to the window). With fewer than `min_history` of them there is no
    baseline yet: None (the check is skipped).
    """
    if delta_percent < 0:
        raise ValueError(f"delta_percent must not be negative, got {delta_percent}")
    if len(history) < max(min_history, 1):
        return None
    window = len(history)
    mean = sum(history) / window
    margin = abs(mean) * delta_percent / 100
    low, high = mean - margin, mean + margin
    # Floating point must not push a count that sits exactly on an edge outside the band.
    slack = 1e-9 * max(1.0, abs(mean))
    ok = low - slack <= rows <= high + slack
    runs = "run" if window == 1 else "runs"
    loaded = f"loaded {rows:,} row" if rows == 1 else f"loaded {rows:,} rows"
    band = f"±{delta_percent:g}%: {_number(low)}-{_number(high)}"
    if ok:
        message = (
            f"{loaded}; within the band around the mean of the last {window} successful "
            f"{runs}, {_number(mean)} ({band})"
        )
    else:
        message = (
            f"{loaded}; the mean of the last {window} successful {runs} is "
            f"{_number(mean)} (band {band})"
        )
    return AnomalyCheck(ok, rows, mean, low, high, window, message)


def _number(value: float) -> str:
    """1000.0 -> '1,000'; 1000.25 -> '1,000.2'."""
    if math.isclose(value, round(value), rel_tol=0, abs_tol=1e-9 * max(1.0, abs(value))):
        return f"{round(value):,}"
    return f"{value:,.1f}"


def check_run_row_count(catalog: Catalog, spec: PipelineSpec, run_id: str, rows: int) -> str | None:
    """After a successful load: warn (never fail) when its row count is far from the mean of
    the pipeline's recent successful loads (`load.expected_row_count_delta`, over
    `load.window_runs`; replays, which add a few rows, are not loads). The warning is stored
    as an `anomaly` alert and returned for the run record's quality; None when in range."""
    delta = spec.load.expected_row_count_delta
    if delta is None:
        return None
    window = spec.load.window_runs
    history = [
        run.row_count or 0
        for run in catalog.runs(spec.id, limit=window * 4 + 10)
        if run.status is RunStatus.SUCCESS
        and run.run_id != run_id
        and not (run.quality or {}).get("replay_of")
    ][:window]
    check = check_row_count(rows, history, delta)
    if check is None or check.ok:
        return None
    catalog.add_alert("warning", "anomaly", check.message, pipeline_id=spec.id, run_id=run_id)
    return f"row-count anomaly: {check.message}"
