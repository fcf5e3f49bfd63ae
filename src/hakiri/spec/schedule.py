"""Pipeline schedules: a 5-field cron expression or `every <n>s|m|h|d`."""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from croniter import croniter

from hakiri.spec.base import duration_seconds

_EVERY_RE = re.compile(r"^every\s+([1-9][0-9]*(?:s|m|h|d))$")


@dataclass(frozen=True)
class Schedule:
    """A parsed schedule: exactly one of `cron` or `interval_seconds` is set."""

    text: str
    cron: str | None = None
    interval_seconds: int | None = None

    def latest_slot(self, now: datetime) -> datetime:
        """The last slot at or before `now` (UTC). `every` slots count from the Unix epoch,
        so they fall at the same instants whichever process computes them."""
        now = _utc(now)
        if self.interval_seconds is not None:
            step = self.interval_seconds
            return datetime.fromtimestamp(int(now.timestamp()) // step * step, UTC)
        assert self.cron is not None
        minute = now.replace(second=0, microsecond=0)  # cron slots are whole minutes
        if croniter.match(self.cron, minute):
            return minute
        return _utc(croniter(self.cron, minute).get_prev(datetime)).replace(fold=0)

    def next_slot(self, now: datetime) -> datetime:
        """The first slot strictly after `now`."""
        now = _utc(now)
        if self.interval_seconds is not None:
            return self.latest_slot(now) + timedelta(seconds=self.interval_seconds)
        assert self.cron is not None
        minute = now.replace(second=0, microsecond=0)
        return _utc(croniter(self.cron, minute).get_next(datetime)).replace(fold=0)

    def due(self, last_fire: datetime | None, now: datetime) -> datetime | None:
        """The slot to fire now, or None. Slots missed while nothing ran (a restart, a long
        run) collapse into one: the latest. A slot already fired is never fired again."""
        slot = self.latest_slot(now)
        if last_fire is not None and _utc(last_fire) >= slot:
            return None
        return slot


def _utc(moment: datetime) -> datetime:
    if moment.tzinfo is None:
        raise ValueError(f"naive datetime {moment!r}: schedules compute in aware UTC times")
    return moment.astimezone(UTC)


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
