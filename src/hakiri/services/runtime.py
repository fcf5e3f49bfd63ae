"""What a command that moves data runs on: the one SparkSession, started on first use
(apply, replay, serve, `plan --count-deletes`), and the jars it needs. (The destination each
target loads into: `engine.run_context.RunContext.destination_for`.)"""

from __future__ import annotations

import logging
import os
import threading
from collections.abc import Mapping
from typing import Any

from hakiri.destinations.kinds import kind_of
from hakiri.sources.kinds import kind_of as source_kind
from hakiri.spark.class_sharing import start_warm_up
from hakiri.spec.connections import destination_kind
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["LazySpark", "engine_needs", "local_engine_fingerprints"]

log = logging.getLogger(__name__)


def _uses_postgres(project: Project) -> bool:
    """Does any pipeline read or write where the JDBC driver is needed?"""
    return any("jdbc" in _jars_for(project, spec) for spec in project.pipelines.values())


def _uses_context_store(project: Project) -> bool:
    """Does any pipeline load where Spark needs delta-spark?"""
    return any("delta" in _jars_for(project, spec) for spec in project.pipelines.values())


def _jars_for(project: Project, spec: PipelineSpec) -> frozenset[str]:
    """The jars Apache Spark needs for the pipeline's source, its destination and its
    transforms (a `join` step reads the context store)."""
    joins = frozenset({"delta"}) if any(s.op == "join" for s in spec.transforms) else frozenset()
    return (
        source_kind(spec).spark_jars
        | kind_of(destination_kind(project.settings, spec)).spark_jars
        | joins
    )


def _delta_available(env: Mapping[str, str]) -> bool:
    """Can delta-spark's jars be had (cached, or resolved now)?"""
    from hakiri.errors import SparkSetupError
    from hakiri.spark.delta import delta_jars

    try:
        delta_jars((), env)
    except SparkSetupError:
        return False
    return True


def _jdbc_available(env: Mapping[str, str]) -> bool:
    """Can the PostgreSQL JDBC driver be had (found, cached, or resolved now)?"""
    from hakiri.errors import SparkSetupError
    from hakiri.spark.session import resolve_jdbc_jars

    try:
        resolve_jdbc_jars(None, env)
    except SparkSetupError:
        return False
    return True


def engine_needs(
    project: Project,
    *,
    delta: bool | None = None,
    long_lived: bool = False,
    env: Mapping[str, str] = os.environ,
) -> dict[str, bool]:
    """What the project's engine starts with: the PostgreSQL driver (`require_jdbc`) and
    delta-spark (`delta`). A long-lived engine (serve's) gets both whenever their jars can be
    had: a reload may add a pipeline that needs them, and jars cannot be added to a running
    engine."""
    wants_delta = _uses_context_store(project) if delta is None else delta
    return {
        "require_jdbc": _uses_postgres(project) or (long_lived and _jdbc_available(env)),
        "delta": wants_delta or (long_lived and _delta_available(env)),
    }


def local_engine_fingerprints(project: Project, env: Mapping[str, str] = os.environ) -> set[str]:
    """The fingerprints of the local servers this project's commands use (apply's and serve's):
    their own, and running ones of other recipes that serve them (`Recipe.serves`), from the
    jars already cached: nothing is downloaded to tell."""
    from hakiri.errors import SparkSetupError
    from hakiri.spark.connect_server import serving
    from hakiri.spark.packages import OFFLINE_ENV
    from hakiri.spark.session import local_recipe

    offline = {**env, OFFLINE_ENV: "true"}
    found = set()
    for long_lived in (False, True):
        try:
            needs = engine_needs(project, long_lived=long_lived, env=offline)
            recipe = local_recipe(project.settings.spark, project.root, **needs, env=offline)
        except SparkSetupError:
            continue
        found.add(recipe.fingerprint())
        found.update(state.fingerprint for state in serving(recipe, env))
    return found


class LazySpark:
    """One SparkSession for the whole apply (or serve), started on first use, with the
    environment the command was given (its engine, endpoint and jars).

    A session already active in this process (a test suite's) is reused and left running;
    one we started is stopped when the apply ends. When the engine of a session we started
    is gone (its local server died or was stopped, an endpoint stopped answering), the next
    `get` starts a new one: a long-lived process heals instead of failing every run after.
    """

    def __init__(
        self,
        project: Project,
        *,
        delta: bool | None = None,
        long_lived: bool = False,
        remote: str | None = None,
        env: Mapping[str, str] = os.environ,
    ) -> None:
        self.project, self.env = project, env
        # delta-spark in the session: when asked, else when a pipeline loads into the context store
        self.delta = _uses_context_store(project) if delta is None else delta
        self.long_lived = long_lived
        self.session: Any = None
        self.owned = False
        self.asked_remote = remote  # overrides the project's and HAKIRI_SPARK_REMOTE
        self.remote: str | None = None  # the Spark Connect endpoint, when not a driver in-process
        self.lease: Any = None  # the hold on hakiri's local Spark Connect server, if used
        self._lock = threading.RLock()
        self._probe: _Probe | None = None
        # start_early's hold on the local server, until the session holds it (or the command ends)
        self._early_guard = threading.Lock()
        self._early: Any = None
        self._early_over = False

    def start_early(self) -> None:
        """When this command's engine is hakiri's local server, have it starting (or found)
        in a background thread now, while the command loads its catalog and plans: the first
        batch then waits for what is left of the start, not all of it. A failure here is left
        for `get` to meet and report."""
        from hakiri.errors import SparkSetupError
        from hakiri.spark.session import remote_of, running_session

        try:
            if (
                self.asked_remote is not None
                or remote_of(self.project.settings.spark, self.env) != "local"
            ):
                return
        except SparkSetupError:
            return
        if running_session() is not None:  # a session this process has (a test suite's) is used
            return
        threading.Thread(target=self._hold_early, name="hakiri-engine-start", daemon=True).start()

    def _hold_early(self) -> None:
        from hakiri.spark.connect_server import hold_local
        from hakiri.spark.java import require_java
        from hakiri.spark.session import local_recipe

        try:
            require_java(self.env)
            needs = engine_needs(
                self.project, delta=self.delta, long_lived=self.long_lived, env=self.env
            )
            recipe = local_recipe(
                self.project.settings.spark, self.project.root, **needs, env=self.env
            )
            lease = hold_local(recipe, self.env, holder=str(self.project.root))
        except Exception as exc:  # `get` starts it again and reports what fails
            log.debug("starting the engine early failed: %s", exc)
            return
        with self._early_guard:
            if not self._early_over:
                self._early = lease
                return
        lease.release()

    def _let_go_early(self) -> None:
        with self._early_guard:
            self._early_over = True
            lease, self._early = self._early, None
        if lease is not None:
            lease.release()

    def get(self) -> Any:
        with self._lock:
            if self.session is not None and self.owned and self.engine_gone() is not None:
                self._let_go()  # its engine is gone: a new one below
            if self.session is None:
                self._start()
            return self.session

    def _start(self) -> None:
        from hakiri.spark.session import connect_session, remote_of, running_session, session_for

        if self.asked_remote is None:
            self.session = running_session()
            if self.session is not None:
                return
        settings = self.project.settings.spark
        needs = engine_needs(
            self.project, delta=self.delta, long_lived=self.long_lived, env=self.env
        )
        self.remote = self.asked_remote or remote_of(settings, self.env)
        if self.remote is None:
            self.session = session_for(settings, self.project.root, **needs, env=self.env)
        else:
            self.session, self.lease = connect_session(
                settings, self.project.root, self.remote, **needs, env=self.env
            )
        self.owned = True
        self._let_go_early()  # the session's lease holds the server now

    def engine_gone(self) -> str | None:
        """Why the engine of the current session is known to be gone; None while it is not."""
        from hakiri.spark.liveness import session_watch

        watch = session_watch(self.session) if self.session is not None else None
        return watch.cause() if watch is not None else None

    def answers(self, timeout: float) -> bool:
        """Does the engine answer a query of one literal within `timeout` seconds? Never waits
        longer, whatever the engine does (serve's /readyz); False before the first `get`."""
        session = self.session
        if session is None or self.engine_gone() is not None:
            return False
        with self._lock:
            if self._probe is None or self._probe.session is not session or self._probe.done():
                self._probe = _Probe(session)
            probe = self._probe
        return probe.wait(timeout)

    def stop(self) -> None:
        with self._lock:
            self._let_go()
        self._let_go_early()

    def _let_go(self) -> None:
        if self.session is not None and self.owned:
            if self.remote is not None:
                from hakiri.spark.session import close_isolated_sessions

                close_isolated_sessions()
            self.session.stop()
            if self.lease is not None:
                self.lease.release()  # the local server stays up for the next command
                self.lease = None
            elif self.remote is None:
                # This run paid for a cold JVM: let the next ones start from an archive of its
                # classes (unless the user's own driver options manage class-data sharing).
                options = self.project.settings.spark.conf.get("spark.driver.extraJavaOptions", "")
                start_warm_up(str(options))
        self.session = None
        self.owned = False


class _Probe:
    """`SELECT 1` on a session, in a daemon thread of its own: a caller waits for it as long as
    it likes, and a probe that never returns (an engine that hangs) holds up nothing."""

    def __init__(self, session: Any) -> None:
        self.session = session
        self._answered = False
        self._finished = threading.Event()
        threading.Thread(target=self._ask, name="hakiri-engine-probe", daemon=True).start()

    def _ask(self) -> None:
        try:
            self.session.sql("SELECT 1").collect()
            self._answered = True
        except Exception:
            self._answered = False
        finally:
            self._finished.set()

    def done(self) -> bool:
        return self._finished.is_set()

    def wait(self, timeout: float) -> bool:
        return self._finished.wait(timeout) and self._answered
