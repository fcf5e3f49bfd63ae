"""The one SparkSession a command uses, started on first use (apply, plan's delete counts,
replay, serve)."""

from __future__ import annotations

from typing import Any

from hakiri.spark.class_sharing import start_warm_up
from hakiri.spec.connections import destination_kind
from hakiri.spec.loader import Project
from hakiri.spec.pipeline import PostgresDestination

__all__ = ["LazySpark"]


def _uses_postgres(project: Project) -> bool:
    """Does any pipeline read or write PostgreSQL (so Spark needs the JDBC driver)?"""
    return any(
        spec.source.connector == "postgres" or isinstance(spec.destination, PostgresDestination)
        for spec in project.pipelines.values()
    )


def _uses_context_store(project: Project) -> bool:
    """Does any pipeline load into the context store (so Spark needs delta-spark)?"""
    return any(
        destination_kind(project.settings, spec) == "context" for spec in project.pipelines.values()
    )


class LazySpark:
    """One SparkSession for the whole apply, started on first use.

    A session already active in this process (a test suite's, or serve's) is
    reused and left running; one we started is stopped when the apply ends.
    """

    def __init__(self, project: Project, *, delta: bool | None = None) -> None:
        self.project = project
        # delta-spark in the session: when asked, else when a pipeline loads into the context store
        self.delta = _uses_context_store(project) if delta is None else delta
        self.session: Any = None
        self.owned = False

    def get(self) -> Any:
        if self.session is None:
            from pyspark.sql import SparkSession

            from hakiri.spark.session import session_for

            self.session = SparkSession.getActiveSession()
            if self.session is None:
                self.session = session_for(
                    self.project.settings.spark,
                    self.project.root,
                    require_jdbc=_uses_postgres(self.project),
                    delta=self.delta,
                )
                self.owned = True
        return self.session

    def stop(self) -> None:
        if self.session is not None and self.owned:
            options = self.session.sparkContext.getConf().get("spark.driver.extraJavaOptions", "")
            self.session.stop()
            # This run paid for a cold JVM: let the next ones start from an archive of its classes.
            start_warm_up(options or "")
        self.session = None
