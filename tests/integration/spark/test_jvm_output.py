"""`hakiri apply` prints nothing from the JVM: its start-up warnings and log lines go to a log
file, and reach the terminal only with --debug."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]
JVM_NOISE = ("WARNING", "incubator", "log4j", "SLF4J", "Exception", "\tat ")


def _apply(root: Path, log: Path, *flags: str) -> subprocess.CompletedProcess[str]:
    """A fresh process, so a fresh driver JVM starts (as for a user)."""
    return subprocess.run(
        [
            sys.executable,
            "-c",
            "from hakiri.cli.main import main; main()",
            *flags,
            "apply",
            "--project",
            str(root),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "HAKIRI_JVM_LOG": str(log), "HAKIRI_DEBUG": ""},
        timeout=600,
    )


def test_apply_of_the_example_prints_nothing_from_the_jvm_unless_debug(tmp_path: Path) -> None:
    root = tmp_path / "demo"
    root.mkdir()
    shutil.copy(REPO / "hakiri.toml", root)
    shutil.copytree(REPO / "pipelines", root / "pipelines")
    shutil.copytree(REPO / "data", root / "data")
    log = tmp_path / "jvm.log"

    quiet = _apply(root, log)

    assert quiet.returncode == 0, quiet.stderr
    noisy = [line for line in quiet.stderr.splitlines() if any(n in line for n in JVM_NOISE)]
    assert noisy == [], quiet.stderr
    assert "ok orders" in quiet.stderr  # hakiri's own lines are still there
    assert "Using incubator modules" in log.read_text()  # the JVM said it, into the log

    (root / "data" / "orders" / "orders-2026-11-03.csv").write_text(
        "order_id,customer_id,amount,status,ordered_at\n9001,1,5.0,paid,2026-11-03 10:00:00\n"
    )
    loud = _apply(root, tmp_path / "unused.log", "--debug")

    assert loud.returncode == 0, loud.stderr
    assert "WARNING: Using incubator modules" in loud.stderr
