"""A rate budget: parsed from "60/min", kept as a sliding window, shared across processes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

import hakiri
from hakiri.sources.rest.budget import Rate, RateBudget
from tests.conftest import API_TOKEN
from tests.support.api_server import ApiServer


@pytest.mark.parametrize(
    ("text", "rate"),
    [
        ("60/min", Rate(60, 60)),
        ("5000/h", Rate(5000, 3600)),
        ("10/s", Rate(10, 1)),
        ("120 / minute", Rate(120, 60)),
        ("100/hours", Rate(100, 3600)),
        ("1000/15min", Rate(1000, 900)),
    ],
)
def test_rates_read_as_requests_per_period(text: str, rate: Rate) -> None:
    assert Rate.parse(text) == rate


@pytest.mark.parametrize("text", ["60", "60/fortnight", "0/min", "-1/s", "ten/s", "5/0min"])
def test_other_text_is_refused_with_an_example(text: str) -> None:
    with pytest.raises(ValueError, match=r"60/min|between 1 and"):
        Rate.parse(text)


class FakeTime:
    def __init__(self) -> None:
        self.now = 1_000_000.0

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


def test_a_burst_of_the_whole_budget_then_one_window_later_the_next(tmp_path: Path) -> None:
    budget = RateBudget(Rate(3, 10), tmp_path / "run.budget")
    fake = FakeTime()

    grants = [budget.take(clock=fake.clock, sleep=fake.sleep) - 1_000_000 for _ in range(7)]

    assert grants == [0, 0, 0, 10, 10, 10, 20]


def test_a_file_of_another_rate_starts_over(tmp_path: Path) -> None:
    path, fake = tmp_path / "run.budget", FakeTime()
    for _ in range(2):
        RateBudget(Rate(2, 60), path).take(clock=fake.clock, sleep=fake.sleep)

    RateBudget(Rate(5, 60), path).take(clock=fake.clock, sleep=fake.sleep)

    assert fake.now == 1_000_000.0  # no wait: the 2/min window was forgotten


# Each process waits for the go file, then makes its requests through one shared budget,
# and prints the times the budget granted them.
_WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from hakiri.sources.rest.budget import Rate, RateBudget
    from hakiri.sources.rest.client import BearerToken, RestClient

    budget_path, go, url, count = sys.argv[1:5]
    grants = []

    class Recorded(RateBudget):
        def take(self, **options):
            grants.append(super().take(**options))
            return grants[-1]

    budget = Recorded(Rate.parse("10/s"), Path(budget_path))
    client = RestClient(url, auth=BearerToken("T"), secrets={"T": os.environ["T"]}, budget=budget)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    for _ in range(int(count)):
        client.get("/repos/octo/repo-0/issues", {"per_page": 1})
    print(json.dumps(grants), flush=True)
    """
)


def test_processes_sharing_a_budget_never_exceed_it(api_server: ApiServer, tmp_path: Path) -> None:
    go = tmp_path / "go"
    src = str(Path(hakiri.__file__).parents[1])
    env = {**os.environ, "PYTHONPATH": src, "T": API_TOKEN}
    workers = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _WORKER,
                str(tmp_path / "run.budget"),
                str(go),
                api_server.url,
                "8",
            ],
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        for _ in range(3)
    ]
    for worker in workers:
        assert worker.stdout is not None and worker.stdout.readline().strip() == "ready"
    started = time.time()
    go.touch()
    outputs = [worker.communicate(timeout=30)[0] for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)

    grants = sorted(t for out in outputs for t in json.loads(out))
    arrivals = sorted(r.at for r in api_server.requests)
    assert len(grants) == len(arrivals) == 24
    # 10/s: any 11 grants span a second or more; a burst of 10, then 10 a second later,
    # the last 4 two seconds after the first.
    assert all(later - first >= 1.0 for first, later in zip(grants, grants[10:], strict=False))
    assert grants[0] >= started
    assert grants[-1] - grants[0] >= 2.0
    # The server sees the same, give or take each request's trip (an unshared budget
    # would let all 24 through in a few milliseconds).
    assert all(later - first >= 0.9 for first, later in zip(arrivals, arrivals[10:], strict=False))
