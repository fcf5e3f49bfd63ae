"""Fixtures shared by every level of the suite.

- `pg_url`: one throwaway PostgreSQL per session (or HAKIRI_TEST_PG_URL).
- `pg_conn`: an autocommit psycopg connection to it, per test.
- `pg_schema`: a fresh schema per test, dropped afterwards.
- `spark`: one local SparkSession per session, with the PostgreSQL JDBC driver.
- `api_server`: a GitHub-shaped HTTP API on loopback (tests/support/api_server.py) over a
  small dataset, per test; it wants `API_TOKEN` as its bearer token.

Tests that use any of these are marked `integration` automatically, so
`pytest -m "not integration"` runs only the fast tests (no JVM, no server).
"""

from __future__ import annotations

import os
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from tests.support.api_server import ApiServer
from tests.support.github_dataset import GitHubDataset
from tests.support.postgres import PostgresUnavailable, TestPostgres

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import SparkSession

    from tests.support.spark_cluster import StandaloneCluster

INTEGRATION_FIXTURES = frozenset({"pg_url", "spark", "spark_cluster"})

# The engine the suite runs on: "spark" (Apache Spark, a driver in each test process) or
# "sail" (Sail's Spark Connect server inside each test process). `make test` runs the whole
# suite on Spark and the conformance tests (marked `conformance`) again on Sail.
ENGINE = os.environ.get("HAKIRI_TEST_ENGINE", "spark")
if ENGINE == "sail":  # the hakiri commands the tests run in processes of their own, too
    os.environ["HAKIRI_SPARK_ENGINE"] = "sail"

# The suite's files are small: under `writer = "auto"` they would all stage through JDBC.
# Every run here stages through COPY instead, the writer large runs use (processes the
# tests start inherit this); tests/unit/destinations checks the choice itself.
os.environ.setdefault("HAKIRI_COPY_MIN_RUN_BYTES", "0")


# The conformance suite: the tests that define what hakiri does, whatever the engine. `make
# test` runs them on Apache Spark with the rest, and again on Sail (HAKIRI_TEST_ENGINE=sail),
# except those marked spark_only (each says why).
CONFORMANCE = (
    "tests/integration/engine/",
    "tests/integration/engines/",
    "tests/integration/destinations/",
    "tests/integration/sources/",
    "tests/integration/quality/",
    "tests/integration/plan/",
    "tests/integration/context_cli/",
    "tests/integration/diff/",
    "tests/integration/test_demo_project.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    # fixturenames is the whole closure, so pg_conn/pg_schema users count too.
    for item in items:
        if INTEGRATION_FIXTURES.intersection(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.integration)
        if item.nodeid.startswith(CONFORMANCE):
            item.add_marker(pytest.mark.conformance)
    # On Spark: all but the sail_only tests. On Sail: the conformance tests, less those that
    # are Spark's alone. Either way the others are reported as deselected, with their count.
    kept, dropped = [], []
    for item in items:
        if ENGINE == "sail":
            wanted = (
                item.get_closest_marker("conformance") is not None
                and item.get_closest_marker("spark_only") is None
            )
        else:
            wanted = item.get_closest_marker("sail_only") is None
        (kept if wanted else dropped).append(item)
    if dropped:
        config.hook.pytest_deselected(items=dropped)
        items[:] = kept


def pytest_report_header(config: pytest.Config) -> str:
    return f"hakiri engine under test: {ENGINE}"


API_TOKEN = "ghp_test0123456789abcdefSECRET"


@pytest.fixture
def api_server() -> Iterator[ApiServer]:
    """3 repositories, 90 issues, 270 comments; bearer token API_TOKEN; a fresh request log."""
    dataset = GitHubDataset.generate(repos=3, issues=90, comments=270, seed=31)
    with ApiServer(dataset, token=API_TOKEN) as api:
        yield api


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TestPostgres]:
    server = TestPostgres()
    problem = None
    try:
        server.start()
    except PostgresUnavailable as exc:
        problem = str(exc)
    if problem:
        # A failure, not a skip: a green run must mean the database tests ran.
        pytest.fail(f"no PostgreSQL for the integration tests: {problem}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def pg_url(pg_server: TestPostgres) -> str:
    """libpq URL of the session's PostgreSQL, e.g. postgresql://postgres@127.0.0.1:PORT/hakiri_test."""
    return pg_server.url


@pytest.fixture
def pg_conn(pg_url: str) -> Iterator[psycopg.Connection]:
    """An autocommit psycopg connection, closed after the test."""
    import psycopg

    with psycopg.connect(pg_url, autocommit=True) as conn:
        yield conn


@pytest.fixture
def pg_schema(pg_url: str) -> Iterator[str]:
    """A schema of its own for one test; dropped with everything in it afterwards."""
    import psycopg
    from psycopg import sql

    name = f"t_{uuid.uuid4().hex[:12]}"
    # A connection of our own: the test may leave pg_conn closed or broken.
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(name)))
    try:
        yield name
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA IF EXISTS {} CASCADE").format(sql.Identifier(name)))


@pytest.fixture
def pg_catalog(pg_url: str) -> Iterator[str]:
    """A fresh database on the suite's PostgreSQL for a catalog of its own; dropped afterwards."""
    import psycopg
    from psycopg import sql

    name = f"cat_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    try:
        yield f"{pg_url.rsplit('/', 1)[0]}/{name}"
    finally:
        with psycopg.connect(pg_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session's one SparkSession, as `hakiri apply` would start it for a project using
    PostgreSQL and the context store. On Spark: local[2], UI off, the PostgreSQL JDBC driver and
    delta-spark on the classpath. On Sail (HAKIRI_TEST_ENGINE=sail): a session on this test
    process's Sail server, made by hakiri's own engine code."""
    if ENGINE == "sail":
        from hakiri.spark.session import SAIL, connect_session
        from hakiri.spec.project import SparkSettings

        session, _ = connect_session(SparkSettings(engine="sail"), Path.cwd(), SAIL)
        yield session
        return
    from hakiri.errors import SparkSetupError
    from hakiri.spark.delta import delta_jars, with_delta_conf
    from hakiri.spark.session import build_spark_session, resolve_jdbc_jars

    problem = None
    try:
        driver = resolve_jdbc_jars(None)
        jars = [*driver.jars, *delta_jars(())]
    except SparkSetupError as exc:
        problem = f"{exc.reason}\nhint: {exc.hint}"
    if problem:
        pytest.fail(problem, pytrace=False)

    conf = with_delta_conf(
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        }
    )
    session = build_spark_session(master="local[2]", conf=conf, jars=jars, app_name="hakiri-tests")
    try:
        yield session
    finally:
        session.stop()


@pytest.fixture(scope="session")
def spark_cluster() -> Iterator[StandaloneCluster]:
    """A Spark standalone cluster (a master, two one-core workers) for the whole session,
    started on first use: `url` is its `spark://` master."""
    from tests.support.spark_cluster import StandaloneCluster

    started = StandaloneCluster().start()
    try:
        yield started
    finally:
        started.stop()


_SESSION_STARTED = time.time()


@pytest.fixture(autouse=True)
def _no_spark_connect_in_the_test_process() -> Iterator[None]:
    """hakiri's default engine is a Spark Connect server; a command run inside the test process
    (CliRunner) must use the suite's `spark` session instead, which it reuses when it is active.
    A Spark Connect session made here would switch PySpark in this process to Spark Connect
    for good (SPARK_CONNECT_MODE_ENABLED), and every later `spark` fixture would fail."""
    yield
    if ENGINE == "sail":
        return  # every session of a Sail run is a Spark Connect session
    if os.environ.pop("SPARK_CONNECT_MODE_ENABLED", None) is not None:
        pytest.fail(
            "this test started a Spark Connect session inside the test process: request the "
            "`spark` fixture (an in-process command reuses it) or run hakiri in a subprocess",
            pytrace=False,
        )


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Stop the local Spark Connect servers this run started (the default engine of every
    `hakiri` command the tests run in a process of its own), once every xdist worker is done;
    servers that were running before the run are left alone."""
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller stops them after all workers finish
    from hakiri.spark.connect_server import running_servers, stop_server

    for state in running_servers():
        if state.started_at >= _SESSION_STARTED:
            stop_server(state)
