"""hakiri on a Spark Connect server it did not start: Spark's own `SparkConnectServer` with
Spark's stock configuration, given only what its owner would give any client's jobs (Delta's
two settings, the PostgreSQL driver and delta-spark jars from the cache, a Python with hakiri's
packages for its workers), as a managed Spark Connect service is. The example project applies
through it (HAKIRI_SPARK_REMOTE) into the context store and into PostgreSQL, and every table
equals the one a run on hakiri's own local server writes."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app
from hakiri.destinations.context.inspect import list_tables
from hakiri.spark.class_sharing import spark_submit
from hakiri.spark.connect_server import SERVER_CLASS
from hakiri.spark.delta import DELTA_SESSION_CONF, delta_jars
from hakiri.spark.session import resolve_jdbc_jars
from tests.support.context_store import read_context_table
from tests.support.engines import QUICK_JVM_ENV

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def stock_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A Spark Connect server started as Spark's docs start one: no hakiri settings at all."""
    jars = [*resolve_jdbc_jars(None).jars, *delta_jars(())]
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    submit = spark_submit()
    assert submit is not None
    command = [str(submit), "--class", SERVER_CLASS, "--jars", ",".join(jars)]
    for key, value in {
        **DELTA_SESSION_CONF,
        "spark.connect.grpc.binding.port": str(port),
        "spark.ui.enabled": "false",
    }.items():
        command += ["--conf", f"{key}={value}"]
    log = tmp_path_factory.mktemp("stock") / "server.log"
    server = subprocess.Popen(
        [*command, "spark-internal"],
        stdout=log.open("wb"),
        stderr=subprocess.STDOUT,
        env={**os.environ, **QUICK_JVM_ENV, "PYSPARK_PYTHON": sys.executable},
        start_new_session=True,
    )
    try:
        deadline = time.monotonic() + 180
        while True:
            assert server.poll() is None, log.read_text(errors="replace")[-3000:]
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                assert time.monotonic() < deadline, "the stock Connect server did not start"
                time.sleep(0.5)
        yield f"sc://localhost:{port}"
    finally:
        server.terminate()
        try:
            server.wait(60)
        except subprocess.TimeoutExpired:
            server.kill()


def _example(root: Path) -> Path:
    """The repository's example project, and its PostgreSQL variant in examples/postgres."""
    root.mkdir()
    shutil.copy(REPO / "hakiri.toml", root)
    for part in ("pipelines", "data", "schemas"):
        shutil.copytree(REPO / part, root / part)
    shutil.copytree(REPO / "examples" / "postgres", root / "pg", symlinks=False)
    return root


def _database(pg_url: str) -> str:
    name = f"stock_{uuid.uuid4().hex[:10]}"
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    return f"{pg_url.rsplit('/', 1)[0]}/{name}"


def _tables(root: Path, db_url: str, spark: Any) -> dict[str, list[tuple]]:
    """Every table the example wrote: the context store's (delta-rs, Spark opens them too) and
    PostgreSQL's (the loaded tables, not hakiri's own ledger), each as sorted rows."""
    found: dict[str, list[tuple]] = {}
    store = root / ".hakiri" / "context"
    for name in list_tables(store):
        rows = read_context_table(store / name, spark)
        found[f"context.{name}"] = sorted(_comparable(name, r) for r in rows)
    with psycopg.connect(db_url) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT tablename FROM pg_tables WHERE schemaname = 'public' "
                "AND tablename IN ('orders', 'customers', 'events')"
            )
        ]
        for name in names:
            cursor = conn.execute(sql.SQL("SELECT * FROM {}").format(sql.Identifier(name)))
            columns = [c.name for c in cursor.description or ()]
            rows = [dict(zip(columns, r, strict=True)) for r in cursor.fetchall()]
            found[f"postgres.{name}"] = sorted(_comparable(name, r) for r in rows)
    return found


def _comparable(table: str, row: dict) -> tuple:
    # A quarantine record carries its own id, its run's id and its time: not the same in
    # two runs; what it quarantined, and why, is.
    if table.endswith("_quarantine"):
        row = {k: row[k] for k in ("pipeline_id", "rule_id", "row")}
    return tuple((k, str(v)) for k, v in row.items())


def test_the_example_project_applies_through_a_stock_connect_server(
    tmp_path: Path, pg_url: str, spark, stock_server: str
) -> None:
    remote, local = _example(tmp_path / "remote"), _example(tmp_path / "local")
    remote_db, local_db = _database(pg_url), _database(pg_url)
    env = {**os.environ, "HAKIRI_SPARK_REMOTE": stock_server, "HAKIRI_DEMO_PG_URL": remote_db}
    for project in (remote, remote / "pg"):
        done = subprocess.run(
            [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(project)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "error" not in done.stderr, done.stderr

    # The reference: the same project on the suite's session, hakiri's own local server.
    for project in (local, local / "pg"):
        done = CliRunner().invoke(
            app, ["apply", "--project", str(project)], env={"HAKIRI_DEMO_PG_URL": local_db}
        )
        assert done.exit_code == 0, done.output

    loaded = _tables(remote, remote_db, spark)
    assert {"context.orders", "context.customers", "context.events"} <= set(loaded)
    assert {"postgres.orders", "postgres.customers", "postgres.events"} <= set(loaded)
    assert all(loaded.values()), {k: len(v) for k, v in loaded.items()}
    assert loaded == _tables(local, local_db, spark)


def test_a_static_setting_the_server_lacks_is_named_with_the_fix(
    tmp_path: Path, stock_server: str
) -> None:
    """A setting hakiri must have on its session that only the server's start can change (here
    the user's own, static one) stops the command before any work, naming the fix."""
    root = _example(tmp_path / "p")
    manifest = root / "hakiri.toml"
    manifest.write_text(
        manifest.read_text().replace(
            'conf = { "spark.sql.shuffle.partitions" = "4" }',
            'conf = { "spark.sql.shuffle.partitions" = "4", '
            '"spark.sql.catalogImplementation" = "hive" }',
        )
    )
    done = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
        env={**os.environ, "HAKIRI_SPARK_REMOTE": stock_server},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 1, done.stderr
    errors = [line for line in done.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, done.stderr
    assert "spark.sql.catalogImplementation=in-memory, and hakiri needs hive" in errors[0]
    assert "--conf spark.sql.catalogImplementation=hive" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (root / ".hakiri" / "context" / "orders").exists()
