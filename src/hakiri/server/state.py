"""What the HTTP API reads and the scheduler loop keeps current, shared between their threads."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

from hakiri.catalog.store import Catalog
from hakiri.spec.loader import Project

TOKEN_ENV = "HAKIRI_SERVE_TOKEN"


class ServeState:
    """The manifests in force, the open catalog, whether Spark is up, and a wake-up call.

    `project()` is the last *valid* version of the manifests: an edit that does not
    validate is reported in `reload_error` and the previous version stays in force.
    """

    def __init__(
        self,
        project: Project,
        catalog: Catalog,
        env: Mapping[str, str],
        spark_up: Callable[[], bool],
    ) -> None:
        self._project = project
        self._lock = threading.Lock()
        self.catalog = catalog
        self.env = env
        self.token: str | None = env.get(TOKEN_ENV) or None
        self.spark_up = spark_up
        self.reload_error: str | None = None
        self.wakeup = threading.Event()  # set by a trigger: the scheduler looks at once
        # What is failing now (the scheduler's tick, or a pipeline's runs): key -> last message.
        self.failing: Callable[[], dict[str, str]] = dict

    def project(self) -> Project:
        with self._lock:
            return self._project

    def swap(self, project: Project) -> None:
        with self._lock:
            self._project = project
            self.reload_error = None

    def readiness(self) -> dict[str, bool]:
        """{"catalog": reachable, "spark": session up}."""
        return {"catalog": self.catalog.ping(), "spark": self.spark_up()}

    def wake(self) -> None:
        self.wakeup.set()
