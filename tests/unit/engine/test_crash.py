"""HAKIRI_CRASH_AT: a named point ends the process at its first hit, or at the n-th; inside
`crashing_at` it raises SimulatedCrash instead, for tests that crash and recover in-process."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hakiri.engine.crash import CRASH_EXIT_CODE, SimulatedCrash, crash_point, crashing_at

PROGRAM = """
from hakiri.engine.crash import crash_point
for batch in (1, 2, 3):
    crash_point("after_stage")
    print(f"batch {batch} staged", flush=True)
"""


def _run(crash_at: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", PROGRAM],
        capture_output=True,
        text=True,
        env={"HAKIRI_CRASH_AT": crash_at, "PYTHONPATH": ":".join(sys.path)},
        timeout=60,
    )


@pytest.mark.parametrize(("crash_at", "survived"), [("after_stage", 0), ("after_stage:2", 1)])
def test_a_point_crashes_at_the_hit_it_names(crash_at: str, survived: int) -> None:
    done = _run(crash_at)
    assert done.returncode == CRASH_EXIT_CODE
    assert done.stdout.splitlines() == [f"batch {n} staged" for n in range(1, survived + 1)]
    assert f"crashing at after_stage (hit {survived + 1}" in done.stderr


def test_another_point_or_a_later_hit_never_crashes() -> None:
    for crash_at in ("after_dest_commit", "after_stage:4"):
        done = _run(crash_at)
        assert done.returncode == 0, done.stderr
        assert len(done.stdout.splitlines()) == 3


def test_a_misspelt_point_is_an_error_not_a_crash_that_never_comes() -> None:
    with pytest.raises(ValueError, match="unknown crash point"):
        crash_point("after_stgae")


def test_crashing_at_raises_at_the_hit_it_names_and_no_handler_of_errors_stops_it() -> None:
    reached = []
    with crashing_at("after_dest_commit", hit=2), pytest.raises(SimulatedCrash) as crashed:
        for batch in (1, 2, 3):
            try:
                crash_point("before_dest_commit")  # another point: passed
                crash_point("after_dest_commit")
            except Exception:  # what the engine's error handling could catch
                pytest.fail("a simulated crash must not be an Exception")
            reached.append(batch)

    assert reached == [1]
    assert (crashed.value.point, crashed.value.hit) == ("after_dest_commit", 2)
    crash_point("after_dest_commit")  # the block is over: nothing happens


def test_crashing_at_leaves_the_environment_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    # Inside the block the environment's point is not consulted (it would os._exit the suite).
    monkeypatch.setenv("HAKIRI_CRASH_AT", "after_stage")
    with crashing_at("before_catalog_commit"):
        crash_point("after_stage")
    with pytest.raises(ValueError, match="unknown crash point"):
        crashing_at("after_stgae").__enter__()


def test_a_crash_that_kills_its_process_leaves_holders_that_are_dead() -> None:
    from hakiri.engine.controls import holder_id, holder_is_dead

    with crashing_at("after_stage", process_dies=True), pytest.raises(SimulatedCrash):
        dying = holder_id()
        crash_point("after_stage")
    with crashing_at("after_stage"), pytest.raises(SimulatedCrash):
        living = holder_id()
        crash_point("after_stage")
    outside = holder_id()

    assert holder_is_dead(dying)
    assert not holder_is_dead(living)  # as another host's process: its claims expire instead
    assert not holder_is_dead(outside)
