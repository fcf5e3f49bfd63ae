"""What Spark read while a piece of work ran: rows produced by the scan nodes of its SQL executions.

The SQL status store (what Spark's SQL UI shows) keeps every execution's plan graph
and metrics; a scan node's "number of output rows" says how many rows it read.
Summed over the executions a piece of work started, it tells how often the source
was read: once per batch is the rows of the batch, twice is twice that.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any


def rows_scanned(spark: Any, work: Callable[[], Any], scan: str = "Scan csv") -> int:
    """Rows the `scan` nodes (e.g. "Scan csv", "Scan parquet") produced while `work` ran."""
    return scans(spark, work, scan)[0]


def scans(spark: Any, work: Callable[[], Any], scan: str = "Scan csv") -> tuple[int, int]:
    """(rows the `scan` nodes produced, how many such nodes ran) while `work` ran."""
    store = spark._jsparkSession.sharedState().statusStore()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    first = _last_execution_id(store) + 1
    work()
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()
    return rows_scanned_since(store, first, scan), scan_nodes_since(store, first, scan)


def _last_execution_id(store: Any) -> int:
    """The newest execution's id (-1 for none). The store keeps only the newest executions
    (`spark.sql.ui.retainedExecutions`), so ids, not positions in its list, mark a point."""
    executions = store.executionsList()
    return max((executions.apply(k).executionId() for k in range(executions.size())), default=-1)


def _scan_nodes(store: Any, first_execution: int, scan: str) -> list[tuple[int, Any]]:
    executions = store.executionsList()
    found = []
    for k in range(executions.size()):
        execution_id = executions.apply(k).executionId()
        if execution_id < first_execution:
            continue
        nodes = store.planGraph(execution_id).allNodes()
        for n in range(nodes.size()):
            node = nodes.apply(n)
            if node.name().startswith(scan):
                found.append((execution_id, node))
    return found


def scan_nodes_since(store: Any, first_execution: int, scan: str) -> int:
    """How many `scan` nodes the SQL executions from id `first_execution` on ran."""
    return len(_scan_nodes(store, first_execution, scan))


def rows_scanned_since(store: Any, first_execution: int, scan: str) -> int:
    """Rows the `scan` nodes produced in the SQL executions from id `first_execution` on."""
    total = 0
    for execution_id, node in _scan_nodes(store, first_execution, scan):
        values = store.executionMetrics(execution_id)
        metrics = node.metrics()
        for m in range(metrics.size()):
            metric = metrics.apply(m)
            value = values.get(metric.accumulatorId())
            if metric.name() == "number of output rows" and value.isDefined():
                total += int(str(value.get()).replace(",", ""))
    return total
