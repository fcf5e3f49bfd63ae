"""What Spark ran while a piece of work ran, read from Spark's UI REST API (what a user's Spark
UI shows), on the suite's local Spark Connect server (`spark_ui` in tests/conftest.py).

- `scans`: rows produced by the scan nodes of the SQL executions the work started. A scan
  node's "number of output rows" says how many rows it read; summed over the executions, it
  tells how often the source was read: once per batch is the rows of the batch, twice is
  twice that.
- `jobs_during`: how many Spark jobs the work started.
- `cached_rdds`: the RDDs Spark holds in its cache now.

Spark's status store is fed by a listener bus, a moment behind the work: each reading waits
until what it reads stops changing (and no SQL execution is still running).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import httpx

_SETTLE_SECONDS = 0.5
_TIMEOUT_SECONDS = 30.0


def scans(ui: str, work: Callable[[], Any], scan: str = "Scan csv") -> tuple[int, int]:
    """(rows the `scan` nodes produced, how many such nodes ran) while `work` ran."""
    first = _last_execution_id(ui) + 1
    work()
    executions = [
        e
        for e in _settled(ui, "sql?details=true&planDescription=false&length=10000")
        if int(e["id"]) >= first
    ]
    rows = nodes = 0
    for execution in executions:
        for node in execution.get("nodes", []):
            if not str(node.get("nodeName", "")).startswith(scan):
                continue
            nodes += 1
            for metric in node.get("metrics", []):
                if metric.get("name") == "number of output rows":
                    rows += int(str(metric.get("value", "0")).replace(",", "") or 0)
    return rows, nodes


def rows_scanned(ui: str, work: Callable[[], Any], scan: str = "Scan csv") -> int:
    return scans(ui, work, scan)[0]


def jobs_during(ui: str, work: Callable[[], Any]) -> int:
    """How many Spark jobs started while `work` ran."""
    before = {job["jobId"] for job in _settled(ui, "jobs")}
    work()
    return len({job["jobId"] for job in _settled(ui, "jobs")} - before)


def cached_rdds(ui: str) -> int:
    """The RDDs with cached partitions in Spark's block manager now."""
    return len(_settled(ui, "storage/rdd"))


def _last_execution_id(ui: str) -> int:
    executions = _settled(ui, "sql?details=false&length=10000")
    return max((int(e["id"]) for e in executions), default=-1)


def _settled(ui: str, what: str) -> list[dict[str, Any]]:
    """The list at /api/v1/applications/<app>/<what>, once two readings `_SETTLE_SECONDS` apart
    agree and no SQL execution in it is running."""
    url = f"{ui}/api/v1/applications/{_application(ui)}/{what}"
    deadline = time.monotonic() + _TIMEOUT_SECONDS
    previous = None
    while True:
        current = httpx.get(url, timeout=10).json()
        running = any(item.get("status") == "RUNNING" for item in current)
        if current == previous and not running:
            return list(current)
        if time.monotonic() > deadline:
            raise AssertionError(f"Spark's UI at {url} did not settle in {_TIMEOUT_SECONDS}s")
        previous = current
        time.sleep(_SETTLE_SECONDS)


_APPS: dict[str, str] = {}


def _application(ui: str) -> str:
    if ui not in _APPS:
        apps = httpx.get(f"{ui}/api/v1/applications", timeout=10).json()
        _APPS[ui] = str(apps[0]["id"])
    return _APPS[ui]
