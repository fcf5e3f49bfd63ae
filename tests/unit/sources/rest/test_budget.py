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
# and prints the grant times.
_WORKER = textwrap.dedent(
    """
    import json, os, sys, time
    from pathlib import Path
    from hakiri.sources.rest.budget import Rate, RateBudget
    from hakiri.sources.rest.client import BearerToken, RestClient

    budget_path, go, url, count = sys.argv[1:5]
    budget = RateBudget(Rate.parse("10/s"), Path(budget_path))
    client = RestClient(url, auth=BearerToken("T"), secrets={"T": os.environ["T"]}, budget=budget)
    print("ready", flush=True)
    while not os.path.exists(go):
        time.sleep(0.005)
    grants = []
    for _ in range(int(count)):
        before = time.time()
        client.get("/repos/octo/repo-0/issues", {"per_page": 1})
        grants.append(before)
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
    go.touch()
    started = time.time()
    outputs = [worker.communicate(timeout=30)[0] for worker in workers]
    assert all(worker.returncode == 0 for worker in workers)

    arrivals = sorted(r.at for r in api_server.requests)
    assert len(arrivals) == 24 == sum(len(json.loads(out)) for out in outputs)
    # 10/s: any 11 requests span a second, at the server too (a few ms of loopback jitter).
    assert all(later - first >= 0.98 for first, later in zip(arrivals, arrivals[10:], strict=False))
    # 24 requests at 10/s: a burst of 10, 10 more a second later, the last 4 after 2 s.
    assert arrivals[-1] - started >= 1.98
