"""What a command that moves data runs on: the one SparkSession, started on first use
(apply, replay, serve, `plan --count-deletes`), and the destination each target loads into."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from hakiri.destinations.base import Destination
from hakiri.destinations.kinds import kind_of
from hakiri.spark.class_sharing import start_warm_up
from hakiri.spec.connections import Target, destination_kind
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PipelineSpec

__all__ = ["LazySpark", "destination_for"]


def _uses_postgres(project: Project) -> bool:
    """Does any pipeline read PostgreSQL, or write where the JDBC driver is needed?"""
    return any(
        spec.source.connector == "postgres" or "jdbc" in _jars_for(project, spec)
        for spec in project.pipelines.values()
    )


def _uses_context_store(project: Project) -> bool:
    """Does any pipeline load where Spark needs delta-spark?"""
    return any("delta" in _jars_for(project, spec) for spec in project.pipelines.values())


def _jars_for(project: Project, spec: PipelineSpec) -> frozenset[str]:
    return kind_of(destination_kind(project.settings, spec)).spark_jars


def _delta_available() -> bool:
    """Can delta-spark's jars be had (cached, or resolved now)?"""
    from hakiri.errors import SparkSetupError
    from hakiri.spark.delta import delta_jars

    try:
        delta_jars(())
    except SparkSetupError:
        return False
    return True


def _jdbc_available() -> bool:
    """Can the PostgreSQL JDBC driver be had (found, cached, or resolved now)?"""
    from hakiri.errors import SparkSetupError
    from hakiri.spark.session import resolve_jdbc_jars

    try:
        resolve_jdbc_jars(None)
    except SparkSetupError:
        return False
    return True


class LazySpark:
    """One SparkSession for the whole apply, started on first use.

    A session already active in this process (a test suite's, or serve's) is
    reused and left running; one we started is stopped when the apply ends.
    """

    def __init__(
        self,
        project: Project,
        *,
        delta: bool | None = None,
        long_lived: bool = False,
        remote: str | None = None,
    ) -> None:
        self.project = project
        # delta-spark in the session: when asked, else when a pipeline loads into the context store
        self.delta = _uses_context_store(project) if delta is None else delta
        # A long-lived session (serve's) gets delta-spark and the PostgreSQL driver whenever
        # their jars can be had: a reload may add a pipeline that needs them, and jars cannot
        # be added to a running engine.
        self.long_lived = long_lived
        self.session: Any = None
        self.owned = False
        self.asked_remote = remote  # overrides the project's and HAKIRI_SPARK_REMOTE
        self.remote: str | None = None  # the Spark Connect endpoint, when not a driver in-process
        self.lease: Any = None  # the hold on hakiri's local Spark Connect server, if used

    def get(self) -> Any:
        if self.session is None:
            from pyspark.sql import SparkSession

            from hakiri.spark.session import connect_session, remote_of, session_for

            if self.asked_remote is None:
                self.session = SparkSession.getActiveSession()
                if self.session is not None:
                    return self.session
            settings = self.project.settings.spark
            jdbc = _uses_postgres(self.project) or (self.long_lived and _jdbc_available())
            delta = self.delta or (self.long_lived and _delta_available())
            needs = {"require_jdbc": jdbc, "delta": delta}
            self.remote = self.asked_remote or remote_of(settings)
            if self.remote is None:
                self.session = session_for(settings, self.project.root, **needs)
            else:
                self.session, self.lease = connect_session(
                    settings, self.project.root, self.remote, **needs
                )
            self.owned = True
        return self.session

    def stop(self) -> None:
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


def destination_for(
    project: Project,
    spec: PipelineSpec,
    target: Target,
    env: Mapping[str, str],
    spark: Callable[[], Any],
) -> Destination:
    """The destination one table of a pipeline loads into; `spark` starts Spark on first use."""
    return kind_of(target.kind).open(project, spec, target, env, spark)
