"""`hakiri engine status|stop`: hakiri's local Spark Connect servers, as the user sees them."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.spark.connect_server import ServerState, in_use, running_servers, stop_server
from hakiri.spec.loader import load_project

__all__ = ["engine_status", "start_engine", "stop_engines"]


def start_engine(root: Path, env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Start (or find) the local server for this project's jars and settings, e.g. to have it
    warm before a scheduled run; the server as `engine_status` lists it."""
    from hakiri.services.runtime import LazySpark

    project = load_project(root, env)
    spark = LazySpark(project, remote="local")
    try:
        spark.get()
        fingerprint = spark.lease.state.fingerprint
    finally:
        spark.stop()
    return next(s for s in engine_status(env) if s["fingerprint"] == fingerprint)


def engine_status(env: Mapping[str, str] = os.environ) -> list[dict[str, Any]]:
    """One entry per local server: its fingerprint, pids, port, master, age and whether a
    command holds it now."""
    return [_described(state) for state in running_servers(env)]


def stop_engines(env: Mapping[str, str] = os.environ) -> list[dict[str, Any]]:
    """Stop every local server; what was stopped (as `engine_status` lists it)."""
    stopped = []
    for state in running_servers(env):
        stopped.append(_described(state))
        stop_server(state)
    return stopped


def _described(state: ServerState) -> dict[str, Any]:
    return {
        "fingerprint": state.fingerprint,
        "pid": state.supervisor_pid,
        "server_pid": state.server_pid,
        "port": state.port,
        "master": state.master,
        "hakiri_version": state.hakiri_version,
        "up_seconds": round(time.time() - state.started_at, 1),
        "ready": state.ready and state.alive(),
        "in_use": in_use(state),
        "log": os.path.join(state.directory, "server.log"),
    }
