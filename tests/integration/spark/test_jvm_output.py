"""`hakiri apply` prints nothing from the JVM: its start-up warnings and log lines go to a log
file, and reach the terminal only with --debug."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.engines import QUICK_JVM_ENV

pytestmark = pytest.mark.integration

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
        # The JVM in the command: a local Spark Connect server writes its output to its own
        # server.log (operations.md).
        env={
            **os.environ,
            **QUICK_JVM_ENV,
            "HAKIRI_JVM_LOG": str(log),
            "HAKIRI_DEBUG": "",
            "HAKIRI_SPARK_REMOTE": "in-process",
        },
        timeout=600,
    )


def test_apply_prints_nothing_from_the_jvm_unless_debug(tmp_path: Path) -> None:
    # One small pipeline into the context store: a driver JVM with delta-spark, as for the
    # demo project, without loading the demo's whole data set twice.
    root = tmp_path / "p"
    (root / "data").mkdir(parents=True)
    (root / "hakiri.toml").write_text(
        '[project]\nname = "quiet"\n\n[[pipeline]]\nid = "orders"\n'
        'source = { connector = "files", config = { path = "data/*.csv" } }\n'
        'tables = ["orders"]\ndestination = { connector = "context" }\n'
    )
    (root / "data" / "a.csv").write_text("order_id,amount\n1,9.5\n")
    log = tmp_path / "jvm.log"

    quiet = _apply(root, log)

    assert quiet.returncode == 0, quiet.stderr
    noisy = [line for line in quiet.stderr.splitlines() if any(n in line for n in JVM_NOISE)]
    assert noisy == [], quiet.stderr
    assert "ok orders" in quiet.stderr  # hakiri's own lines are still there
    assert "Using incubator modules" in log.read_text()  # the JVM said it, into the log

    (root / "data" / "b.csv").write_text("order_id,amount\n2,5.0\n")
    loud = _apply(root, tmp_path / "unused.log", "--debug")

    assert loud.returncode == 0, loud.stderr
    assert "WARNING: Using incubator modules" in loud.stderr
