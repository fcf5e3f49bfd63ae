"""A cursor range as an API sees it (ISO times in params) and as the engine filters it.

An API's `since` is inclusive at best and approximate at worst, so a read asks from the
range's start and the engine keeps the rows inside the range (`in_range`): a row is loaded
by exactly one range whatever the API sent back around the edges.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from hakiri.guards.spark_types import quoted_name
from hakiri.sources.cursors.ranges import CursorRange

__all__ = ["api_time", "in_range", "settled_now"]

# A plan reads up to this long before it was made: APIs stamp times to the second, so a
# change in the second a plan ends could come after the read and be missed.
_SETTLE = dt.timedelta(seconds=1)


def settled_now() -> dt.datetime:
    """The end of a range planned now."""
    return dt.datetime.now(dt.UTC).replace(microsecond=0) - _SETTLE


def api_time(value: Any) -> str:
    """A stored cursor value as APIs write times: 2024-01-01T00:00:00Z."""
    moment = value if isinstance(value, dt.datetime) else dt.datetime.fromisoformat(str(value))
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return moment.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def in_range(chunk: CursorRange, column: str) -> Any:
    """The engine condition that keeps `column`'s values inside `chunk`."""
    from pyspark.sql import functions as F

    value = F.col(quoted_name(column))
    condition = F.lit(True)
    if chunk.lo is not None:
        lo = F.lit(_wall_utc(chunk.lo)).cast("timestamp")
        condition = condition & (value >= lo if chunk.lo_inclusive else value > lo)
    if chunk.hi is not None:
        hi = F.lit(_wall_utc(chunk.hi)).cast("timestamp")
        condition = condition & (value <= hi if chunk.hi_inclusive else value < hi)
    return condition


def _wall_utc(value: Any) -> str:
    """A stored cursor value as UTC wall time (hakiri's sessions read timestamps in UTC)."""
    return api_time(value).replace("T", " ").rstrip("Z")
