"""HAKIRI_CRASH_AT: a named point ends the process at its first hit, or at the n-th."""

from __future__ import annotations

import subprocess
import sys

import pytest

from hakiri.engine.crash import CRASH_EXIT_CODE, crash_point

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
