"""`hakiri engine status|stop`: hakiri's local Spark Connect servers, as the user sees them."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from hakiri.spark.connect_server import in_use, running_servers, stop_server

__all__ = ["engine_status", "stop_engines"]


def engine_status(env: Mapping[str, str] = os.environ) -> list[dict[str, Any]]:
    """One entry per local server: its fingerprint, pids, port, master, age and whether a
    command holds it now."""
    now = time.time()
    return [
        {
            "fingerprint": state.fingerprint,
            "pid": state.supervisor_pid,
            "server_pid": state.server_pid,
            "port": state.port,
            "master": state.master,
            "hakiri_version": state.hakiri_version,
            "up_seconds": round(now - state.started_at, 1),
            "ready": state.ready and state.alive(),
            "in_use": in_use(state),
            "log": os.path.join(state.directory, "server.log"),
        }
        for state in running_servers(env)
    ]


def stop_engines(env: Mapping[str, str] = os.environ) -> list[dict[str, Any]]:
    """Stop every local server; what was stopped (as `engine_status` lists it)."""
    stopped = engine_status(env)
    for state in running_servers(env):
        stop_server(state)
    return stopped
