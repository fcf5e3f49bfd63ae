"""`hakiri engine status|start|stop`: hakiri's local Spark Connect servers, as the user sees them."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.errors import HakiriError
from hakiri.spark.connect_server import (
    Holder,
    ServerState,
    holders,
    in_use,
    running_servers,
    stop_server,
)
from hakiri.spec.loader import load_project

__all__ = ["engine_status", "start_engine", "stop_engines"]


def start_engine(root: Path, env: Mapping[str, str] = os.environ) -> dict[str, Any]:
    """Start (or find) the local server for this project's jars and settings, e.g. to have it
    warm before a scheduled run; the server as `engine_status` lists it."""
    from hakiri.services.runtime import LazySpark

    project = load_project(root, env)
    spark = LazySpark(project, remote="local", env=env)
    try:
        spark.get()
        fingerprint = spark.lease.state.fingerprint
    finally:
        spark.stop()
    return next(s for s in engine_status(env, root) if s["fingerprint"] == fingerprint)


def engine_status(
    env: Mapping[str, str] = os.environ, root: Path | None = None
) -> list[dict[str, Any]]:
    """One entry per local server: its fingerprint, pids, port, master, age, whether a command
    holds it now (and which), and whether it is the project's at `root` (`this_project`)."""
    ours = _project_servers(root, env)
    return [_described(state, ours) for state in running_servers(env)]


def stop_engines(
    env: Mapping[str, str] = os.environ, *, force: bool = False
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Stop the local servers no command holds (every one with `force`): (stopped, kept), as
    `engine_status` lists them; a kept one names its holders."""
    stopped, kept = [], []
    for state in running_servers(env):
        described = _described(state, set())
        held = stop_server(state, force=force)
        if held:
            kept.append({**described, "holders": [_holder(h) for h in held]})
        else:
            stopped.append(described)
    return stopped, kept


def _project_servers(root: Path | None, env: Mapping[str, str]) -> set[str]:
    if root is None:
        return set()
    from hakiri.services.runtime import local_engine_fingerprints

    try:
        project = load_project(root, env)
    except HakiriError:  # no project here, or one that does not load: nothing is marked
        return set()
    return local_engine_fingerprints(project, env)


def _described(state: ServerState, ours: set[str]) -> dict[str, Any]:
    held = in_use(state)
    return {
        "fingerprint": state.fingerprint,
        "pid": state.supervisor_pid,
        "server_pid": state.server_pid,
        "port": state.port,
        "master": state.master,
        "hakiri_version": state.hakiri_version,
        "up_seconds": round(time.time() - state.started_at, 1),
        "ready": state.ready and state.alive(),
        "in_use": held,
        "holders": [_holder(h) for h in holders(state)] if held else [],
        "this_project": state.fingerprint in ours,
        "log": os.path.join(state.directory, "server.log"),
    }


def _holder(holder: Holder) -> dict[str, Any]:
    return {
        "pid": holder.pid,
        "command": holder.command,
        "project": holder.project,
        "since_seconds": round(time.time() - holder.since, 1),
    }
