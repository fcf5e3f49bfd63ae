"""Pipeline schedules: a 5-field cron expression or `every <n>s|m|h|d`."""

from __future__ import annotations

import re
from dataclasses import dataclass

from croniter import croniter

from hakiri.spec.base import duration_seconds

_EVERY_RE = re.compile(r"^every\s+([1-9][0-9]*(?:s|m|h|d))$")


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: exactly one of `cron` or `interval_seconds` is set."""

    text: str
    cron: str | None = None
    interval_seconds: int | None = None


def parse_schedule(text: str) -> Schedule:
    """Parse a manifest schedule string; raises ValueError with the accepted forms."""
    stripped = text.strip()
    every = _EVERY_RE.match(stripped)
    if every:
        return Schedule(text=text, interval_seconds=duration_seconds(every.group(1)))
    if len(stripped.split()) == 5 and croniter.is_valid(stripped):
        return Schedule(text=text, cron=stripped)
    raise ValueError(
        f"not a schedule: {text!r} (expected a 5-field cron expression such as '0 */2 * * *' "
        "or 'every <n>s|m|h|d' such as 'every 15m')"
    )
