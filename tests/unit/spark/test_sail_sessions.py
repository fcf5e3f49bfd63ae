"""Sail's sessions live as long as the process that holds the server (Sail's own default
drops a session idle for 15 minutes: serve between hourly runs would lose it)."""

from __future__ import annotations

import os
import subprocess
import sys


def test_the_in_process_sail_server_keeps_idle_sessions_unless_told_otherwise() -> None:
    script = (
        "import os\n"
        "from hakiri.spark.sail import sail_endpoint, stop_sail\n"
        "sail_endpoint()\n"
        "print(os.environ['SAIL_SPARK__SESSION_TIMEOUT_SECS'])\n"
        "stop_sail()\n"
    )
    env = {k: v for k, v in os.environ.items() if k != "SAIL_SPARK__SESSION_TIMEOUT_SECS"}
    kept = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, env=env, timeout=120
    )
    assert kept.returncode == 0, kept.stderr
    assert int(kept.stdout.strip()) >= 365 * 24 * 3600
    told = subprocess.run(
        [sys.executable, "-c", script],
        capture_output=True,
        text=True,
        env={**env, "SAIL_SPARK__SESSION_TIMEOUT_SECS": "60"},
        timeout=120,
    )
    assert told.stdout.strip() == "60", told.stderr
