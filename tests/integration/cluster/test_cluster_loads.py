"""The same loads on a real Spark standalone cluster (a master and two workers, separate JVM
processes on loopback) as on the suite's local session: `hakiri apply` runs as a new process with
`[spark] master = "spark://…"`, its executors on the workers, and the tables it writes
equal, row for row, the ones a local run writes.

These applies run their Spark driver in the command, hakiri's default for a cluster's master
(pinned with `HAKIRI_SPARK_REMOTE=in-process`): the cluster counts one finished application
per apply. The local reference runs in the test process, on the suite's session (no JVM
driver to start for it). A Spark Connect server submitted to the cluster is not proven here
yet."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import psycopg
import pytest
from deltalake import DeltaTable
from psycopg import sql
from typer.testing import CliRunner

from hakiri.cli.main import app
from tests.support.engines import QUICK_JVM_ENV
from tests.support.spark_cluster import StandaloneCluster

pytestmark = pytest.mark.integration

ROWS = 2_000
RULES = """
[[pipeline.validate.rules]]
type = "not_null"
column = "email"
on_fail = "skip"

[[pipeline.validate.rules]]
type = "range"
column = "amount"
min = 0
on_fail = "warn"

[pipeline.quarantine]
enabled = true
"""


@pytest.fixture
def cluster(spark_cluster: StandaloneCluster) -> StandaloneCluster:
    return spark_cluster


def _csv(part: int) -> str:
    lines = ["id,email,amount,day"]
    for i in range(part * ROWS, (part + 1) * ROWS):
        email = "" if i % 97 == 0 else f"user{i}@example.com"
        lines.append(f"{i},{email},{(i % 50) - 1}.25,2024-01-{(i % 28) + 1:02d}")
    return "\n".join(lines) + "\n"


def _project(root: Path, master: str, pipelines: dict[str, tuple[str, str]], body: str) -> Path:
    """A project over the same two CSV files: one pipeline per entry of `pipelines`
    (id -> (destination, load)), each loading its own table `t_<id>` with `body` after it."""
    (root / "data").mkdir(parents=True)
    for part in range(2):
        (root / "data" / f"part-{part}.csv").write_text(_csv(part))
    columns = '{ id = "bigint", email = "string", amount = "double", day = "date" }'
    blocks = [
        f"""
[[pipeline]]
id = "{pipeline}"
source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {columns} }} }}
tables = [{{ name = "t", target = "t_{pipeline}" }}]
destination = {destination}
load = {load}
{body}
"""
        for pipeline, (destination, load) in pipelines.items()
    ]
    (root / "hakiri.toml").write_text(
        f"""
[project]
name = "cluster"

[spark]
master = "{master}"
conf = {{ {StandaloneCluster.executor_conf} }}

[connections.wh]
type = "postgres"
url = ""
"""
        + "".join(blocks)
    )
    return root


def _apply_on(cluster: StandaloneCluster, master: str, root: Path, pg_url: str) -> None:
    """`hakiri apply` on the cluster in a new process (it must show up there as one more app);
    the local reference in this process, on the suite's warm session (no JVM to start)."""
    if master != cluster.url:
        _apply_here(root, pg_url)
        return
    before = len(cluster.finished_apps())
    _apply(root, pg_url)
    assert len(cluster.finished_apps()) == before + 1  # it ran on the cluster, not locally


def _apply_here(root: Path, pg_url: str) -> None:
    text = (root / "hakiri.toml").read_text().replace('url = ""', f'url = "{pg_url}"', 1)
    (root / "hakiri.toml").write_text(text)
    done = CliRunner().invoke(
        app,
        ["apply", "--project", str(root)],
        env={"HAKIRI_COPY_MIN_RUN_BYTES": "0"},
        catch_exceptions=False,
    )
    assert done.exit_code == 0, done.stdout + done.stderr


def _apply(root: Path, pg_url: str) -> subprocess.CompletedProcess[str]:
    text = (root / "hakiri.toml").read_text().replace('url = ""', f'url = "{pg_url}"', 1)
    (root / "hakiri.toml").write_text(text)
    env = {
        **os.environ,
        **QUICK_JVM_ENV,  # the driver in the command
        "HAKIRI_COPY_MIN_RUN_BYTES": "0",
        "HAKIRI_SPARK_REMOTE": "in-process",
    }
    done = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def _rows(pg_url: str, schema: str, table: str, order: str) -> list[tuple[Any, ...]]:
    with psycopg.connect(pg_url) as conn:
        return conn.execute(
            sql.SQL("SELECT * FROM {} ORDER BY {}").format(
                sql.Identifier(schema, table), sql.SQL(order)
            )
        ).fetchall()


# What differs on a cluster is where the driver and the executors run, which every mode
# shares; each mode's own semantics are the conformance suite's, on the local engine
# (tests/integration/destinations). So one mode per destination: upsert. Into the context
# store its first batch creates the table by Delta's writer (the path of append, truncate
# and blue_green), its next ones MERGE by key, both run by the executors. Into PostgreSQL
# the executors only stage (COPY, and the rules' quarantine); the mode is SQL PostgreSQL
# runs wherever the driver is.
UPSERT = '{ mode = "upsert", upsert_key = ["id"] }'


def _quarantine(pg_url: str, schema: str, table: str) -> list[tuple[Any, ...]]:
    """(rule_id, on_fail, dropped, row) of every record, in a fixed order."""
    with psycopg.connect(pg_url) as conn:
        return conn.execute(
            sql.SQL(
                "SELECT rule_id, on_fail, dropped, row FROM {} ORDER BY rule_id, row::text"
            ).format(sql.Identifier(schema, table))
        ).fetchall()


def _delta_rows(location: Path, columns: tuple[str, ...] | None = None) -> list[Any]:
    table = DeltaTable(str(location)).to_pyarrow_table(columns=list(columns) if columns else None)
    return sorted(table.to_pylist(), key=lambda r: [str(r[k]) for k in sorted(r)])


def test_the_loads_on_the_cluster_equal_the_local_ones_into_both_destinations(
    cluster: StandaloneCluster,
    tmp_path: Path,
    pg_url: str,
    pg_conn: psycopg.Connection,
    spark: object,
) -> None:
    """One apply per side (one Spark application on the cluster) over three files, a batch
    each: the first creates each table, the next ones MERGE into it, the third file's first
    half changing existing keys and its second half adding new ones. Both tables, their
    quarantines and the Delta table's history equal the local run's."""
    tables: dict[str, tuple[Any, ...]] = {}
    for where, master in (("local", "local[2]"), ("cluster", cluster.url)):
        schema = f"{tmp_path.name[-20:]}_{where}".lower().replace("-", "_")
        pg_conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
        postgres = (
            f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
        )
        pipelines = {"ctx": ('{ connector = "context" }', UPSERT), "pg": (postgres, UPSERT)}
        root = _project(tmp_path / where, master, pipelines, RULES)
        changed = _csv(2).replace("@example.com", "@changed.example").splitlines()
        shifted = [changed[0]] + [
            f"{int(line.split(',')[0]) - ROWS // 2},{line.split(',', 1)[1]}" for line in changed[1:]
        ]
        (root / "data" / "part-2.csv").write_text("\n".join(shifted) + "\n")
        _apply_on(cluster, master, root, pg_url)  # one apply, one Spark application
        store = root / ".hakiri" / "context"
        tables[where] = (
            _delta_rows(store / "t_ctx"),
            _delta_rows(store / "t_ctx_quarantine", ("rule_id", "on_fail", "dropped", "row")),
            [h["operation"] for h in DeltaTable(str(store / "t_ctx")).history()],
            _rows(pg_url, schema, "t_pg", "id"),
            _quarantine(pg_url, schema, "t_pg_quarantine"),
        )
        pg_conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))

    delta, delta_quarantine, history, rows, quarantine = tables["local"]
    first = 2 * ROWS - len(range(0, 2 * ROWS, 97))  # rows without an email are skipped
    third = [i - ROWS // 2 for i in range(2 * ROWS, 3 * ROWS) if i % 97]
    loaded = {i for i in range(2 * ROWS) if i % 97}
    assert len(delta) == len(rows) == first + len(set(third) - loaded)
    assert history[0] == "MERGE" and history[-1] == "WRITE"  # newest first
    assert delta_quarantine and quarantine  # quarantine records
    assert tables["cluster"] == tables["local"]


def test_a_worker_killed_mid_load_is_retried_and_the_target_is_exact(
    cluster: StandaloneCluster, tmp_path: Path, pg_url: str, pg_conn: psycopg.Connection
) -> None:
    import signal
    import time

    schema = f"{tmp_path.name[-20:]}_fault".lower().replace("-", "_")
    pg_conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(schema)))
    root = tmp_path / "fault"
    (root / "data").mkdir(parents=True)
    rows = 400_000
    lines = ["id,email,amount,day"] + [
        f"{i},user{i}@example.com,{i % 1000}.5,2024-02-{(i % 28) + 1:02d}" for i in range(rows)
    ]
    (root / "data" / "big.csv").write_text("\n".join(lines) + "\n")
    destination = (
        f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
    )
    columns = '{ id = "bigint", email = "string", amount = "double", day = "date" }'
    (root / "hakiri.toml").write_text(
        f"""
[project]
name = "fault"

[spark]
master = "{cluster.url}"
# Many small partitions, so both workers hold tasks when one of them dies.
conf = {{ "spark.sql.files.maxPartitionBytes" = "1048576", {cluster.executor_conf} }}

[connections.wh]
type = "postgres"
url = "{pg_url}"

[[pipeline]]
id = "p"
source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {columns} }} }}
tables = ["t"]
destination = {destination}
load = {{ mode = "truncate" }}
"""
    )
    env = {
        **os.environ,
        **QUICK_JVM_ENV,  # the driver in the command
        "HAKIRI_COPY_MIN_RUN_BYTES": "0",
        "HAKIRI_SPARK_REMOTE": "in-process",
    }
    apply = subprocess.Popen(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env=env,
    )
    staging = "SELECT count(*) FROM pg_tables WHERE schemaname = %s AND tablename LIKE '\\_hakiri\\_stg%%'"
    victim = cluster.workers[0]
    try:
        deadline = time.monotonic() + 300
        while pg_conn.execute(staging, (schema,)).fetchone() == (0,):  # type: ignore[comparison-overlap]
            assert apply.poll() is None, apply.stdout.read() if apply.stdout else ""
            assert time.monotonic() < deadline, "the load never started staging"
            time.sleep(0.1)
        time.sleep(1.0)  # tasks are writing on both workers
        assert apply.poll() is None  # mid-load
        os.kill(victim.pid, signal.SIGKILL)
        output, _ = apply.communicate(timeout=600)
    finally:
        if apply.poll() is None:
            apply.kill()
        victim.wait(timeout=30)
        cluster.workers[0] = cluster.start_worker(0)

    assert apply.returncode == 0, output
    count, total = pg_conn.execute(
        sql.SQL("SELECT count(*), sum(id) FROM {}").format(sql.Identifier(schema, "t"))
    ).fetchone()  # type: ignore[misc]
    assert (count, total) == (rows, rows * (rows - 1) // 2)  # every row once: no loss, no double
    assert pg_conn.execute(staging, (schema,)).fetchone() == (0,)
    pg_conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(schema)))
