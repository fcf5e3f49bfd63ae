"""`rate_budget`'s token bucket, on a fake clock whose sleep advances it: no real waiting, no timings."""

from __future__ import annotations

import itertools

import pytest

from hakiri.engine.ratelimit import TokenBucket, parse_rate

# A runaway loop fails the test instead of hanging the suite.
MAX_SLEEPS = 10_000


class FakeTime:
    def __init__(self, start: float = 1000.0) -> None:
        self.now = start
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        assert seconds > 0, f"asked to sleep {seconds}s"
        self.sleeps.append(seconds)
        self.now += seconds
        if len(self.sleeps) > MAX_SLEEPS:
            raise RuntimeError(f"runaway: {len(self.sleeps)} sleeps, the last {seconds!r}s")

    def advance(self, seconds: float) -> None:
        self.now += seconds

    @property
    def slept(self) -> float:
        return sum(self.sleeps)


def _bucket(rate: float, start: float = 1000.0) -> tuple[TokenBucket, FakeTime]:
    time = FakeTime(start)
    return TokenBucket(rate, clock=time.clock, sleep=time.sleep), time


# ---------------------------------------------------------------- parse_rate


@pytest.mark.parametrize(
    ("text", "per_second"),
    [
        ("60/min", 1.0),
        ("30/min", 0.5),
        ("10/s", 10.0),
        ("1/s", 1.0),
        ("3600/h", 1.0),
        ("1800/h", 0.5),
        ("1/h", 1 / 3600),
    ],
)
def test_parse_rate(text: str, per_second: float) -> None:
    assert parse_rate(text) == pytest.approx(per_second)


# ---------------------------------------------------------------- the bucket


def test_capacity_is_a_seconds_worth_and_at_least_one_token() -> None:
    assert TokenBucket(8.0).capacity == 8.0
    assert TokenBucket(1.0).capacity == 1.0
    assert TokenBucket(0.5).capacity == 1.0
    assert TokenBucket(parse_rate("1/h")).capacity == 1.0


def test_the_first_acquire_is_immediate() -> None:
    bucket, time = _bucket(parse_rate("60/min"))
    assert bucket.acquire() == 0.0
    assert time.sleeps == []
    assert bucket.waited_seconds == 0.0


def test_the_bucket_starts_full_then_paces() -> None:
    bucket, time = _bucket(4.0)
    assert [bucket.acquire() for _ in range(4)] == [0.0] * 4
    assert time.sleeps == []
    assert bucket.acquire() == pytest.approx(0.25)
    assert time.slept == pytest.approx(0.25)


@pytest.mark.parametrize(("rate", "count"), [(1.0, 10), (2.0, 25), (0.5, 7), (4.0, 40)])
def test_sustained_acquires_are_paced_at_the_rate(rate: float, count: int) -> None:
    bucket, time = _bucket(rate)
    start = time.now
    waits = [bucket.acquire() for _ in range(count)]
    expected = (count - bucket.capacity) / rate
    assert time.slept == pytest.approx(expected)
    assert time.now - start == pytest.approx(expected)
    assert sum(waits) == pytest.approx(expected)
    assert bucket.waited_seconds == pytest.approx(expected)


def test_once_drained_each_token_is_one_interval_apart() -> None:
    bucket, time = _bucket(2.0)
    bucket.acquire()
    bucket.acquire()
    granted = []
    for _ in range(6):
        bucket.acquire()
        granted.append(time.now)
    gaps = [b - a for a, b in itertools.pairwise(granted)]
    assert gaps == pytest.approx([0.5] * 5)


def test_an_idle_bucket_refills_to_capacity_only() -> None:
    bucket, time = _bucket(2.0)
    bucket.acquire(2)
    time.advance(3600)  # an hour idle does not buy an hour of burst
    assert bucket.acquire() == 0.0
    assert bucket.acquire() == 0.0
    assert bucket.acquire() == pytest.approx(0.5)


def test_a_partial_refill_shortens_the_wait() -> None:
    bucket, time = _bucket(2.0)
    bucket.acquire(2)
    time.advance(0.25)  # half a token back
    assert bucket.acquire() == pytest.approx(0.25)


def test_acquiring_more_than_the_capacity_waits_for_the_rest() -> None:
    bucket, time = _bucket(2.0)
    assert bucket.acquire(5) == pytest.approx((5 - 2) / 2.0)
    assert time.slept == pytest.approx(1.5)
    # the bucket is empty afterwards: the next token is one interval away
    assert bucket.acquire() == pytest.approx(0.5)


def test_acquiring_more_than_the_capacity_of_a_slow_bucket() -> None:
    bucket, time = _bucket(parse_rate("30/min"))  # 0.5/s, capacity 1
    assert bucket.acquire(3) == pytest.approx(4.0)
    assert time.slept == pytest.approx(4.0)
    assert bucket.acquire() == pytest.approx(2.0)


def test_a_very_slow_bucket() -> None:
    bucket, time = _bucket(parse_rate("1/h"))
    assert bucket.acquire() == 0.0
    assert bucket.acquire() == pytest.approx(3600.0)
    assert time.slept == pytest.approx(3600.0)


def test_acquiring_nothing_is_free() -> None:
    bucket, time = _bucket(1.0)
    bucket.acquire()
    assert bucket.acquire(0) == 0.0
    assert time.sleeps == []


def test_waited_seconds_accumulates_over_calls() -> None:
    bucket, _ = _bucket(1.0)
    waits = [bucket.acquire(), bucket.acquire(), bucket.acquire(3)]
    assert waits == pytest.approx([0.0, 1.0, 3.0])
    assert bucket.waited_seconds == pytest.approx(4.0)


@pytest.mark.parametrize("text", ["10/s", "3/s", "100/min"])
def test_pacing_at_a_rate_that_is_not_a_power_of_two(text: str) -> None:
    rate = parse_rate(text)
    bucket, time = _bucket(rate)
    for _ in range(30):
        bucket.acquire()
    assert time.slept == pytest.approx((30 - bucket.capacity) / rate)
