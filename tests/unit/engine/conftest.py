"""The engine's test bench: a real PipelineRunner, a SQLite catalog in tmp_path, Sail in this
process, and `FakeDestination` (tests/support) in place of PostgreSQL or the context store.

No JVM and no server: the runner reads its CSV files through Sail and loads into the fake,
injected through the runner's own seam (`destination_for`). One Sail session serves the
whole test session.

Sail speaks Spark Connect, which PySpark switches on for the whole process
(SPARK_CONNECT_MODE_ENABLED); the suite's `spark` fixture, in the same worker process, is
a Spark Connect session too, on Apache Spark. So the Sail session is made by the Connect
client's constructor, never the process's default session, and the switch is on while a
test here runs (`engine`).
"""

from __future__ import annotations

import os
import textwrap
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.engine.controls import Outcome, RunControls
from hakiri.engine.run_context import RunContext
from hakiri.engine.runner import PipelineRunner
from hakiri.spec.loader import Project, load_project
from tests.support.fake_destination import FakeDestination

CONNECT_SWITCH = "SPARK_CONNECT_MODE_ENABLED"


@pytest.fixture(scope="session")
def sail_session() -> Iterator[Any]:
    """One Spark Connect session on this process's Sail server, configured as hakiri's."""
    from pyspark.sql.connect.session import SparkSession as ConnectSession

    from hakiri.spark.engines import mark_engine
    from hakiri.spark.sail import sail_endpoint
    from hakiri.spark.session import SAIL, default_spark_conf
    from hakiri.spark.tally import mark_in_process

    # Made by the constructor, not a builder: a builder would make it this process's default
    # session, which the suite's `spark` fixture (and a command run in this process) must be.
    session = ConnectSession(connection=sail_endpoint())
    sql_conf = {k: str(v) for k, v in default_spark_conf().items() if k.startswith("spark.sql.")}
    for key, value in sql_conf.items():
        session.conf.set(key, value)
    session._hakiri_sql_conf = sql_conf
    yield mark_in_process(mark_engine(session, SAIL))
    session.stop()


@pytest.fixture
def engine(sail_session: Any) -> Iterator[Any]:
    """The Sail session, with PySpark's Connect switch on for this test only."""
    was_on = CONNECT_SWITCH in os.environ
    os.environ[CONNECT_SWITCH] = "1"
    try:
        yield sail_session
    finally:
        if not was_on:
            os.environ.pop(CONNECT_SWITCH, None)


@dataclass
class Bench:
    """A project in a tmp dir with one files pipeline `p` (table `t` <- data/*.csv), its SQLite
    catalog, and the fake destination its runs load into."""

    root: Path
    spark: Any
    destination: FakeDestination = field(default_factory=FakeDestination)

    @property
    def catalog_url(self) -> str:
        """The project's own catalog (SQLite under .hakiri/), where `hakiri plan` looks too."""
        project = self.project()
        return catalog_url(project.root, project.settings.catalog.url, {})

    def manifest(
        self, load: str = '{ mode = "append" }', source: str = '{ path = "data/*.csv" }'
    ) -> None:
        self.write(
            "hakiri.toml",
            f"""
            [project]
            name = "bench"

            [spark]
            engine = "sail"

            [[pipeline]]
            id = "p"
            source = {{ connector = "files", config = {source} }}
            tables = ["t"]
            load = {load}
            """,
        )

    def write(self, relative: str, text: str) -> Path:
        path = self.root / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip("\n"))
        return path

    def project(self) -> Project:
        return load_project(self.root, {})

    def runner(
        self, catalog: Catalog, controls: RunControls | None = None, project: Project | None = None
    ) -> PipelineRunner:
        project = project or self.project()
        run = RunContext(
            project, {}, "spark", lambda: self.spark, opener=lambda spec, target: self.destination
        )
        return PipelineRunner(run, project.pipelines["p"], catalog, controls=controls)

    def apply(self, controls: RunControls | None = None) -> Outcome:
        """One run of `p`, on a catalog opened for it (as one `hakiri apply` would)."""
        with Catalog.open(self.catalog_url, migrate=True) as catalog:
            outcome = self.runner(catalog, controls).run()
        if outcome.status == "failed":  # shown with the test's output when it fails
            print(f"run failed: {outcome.error} (hint: {outcome.hint})")
        return outcome

    def rows(self) -> list[dict[str, Any]]:
        return self.destination.rows("t")


@pytest.fixture
def bench(tmp_path: Path, engine: Any) -> Bench:
    made = Bench(tmp_path, engine)
    made.manifest()
    return made
