"""Sail: a Spark Connect server in Rust (on Apache DataFusion), run inside the hakiri process.

With `[spark] engine = "sail"` a command that needs an engine starts Sail's server in its own
process on a free loopback port (about 0.1 s, no JVM) and connects to it as to any Spark
Connect endpoint. Why in the process and not a warm server beside it, as for Apache Spark:
Sail's start costs less than connecting to a warm server would save, nothing outlives the
command (no stale server running an older hakiri's code), and the Python functions Sail runs
(the COPY writer's `mapInArrow`) run in this interpreter, where hakiri is already imported.

One server per process, started on first use and stopped when the process exits; `serve`
keeps it for its whole life.
"""

from __future__ import annotations

import atexit
import contextlib
import os
import threading
from typing import Any

from hakiri.errors import SparkSetupError

__all__ = ["sail_endpoint", "stop_sail"]

_LOCK = threading.Lock()
SESSION_TIMEOUT_ENV = "SAIL_SPARK__SESSION_TIMEOUT_SECS"
_SERVER: list[Any] = []  # the running server, at most one


def sail_endpoint() -> str:
    """The `sc://` address of this process's Sail server, started if it is not running."""
    with _LOCK:
        if not _SERVER:
            try:
                from pysail.spark import SparkConnectServer
            except ImportError:
                raise SparkSetupError(
                    "the sail engine needs the pysail package, which is not installed",
                    "install hakiri again with its dependencies (`pip install -e .`, or "
                    '`make run` in a checkout), or use engine = "spark"',
                ) from None
            # Sail logs through Rust's env_logger to stderr; a command prints its own errors.
            os.environ.setdefault("RUST_LOG", "error")
            # Sail drops a session idle for 15 minutes (spark.session_timeout_secs = 900): serve
            # between hourly runs, or any long-lived process, would find its session gone
            # ("session … is not running"). The server lives in this process and serves only
            # its sessions, so they live as long as it does (a year, unless set otherwise).
            os.environ.setdefault(SESSION_TIMEOUT_ENV, str(365 * 24 * 3600))
            server = SparkConnectServer(ip="127.0.0.1", port=0)
            try:
                server.start(background=True)
            except Exception as exc:  # pysail raises its own Rust-side errors
                raise SparkSetupError(
                    f"Sail's Spark Connect server did not start: {exc}",
                    'use engine = "spark" while this is looked into',
                ) from None
            _SERVER.append(server)
            atexit.register(stop_sail)
        address = _SERVER[0].listening_address
    if address is None:
        raise SparkSetupError("Sail's Spark Connect server stopped", "run the command again")
    host, port = address
    return f"sc://{host}:{port}"


def stop_sail() -> None:
    """Stop this process's Sail server, if one is running."""
    with _LOCK:
        while _SERVER:
            server = _SERVER.pop()
            with contextlib.suppress(Exception):  # stopping at exit: nothing left to tell
                server.stop()
