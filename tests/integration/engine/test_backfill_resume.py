"""A chunked backfill survives SIGKILL, and two applies at once never load a chunk twice.

The applies run as real `hakiri` processes. Loading is `append` on a numeric cursor, so
a chunk read twice would show up as duplicate rows in the target.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import psycopg
import pytest
from psycopg import sql

from hakiri.catalog.records import BatchStatus
from hakiri.catalog.store import Catalog
from hakiri.errors import CatalogError
from tests.support.engines import QUICK_JVM
from tests.support.spark_cluster import StandaloneCluster

ROWS, WINDOW = 20_000, 1_000  # 20 chunks


def _project(
    root: Path,
    pg_url: str,
    schema: str,
    catalog: str | None = None,
    master: str = "local[1]",
    parallelism: int = 1,
) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    catalog_line = f'[catalog]\nurl = "{catalog}"\n' if catalog else ""
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "resume"

        [spark]
        master = "{master}"
        conf = {{ "spark.driver.extraJavaOptions" = "{QUICK_JVM}", {StandaloneCluster.executor_conf} }}

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        tables = [{{ name = "src", target = "dst", incremental = "id" }}]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
        load = {{ mode = "append" }}

        [pipeline.backfill]
        window = {WINDOW}
        parallelism = {parallelism}
        """)
        + catalog_line
    )
    with psycopg.connect(pg_url, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE TABLE {} (id bigint PRIMARY KEY, label text)").format(
                sql.Identifier(schema, "src")
            )
        )
        conn.execute(
            sql.SQL("INSERT INTO {} SELECT g, 'row ' || g FROM generate_series(1, %s) g").format(
                sql.Identifier(schema, "src")
            ),
            [ROWS],
        )
    return root


def _start(root: Path, *args: str) -> subprocess.Popen[str]:
    env = {k: v for k, v in os.environ.items() if k != "HAKIRI_CRASH_AT"}
    command = [sys.executable, "-m", "hakiri.cli.main", "apply", *args, "--project", str(root)]
    return subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )


def _target_is_exact(pg_url: str, schema: str) -> None:
    with psycopg.connect(pg_url) as conn:
        counts = conn.execute(
            sql.SQL("SELECT count(*), count(DISTINCT id), min(id), max(id) FROM {}").format(
                sql.Identifier(schema, "dst")
            )
        ).fetchone()
        differ = conn.execute(
            sql.SQL(
                "SELECT count(*) FROM ((SELECT * FROM {s} EXCEPT SELECT * FROM {d}) "
                "UNION ALL (SELECT * FROM {d} EXCEPT SELECT * FROM {s})) x"
            ).format(s=sql.Identifier(schema, "src"), d=sql.Identifier(schema, "dst"))
        ).fetchone()
    assert counts == (ROWS, ROWS, 1, ROWS)
    assert differ == (0,)


def _chunks(catalog_url: str) -> dict[str, tuple]:
    with Catalog.open(catalog_url, migrate=False) as catalog:
        return {
            b.batch_id: (b.status, b.run_id, b.attempt, b.started_at, b.committed_at)
            for b in catalog.batches("p")
        }


@pytest.mark.parametrize(
    "on",
    [
        "local",
        pytest.param(
            "cluster",
            marks=pytest.mark.spark_only(
                "a standalone cluster runs Apache Spark's executors: on Sail the apply would "
                "run in its own process, as the local case does, beside an idle cluster"
            ),
        ),
    ],
)
def test_a_backfill_killed_at_chunk_k_resumes_at_the_next_pending_chunk(
    tmp_path: Path, pg_url: str, pg_schema: str, on: str, request: pytest.FixtureRequest
) -> None:
    # On the cluster (a standalone master, two workers) the killed process is the driver, and
    # two chunks load at once.
    master, parallelism = "local[1]", 1
    if on == "cluster":
        master, parallelism = request.getfixturevalue("spark_cluster").url, 2
    root = _project(tmp_path / "project", pg_url, pg_schema, master=master, parallelism=parallelism)
    catalog_url = f"sqlite:///{root / '.hakiri' / 'state.sqlite'}"
    victim = _start(root)
    deadline = time.monotonic() + 240
    try:
        while time.monotonic() < deadline and victim.poll() is None:
            if (root / ".hakiri" / "state.sqlite").exists():
                try:
                    chunks = _chunks(catalog_url)
                except CatalogError:  # created but not migrated yet
                    chunks = {}
                done = {k: v for k, v in chunks.items() if v[0] is BatchStatus.COMMITTED}
                if len(done) >= 5:
                    victim.send_signal(signal.SIGKILL)
                    break
            time.sleep(0.05)
    finally:
        victim.wait(timeout=60)
    assert victim.returncode == -signal.SIGKILL, victim.stderr.read() if victim.stderr else ""

    # What the catalog held when the process died (k-1 done, chunk k possibly in flight).
    before = _chunks(catalog_url)
    done_before = {k: v for k, v in before.items() if v[0] is BatchStatus.COMMITTED}
    assert len(before) == ROWS // WINDOW and 5 <= len(done_before) < len(before)

    resumed = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert resumed.returncode == 0, resumed.stderr
    _target_is_exact(pg_url, pg_schema)

    after = _chunks(catalog_url)
    assert all(v[0] is BatchStatus.COMMITTED for v in after.values())
    # Chunks committed before the kill were not read again: same run, one attempt, claimed
    # and committed when they were.
    for batch_id, (_, run_id, attempt, started_at, committed_at) in done_before.items():
        assert after[batch_id][1:] == (run_id, attempt, started_at, committed_at)
        assert attempt == 1
    # The rest loaded in the resumed run, except the chunk in flight when the kill landed
    # between the destination's commit and the catalog's: the ledger shows it committed by
    # the killed run, and the resume records it so instead of loading it again.
    killed = next(iter(done_before.values()))[1]
    rest = [v[1] for k, v in after.items() if k not in done_before]
    resumed_runs = set(rest) - {killed}
    assert len(resumed_runs) == 1 and rest.count(killed) <= 1, rest


def test_two_applies_at_once_on_a_postgres_catalog_load_each_chunk_once(
    tmp_path: Path, pg_url: str, pg_schema: str, pg_catalog: str
) -> None:
    root = _project(tmp_path / "project", pg_url, pg_schema, catalog=pg_catalog)
    first, second = _start(root, "--lease-timeout", "300"), _start(root, "--lease-timeout", "300")
    results = [p.communicate(timeout=300) for p in (first, second)]
    assert (first.returncode, second.returncode) == (0, 0), results
    _target_is_exact(pg_url, pg_schema)

    chunks = _chunks(pg_catalog.replace("postgresql://", "postgresql+psycopg://", 1))
    assert len(chunks) == ROWS // WINDOW
    assert all(status is BatchStatus.COMMITTED for status, *_ in chunks.values())
    assert all(attempt == 1 for _, _, attempt, _, _ in chunks.values())
    # One process loaded the backfill; the other waited for the pipeline and found it done.
    assert len({run_id for _, run_id, _, _, _ in chunks.values()}) == 1
    assert sum("no changes" in out for out, _ in results) == 1
