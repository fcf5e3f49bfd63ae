"""`hakiri serve`: start-up, the loop, manifest reload and shutdown of one serve process.

Start-up: load the manifests (an invalid project stops here, exit 1), open and migrate
the catalog, bind the HTTP API, start the one SparkSession the process shares between
its pipelines. Then, until SIGTERM/SIGINT, the loop ticks the reconciler and, every
`watch_interval`, looks for edited manifests. On SIGTERM it drains: no new runs or
chunk claims; runs in flight finish their chunks (up to `drain_timeout`); exit 0.
"""

from __future__ import annotations

import hashlib
import os
import signal
import socket
import sys
import threading
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from hakiri.catalog.records import Phase, RunStatus
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.errors import HakiriError, ManifestError, ServeError
from hakiri.server.scheduler import Reconciler
from hakiri.server.state import TOKEN_ENV, ServeState
from hakiri.services.apply import LazySpark
from hakiri.spec.base import duration_seconds
from hakiri.spec.loader import PIPELINES_DIR, PROJECT_FILE, load_project

__all__ = ["ServeOptions", "serve"]

LOOP_SECONDS = 0.5  # the reconciler's pass; every-Ns schedules are exact to this
BACKOFF_MAX_SECONDS = 10.0  # the longest pause between ticks while they fail
EXIT_GRACE_SECONDS = 8.0  # after the drain: to close the API, the engine session, the catalog


@dataclass(frozen=True)
class ServeOptions:
    host: str | None = None  # None: [serve] host
    port: int | None = None  # None: [serve] port; 0 picks a free port


def log(message: str) -> None:
    """One timestamped line on stderr, flushed (serve usually runs under a supervisor)."""
    stamp = datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    print(f"{stamp} {message}", file=sys.stderr, flush=True)


def serve(root: Path, options: ServeOptions, env: Mapping[str, str]) -> int:
    from hakiri.observability import configure

    project = load_project(root, env)
    project.require_variables(project.pipelines)  # serve runs them all
    settings = project.settings.serve
    configure(env)
    catalog = Catalog.open(
        catalog_url(project.root, project.settings.catalog.url, env), migrate=True
    )
    # A reload may add pipelines that need more jars: the engine starts with every one it can.
    spark = LazySpark(project, long_lived=True, env=env)
    state = ServeState(project, catalog, env, lambda: _spark_up(spark))
    reconciler = Reconciler(state, spark, env, settings, log)
    stop = threading.Event()
    drain_seconds = float(duration_seconds(settings.drain_timeout))

    def on_signal(*_: object) -> None:
        if not stop.is_set():
            stop.set()
            _exit_at_the_latest(drain_seconds + EXIT_GRACE_SECONDS)

    for signum in (signal.SIGTERM, signal.SIGINT):
        signal.signal(signum, on_signal)

    port = settings.port if options.port is None else options.port
    api = _start_api(state, options.host or settings.host, port)
    try:
        if not state.token:
            log(f"{TOKEN_ENV} is not set: POST /v1/pipelines/{{id}}/runs is disabled")
        spark.get()  # one session for the process, up before the first tick
        log(f"ready: {len(project.pipelines)} pipeline(s), catalog {catalog.url_display}")
        from hakiri import pgpool

        with pgpool.keep_open():  # the same questions to the same servers every tick
            _loop(root, env, state, reconciler, stop, duration_seconds(settings.watch_interval))
            stuck = reconciler.drain(drain_seconds)
        if stuck:
            log(
                f"drain timed out with {', '.join(stuck)} still loading; their claims are "
                "handed back: another process takes them over now"
            )
        log("stopped")
    finally:
        api.stop()
        spark.stop()
        catalog.close()
    return 0


def _loop(
    root: Path,
    env: Mapping[str, str],
    state: ServeState,
    reconciler: Reconciler,
    stop: threading.Event,
    watch_seconds: int,
) -> None:
    watcher = ManifestWatcher(root, env, state)
    next_watch = time.monotonic() + watch_seconds
    quiet = reconciler.quiet
    while not stop.is_set():
        try:
            if time.monotonic() >= next_watch:
                watcher.check(busy=set(reconciler.in_flight()))
                next_watch = time.monotonic() + watch_seconds
            reconciler.tick()
            quiet.ok("tick", "the scheduler")
        except HakiriError as exc:  # the catalog is down: say so once, back off, go on
            quiet.failed("tick", f"tick failed: {exc.reason}")
        except Exception as exc:  # a bug: reported, and serve keeps the other pipelines going
            quiet.failed("tick", f"tick failed: internal error: {type(exc).__name__}: {exc}")
        # While ticks fail, wait longer each time (up to BACKOFF_MAX_SECONDS): an outage is
        # not hammered, and a recovery is noticed within that.
        streak = quiet.streak("tick")
        pause = (
            min(LOOP_SECONDS * 2 ** max(streak - 1, 0), BACKOFF_MAX_SECONDS)
            if streak
            else LOOP_SECONDS
        )
        state.wakeup.wait(pause)
        state.wakeup.clear()
    log("draining: no new runs or chunk claims")


def _exit_at_the_latest(seconds: float) -> None:
    """After a stop signal: end the process `seconds` from now if it has not ended by then. The
    drain and the shutdown after it normally finish first; an engine that hangs (a call
    to it that never returns) must not keep serve alive past what its supervisor allows."""

    def deadline() -> None:
        time.sleep(seconds)
        log(
            f"did not stop within {seconds:.0f}s of the signal (the engine does not answer): exiting"
        )
        os._exit(1)

    threading.Thread(target=deadline, name="hakiri-exit-deadline", daemon=True).start()


class ManifestWatcher:
    """Reloads the manifests when their files change; an invalid edit keeps the last valid
    version in force. Pipelines gone from the manifests are retired in the catalog once
    nothing of theirs runs here (as a whole-project `hakiri apply` would)."""

    def __init__(self, root: Path, env: Mapping[str, str], state: ServeState) -> None:
        self.root, self.env, self.state = root, env, state
        self.seen = manifest_digest(root)
        self.retiring: set[str] = set()

    def check(self, busy: set[str]) -> None:
        """`busy`: pipelines with a run in flight in this process (not retired under it)."""
        digest = manifest_digest(self.root)
        if digest != self.seen:
            self.seen = digest
            self._reload()
        self._retire(busy)

    def _reload(self) -> None:
        before = self.state.project()
        try:
            project = load_project(self.root, self.env)
            project.require_variables(project.pipelines)
        except HakiriError as exc:
            first = exc.reason.splitlines()[0]
            if isinstance(exc, ManifestError):  # name the first problem, not just the count
                problem = next(d for d in exc.diagnostics if d.severity == "error")
                first = f"{first}; first: {problem.message} ({problem.where})"
            self.state.reload_error = first
            log(f"manifest edit not applied, the last valid version keeps running: {first}")
            return
        self.state.swap(project)
        old, new = before.pipelines, project.pipelines
        added = sorted(set(new) - set(old))
        removed = sorted(set(old) - set(new))
        changed = sorted(i for i in set(old) & set(new) if old[i] != new[i])
        self.retiring |= set(removed)
        parts = [f"+{i}" for i in added] + [f"~{i}" for i in changed] + [f"-{i}" for i in removed]
        log(f"manifests reloaded: {' '.join(parts) or 'no pipeline changed'}")

    def _retire(self, busy: set[str]) -> None:
        catalog = self.state.catalog
        current = self.state.project().pipelines
        for pipeline_id in sorted(self.retiring):
            if pipeline_id in current:
                self.retiring.discard(pipeline_id)  # it came back
            elif pipeline_id not in busy:
                state = catalog.pipeline_state(pipeline_id)
                if state is not None and state.phase is not Phase.RETIRED:
                    catalog.retire(pipeline_id)
                for run in catalog.pending_runs(pipeline_id):
                    catalog.start_run(pipeline_id, run_id=run.run_id)
                    catalog.finish_run(
                        run.run_id,
                        RunStatus.FAILED,
                        error_kind="PipelineRemoved",
                        error_msg="the pipeline was removed from the manifests before it ran",
                    )
                self.retiring.discard(pipeline_id)
                log(
                    f"{pipeline_id}: in no manifest any more: retired; its state and tables are kept"
                )


def manifest_digest(root: Path) -> str:
    """A digest of hakiri.toml and pipelines/*.toml|json: names and contents."""
    digest = hashlib.sha256()
    files = [root / PROJECT_FILE, *sorted((root / PIPELINES_DIR).glob("*"))]
    for path in files:
        if path.suffix in (".toml", ".json") and path.is_file():
            digest.update(str(path.relative_to(root)).encode())
            try:
                digest.update(path.read_bytes())
            except OSError:  # removed between the listing and the read: next check sees it
                continue
    return digest.hexdigest()


READY_PROBE_SECONDS = 1.5  # /readyz answers within 2 s, whatever the engine does


def _spark_up(spark: LazySpark) -> bool:
    """Does the engine answer? A query of one literal (a round trip, no job), given
    READY_PROBE_SECONDS; an engine known to be gone is down without asking."""
    return spark.answers(READY_PROBE_SECONDS)


class _Api:
    """uvicorn on a socket we bind ourselves (so port 0 works and the real port is known),
    in a thread of its own; signals stay with the main thread."""

    def __init__(self, server: Any, thread: threading.Thread) -> None:
        self.server, self.thread = server, thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)


def _start_api(state: ServeState, host: str, port: int) -> _Api:
    import uvicorn

    from hakiri.server.api import create_app

    try:
        sock = socket.create_server((host, port), reuse_port=False)
    except OSError as exc:
        raise ServeError(
            f"cannot listen on {host}:{port}: {os.strerror(exc.errno) if exc.errno else exc}",
            "choose another --port, or stop what already listens there",
        ) from None
    config = uvicorn.Config(
        create_app(state), log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(
        target=server.run, kwargs={"sockets": [sock]}, name="hakiri-api", daemon=True
    )
    thread.start()
    bound_host, bound_port = sock.getsockname()[:2]
    log(f"listening on http://{bound_host}:{bound_port}")
    return _Api(server, thread)
