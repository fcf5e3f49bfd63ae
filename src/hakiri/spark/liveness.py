"""Noticing an engine that went away: bounded retries, a watch on a local server, one message.

PySpark's Spark Connect client retries a call the server does not answer (UNAVAILABLE) for at
least ten minutes, so a command whose engine was stopped or killed sat in that loop with no
word. Every Spark Connect session hakiri makes gets `EngineRetries` instead:

- a server that comes back within `RETRY_SECONDS` (a restart, a network blip) is used again;
- past that, the call fails, and `spark.errors` turns it into one `EngineLost` line naming
  the endpoint;
- for hakiri's local server, an `EngineWatch` knows the server's processes: once they are
  gone, no call is retried at all, so the command fails in seconds, and says why.

pyspark is imported inside the functions only (the CLI's `--help` and `plan` never load it).
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "RETRY_SECONDS",
    "EngineWatch",
    "guard_session",
    "is_engine_stopping",
    "is_engine_unavailable",
    "lost_engine",
    "watch_for",
]

# The longest a call keeps retrying an endpoint that does not answer: the waits of
# `_BACKOFF_MS` (without their jitter), well inside the minute a command has to fail in.
_BACKOFF_MS = (50, 200, 800, 3200, 8000, 8000, 8000, 8000)
RETRY_SECONDS = sum(_BACKOFF_MS) / 1000.0


@dataclass
class EngineWatch:
    """What hakiri knows about one engine endpoint: how to show it, and (for a local server)
    whether its processes still run. `cause()` is None while the engine is thought alive."""

    endpoint: str  # as shown to users: sc://localhost:PORT, never a token
    port: int | None = None
    probe: Callable[[], str | None] | None = None  # None: alive; else why it is gone
    log: str | None = None  # the server's log, for the hint
    local: bool = False
    _lost: str | None = field(default=None, repr=False)

    def cause(self) -> str | None:
        if self._lost is None and self.probe is not None:
            self._lost = self.probe()
        return self._lost


_WATCHES: list[EngineWatch] = []
_LOCK = threading.Lock()


def watch_for(
    endpoint: str,
    *,
    probe: Callable[[], str | None] | None = None,
    log: str | None = None,
    local: bool = False,
) -> EngineWatch:
    """Register the engine a session talks to (the newest registration wins for a port)."""
    watch = EngineWatch(
        _shown(endpoint), port=_port_of(endpoint), probe=probe, log=log, local=local
    )
    with _LOCK:
        _WATCHES.append(watch)
        del _WATCHES[:-16]  # a long-lived process restarts its engine now and then
    return watch


def guard_session(session: Any, watch: EngineWatch) -> Any:
    """Give a Spark Connect session bounded retries that stop once `watch` sees its engine
    gone; the session is returned. Sessions made from it later (isolated sessions) take the
    same policies (`copy_guard`)."""
    from hakiri.spark.jvm_output import quiet_connect_client

    quiet_connect_client()
    session.client.set_retry_policies([_policy(watch)])
    session._hakiri_watch = watch
    return session


def copy_guard(source: Any, session: Any) -> Any:
    """`session` retries as `source` does (a new client session on the same engine)."""
    watch = getattr(source, "_hakiri_watch", None)
    return guard_session(session, watch) if watch is not None else session


def session_watch(session: Any) -> EngineWatch | None:
    return getattr(session, "_hakiri_watch", None)


def _policy(watch: EngineWatch) -> Any:
    from pyspark.sql.connect.client.retries import DefaultPolicy

    class EngineRetries(DefaultPolicy):  # type: ignore[misc]
        """DefaultPolicy's choice of what to retry, for `RETRY_SECONDS` at most, and not at
        all once the watch knows the engine is gone."""

        def __init__(self) -> None:
            super().__init__(
                max_retries=len(_BACKOFF_MS),
                initial_backoff=_BACKOFF_MS[0],
                backoff_multiplier=4.0,
                max_backoff=max(_BACKOFF_MS),
                jitter=500,
                min_jitter_threshold=2000,
                recognize_server_retry_delay=False,  # a server's own delay could be minutes
            )

        def can_retry(self, exception: BaseException) -> bool:
            return watch.cause() is None and bool(super().can_retry(exception))

    return EngineRetries()


# gRPC's own words for a peer that is not there, or went away mid-call.
_UNAVAILABLE = re.compile(r"StatusCode\.UNAVAILABLE|failed to connect to all addresses")
_ADDRESS = re.compile(r"(?:ipv4:[\d.]+|ipv6:\[[^\]]*\]|localhost|127\.0\.0\.1):(\d{2,5})\b")


def is_engine_unavailable(exc: BaseException) -> bool:
    """Did a Spark Connect call fail because the engine is not there (not because it refused
    the work)? Only gRPC's verdict counts: a Java message about a refused PostgreSQL
    connection is the destination's business."""
    code = getattr(exc, "_grpc_status_code", None)
    if getattr(code, "name", "") == "UNAVAILABLE":
        return True
    rpc = "RpcError" in {k.__name__ for k in type(exc).__mro__}
    connect = type(exc).__name__ == "SparkConnectGrpcException"
    return (rpc or connect) and bool(_UNAVAILABLE.search(_text(exc)))


# A server that was told to stop answers for a moment before it goes: with these words.
_STOPPING = re.compile(
    r"Cannot call methods on a stopped SparkContext|SparkContext was shut down|"
    r"SparkContext has been shutdown|SparkContext is stopped"
)


def is_engine_stopping(text: str) -> bool:
    """Does a failure's text say the engine itself is shutting down?"""
    return bool(_STOPPING.search(text))


def lost_engine(exc: BaseException) -> tuple[str, str]:
    """(reason, hint) for a call that failed because its engine went away. The engine's watch
    remembers the loss: a long-lived process's next `LazySpark.get` starts a new session."""
    text = _text(exc)
    watch = _watch_of(text)
    if watch is None:
        return (
            f"lost the connection to the Spark engine: {_detail(exc)}",
            "check that the Spark Connect server is running (HAKIRI_SPARK_REMOTE or [spark] "
            "remote), then run the command again",
        )
    why = watch.cause()
    if why is None:
        why = (
            "it is shutting down (its SparkContext stopped)"
            if is_engine_stopping(text)
            else f"it did not answer for {RETRY_SECONDS:.0f}s ({_detail(exc)})"
        )
    watch._lost = why
    if watch.local:
        where = f" (its log: {watch.log})" if watch.log else ""
        return (
            f"lost hakiri's local Spark engine at {watch.endpoint}: {why}",
            f"run the command again: it starts a new local engine{where}",
        )
    return (
        f"lost the Spark engine at {watch.endpoint}: {why}",
        f"check that the Spark Connect server at {watch.endpoint} is running, then run the "
        "command again",
    )


def _watch_of(text: str) -> EngineWatch | None:
    with _LOCK:
        watches = list(_WATCHES)
    if not watches:
        return None
    ports = {int(p) for p in _ADDRESS.findall(text)}
    for watch in reversed(watches):
        if watch.port in ports:
            return watch
    lost = [w for w in watches if w._lost is not None]
    return (lost or watches)[-1]


def _text(exc: BaseException) -> str:
    try:
        return str(exc)
    except Exception:
        return type(exc).__name__


def _detail(exc: BaseException) -> str:
    """gRPC's details of the failure, one short phrase."""
    text = _text(exc)
    match = re.search(r'details = "([^"]*)"', text)
    detail = match.group(1) if match else text.strip().splitlines()[0] if text.strip() else ""
    return " ".join(detail.split())[:160] or type(exc).__name__


def _port_of(endpoint: str) -> int | None:
    match = re.match(r"^sc://[^/:;]+:(\d+)", endpoint)
    return int(match.group(1)) if match else None


def _shown(endpoint: str) -> str:
    """The endpoint without its parameters (a token lives there)."""
    return endpoint.split("/;", 1)[0].split(";", 1)[0].rstrip("/")
