"""Fixtures shared by every level of the suite.

- `pg_url`: one throwaway PostgreSQL per session (or HAKIRI_TEST_PG_URL).
- `pg_conn`: an autocommit psycopg connection to it, per test.
- `pg_schema`: a fresh schema per test, dropped afterwards.
- `spark`: one Spark Connect session per test process, on a local Spark Connect server of
  its own (the PostgreSQL JDBC driver and delta-spark), as a `hakiri` command gets one;
  `spark_ui`: that server's Spark UI, whose REST API tells what Spark ran.
- `api_server`: a GitHub-shaped HTTP API on loopback (tests/support/api_server.py) over a
  small dataset, per test; it wants `API_TOKEN` as its bearer token.
- `shopify_server`: a Shopify-shaped Admin API on loopback (tests/support/shopify_server.py)
  over a small shop, per test; it wants `SHOPIFY_ACCESS_TOKEN` as X-Shopify-Access-Token.
- `s3_server`: one S3-compatible server per session (s3proxy on loopback, tests/support/s3_server.py;
  its jar fetched once into the jar cache), AWS signatures checked, objects as plain files
  under its `root`; `storage_options()` for deltalake and obstore, `env()` for hakiri's sync.
- `s3_bucket`: the name of a fresh, empty bucket on it, per test; removed afterwards.

Tests that use any of these are marked `integration` automatically, so
`pytest -m "not integration"` runs only the fast tests (no JVM, no server).
"""

from __future__ import annotations

import functools
import os
import shutil
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import typer.main
import typer.testing

from tests.support.api_server import ApiServer
from tests.support.github_dataset import GitHubDataset
from tests.support.postgres import PostgresUnavailable, TestPostgres
from tests.support.s3_server import S3Server, S3ServerUnavailable
from tests.support.shopify_dataset import ShopDataset
from tests.support.shopify_server import ShopifyServer

if TYPE_CHECKING:
    import psycopg
    from pyspark.sql import SparkSession

    from tests.support.spark_cluster import StandaloneCluster

INTEGRATION_FIXTURES = frozenset({"pg_url", "spark", "spark_cluster", "s3_server"})

# The engine the suite runs on: "spark" (Apache Spark: hakiri's local Spark Connect server, one
# per test process) or "sail" (Sail's Spark Connect server inside each test process). `make test` runs the whole
# suite on Spark and the conformance tests (marked `conformance`) again on Sail.
ENGINE = os.environ.get("HAKIRI_TEST_ENGINE", "spark")
if ENGINE == "sail":  # the hakiri commands the tests run in processes of their own, too
    os.environ["HAKIRI_SPARK_ENGINE"] = "sail"

# Typer's CliRunner builds the app's Click command tree on every invoke (reading every
# command's signature and type hints: a tenth of a second for hakiri's, a few minutes over
# the suite's thousands of in-process commands). The tree depends on the app alone, as
# in a `hakiri` process, which builds it once: so does the suite, once per app.
typer.testing._get_command = functools.cache(typer.main.get_command)  # type: ignore[attr-defined]

# The suite's files are small: under `writer = "auto"` they would all stage through JDBC.
# Every run here stages through COPY instead, the writer large runs use (processes the
# tests start inherit this); tests/unit/destinations checks the choice itself.
os.environ.setdefault("HAKIRI_COPY_MIN_RUN_BYTES", "0")


# The conformance suite: the tests that define what hakiri does, whatever the engine. `make
# test` runs them on Apache Spark with the rest, and again on Sail (HAKIRI_TEST_ENGINE=sail),
# except those marked spark_only or engine_free (each says why).
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
    # are Spark's alone and those that never touch an engine (engine_free: they would only
    # repeat the Spark pass). Either way the others are reported as deselected, with their
    # count.
    kept, dropped = [], []
    for item in items:
        if item.get_closest_marker("engine_free") and "spark" in getattr(item, "fixturenames", ()):
            raise pytest.UsageError(f"{item.nodeid} is marked engine_free but uses `spark`")
        if ENGINE == "sail":
            wanted = (
                item.get_closest_marker("conformance") is not None
                and item.get_closest_marker("spark_only") is None
                and item.get_closest_marker("engine_free") is None
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


SHOPIFY_ACCESS_TOKEN = "shpat_test0123456789abcdefSECRET"


@pytest.fixture
def shopify_server() -> Iterator[ShopifyServer]:
    """300 orders (their line items), 120 customers, 80 products; Shopify's bucket of 40
    leaking 2 a second; token SHOPIFY_ACCESS_TOKEN; a fresh request log."""
    with ShopifyServer(ShopDataset.generate(), token=SHOPIFY_ACCESS_TOKEN) as shop:
        yield shop


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
def s3_server() -> Iterator[S3Server]:
    """The session's S3-compatible server (one per xdist worker), e.g. http://127.0.0.1:PORT."""
    problem = None
    try:
        server = S3Server.start()
    except S3ServerUnavailable as exc:
        problem = str(exc)
    if problem:
        # A failure, not a skip: a green run must mean the object-store tests ran.
        pytest.fail(f"no S3-compatible server for the integration tests: {problem}", pytrace=False)
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> Iterator[str]:
    """A bucket of its own for one test, e.g. hk-1a2b3c4d; removed with its objects afterwards."""
    name = f"hk-{uuid.uuid4().hex[:8]}"
    s3_server.create_bucket(name)
    try:
        yield name
    finally:
        shutil.rmtree(s3_server.root / name, ignore_errors=True)


@pytest.fixture(scope="session")
def spark() -> Iterator[SparkSession]:
    """The session's one Spark session, made by hakiri's own engine code, the way a `hakiri`
    command on a local master gets it: a Spark Connect session. On Spark: on a local Spark
    Connect server of this test process's own (local[2], the PostgreSQL JDBC driver and
    delta-spark; Spark's UI on a free port, for the tests that read what Spark ran through its
    REST API, `spark_ui`). On Sail (HAKIRI_TEST_ENGINE=sail): on this test process's Sail
    server. A command run in the test process (CliRunner) uses this session."""
    from hakiri.spark.session import connect_session
    from hakiri.spec.project import SparkSettings

    if ENGINE == "sail":
        session, _ = connect_session(SparkSettings(engine="sail"), Path.cwd(), "sail")
        yield session
        return
    from hakiri.errors import SparkSetupError
    from hakiri.spark.connect_server import stop_server

    ui_port = _free_port()
    settings = SparkSettings(
        master="local[2]",
        conf={
            "spark.ui.enabled": "true",
            "spark.ui.port": str(ui_port),
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        },
    )
    problem = None
    try:
        session, lease = connect_session(
            settings, Path.cwd(), "local", require_jdbc=True, delta=True
        )
    except SparkSetupError as exc:
        problem = f"{exc.reason}\nhint: {exc.hint}"
    if problem:
        pytest.fail(problem, pytrace=False)
    session._hakiri_test_ui = f"http://127.0.0.1:{ui_port}"
    try:
        yield session
    finally:
        session.stop()
        assert lease is not None
        lease.release()
        stop_server(lease.state)


@pytest.fixture(scope="session")
def spark_ui(spark: SparkSession) -> str:
    """The base URL of Spark's UI (its REST API under /api/v1) for the `spark` session's
    server: what Spark ran, as a user's Spark UI shows it."""
    if ENGINE == "sail":
        pytest.fail("Sail has no Spark UI: mark the test spark_only", pytrace=False)
    return str(session_ui(spark))


def session_ui(spark: SparkSession) -> str:
    return str(spark._hakiri_test_ui)  # type: ignore[attr-defined]


def _free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


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
