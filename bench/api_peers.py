"""hakiri's `github` pipeline beside dlt's `rest_api` source, one sitting, one local server.

    .venv/bin/python bench/api_peers.py [--issues 10002] [--comments 30000] [--repos 3]
        [--repeat 3] [--latency 0] [--paths hakiri-spark,hakiri-sail,dlt]

Both read the same GitHub-shaped API (tests/support/api_server.py: the suite's server,
on loopback, a seeded dataset) into the same throwaway PostgreSQL (the suite's, fsync
off), every record of every repository's issues (pull requests included) and issue
comments, upserted by `id`:

- hakiri: `python -m hakiri.cli.main apply` on a fresh project whose one pipeline is
  the specification's github-issues (tables issues, pull_requests, comments; one
  engine task per repository per table), on Apache Spark (hakiri-spark: the local
  Spark Connect server a first command starts, then shared) or Sail (hakiri-sail).
- dlt: dlt 1.31 `rest_api_source` (from bench/.peers-venv, see peers-requirements.txt):
  one resource per repository and table, header_link paginator, bearer token,
  write_disposition merge on `id`, `parallelized` resources, into postgres.

Each run is a whole process timed from start to exit, into an emptied target; the
median of --repeat runs is reported with the rows loaded (checked against the
dataset: every id once) and the requests the server counted. --latency adds a delay
to every response (seconds), as a remote API has.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import psycopg

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tests.support.api_server import ApiServer  # noqa: E402
from tests.support.github_dataset import GitHubDataset  # noqa: E402
from tests.support.postgres import TestPostgres  # noqa: E402

TOKEN = "ghp_bench0123456789"
PEERS = REPO / "bench" / ".peers-venv" / "bin" / "python"

DLT_PROGRAM = """
import json, sys
import dlt
from dlt.sources.rest_api import rest_api_source

url, token, pg_url, repos = sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])
resources = []
for repo in repos:
    slug = repo.replace("/", "_").replace("-", "_")
    resources.append({
        "name": f"issues_{slug}", "table_name": "issues",
        "endpoint": {"path": f"repos/{repo}/issues",
                     "params": {"state": "all", "per_page": 100, "sort": "updated",
                                "direction": "asc"}},
    })
    resources.append({
        "name": f"comments_{slug}", "table_name": "comments",
        "endpoint": {"path": f"repos/{repo}/issues/comments",
                     "params": {"per_page": 100, "sort": "updated", "direction": "asc"}},
    })
source = rest_api_source({
    "client": {"base_url": url, "auth": {"type": "bearer", "token": token},
               "paginator": "header_link"},
    "resource_defaults": {"primary_key": "id", "write_disposition": "merge",
                          "parallelized": True},
    "resources": resources,
})
pipeline = dlt.pipeline(pipeline_name="bench_api", destination=dlt.destinations.postgres(pg_url),
                        dataset_name="bench_dlt_api", pipelines_dir=sys.argv[5])
pipeline.run(source)
"""


def _hakiri_project(root: Path, api: ApiServer, pg_url: str, engine: str) -> None:
    repos = ", ".join(f'"{n}"' for n in sorted(api.dataset.repos))
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "bench_api"

        [spark]
        engine = "{engine}"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "github-issues"
        source = {{ connector = "github", config = {{ repos = [{repos}], base_url = "{api.url}" }} }}
        tables = ["issues", "pull_requests", "comments"]
        incremental = "updated_at"
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "bench_hakiri_api" }} }}
        load = {{ mode = "upsert", upsert_key = ["id"] }}
        """)
    )


def _reset(pg_url: str) -> None:
    with psycopg.connect(pg_url, autocommit=True) as conn:
        for schema in ("bench_hakiri_api", "bench_dlt_api", "bench_dlt_api_staging", "_hakiri"):
            conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
        conn.execute("CREATE SCHEMA bench_hakiri_api")


def _ids(pg_url: str, schema: str, tables: list[str]) -> tuple[int, int]:
    """(rows, distinct ids) over `tables` of `schema`."""
    with psycopg.connect(pg_url) as conn:
        union = " UNION ALL ".join(f"SELECT id FROM {schema}.{t}" for t in tables)
        row = conn.execute(f"SELECT count(*), count(DISTINCT id) FROM ({union}) x").fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


def _run_hakiri(api: ApiServer, pg_url: str, engine: str) -> float:
    with tempfile.TemporaryDirectory(prefix="bench-api-") as directory:
        root = Path(directory)
        _hakiri_project(root, api, pg_url, engine)
        env = {**os.environ, "GITHUB_TOKEN": TOKEN, "PYTHONPATH": str(REPO / "src")}
        started = time.perf_counter()
        done = subprocess.run(
            [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
            env=env,
            capture_output=True,
            text=True,
        )
        elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"hakiri failed:\n{done.stdout}\n{done.stderr}")
    return elapsed


def _run_dlt(api: ApiServer, pg_url: str) -> float:
    if not PEERS.exists():
        raise SystemExit("bench/.peers-venv is missing: run bench/load_peers.py once to make it")
    dlt_url = pg_url.replace("postgres@", "postgres:bench@") if "@" in pg_url else pg_url
    repos = json.dumps(sorted(api.dataset.repos))
    with tempfile.TemporaryDirectory(prefix="bench-dlt-") as directory:
        started = time.perf_counter()
        done = subprocess.run(
            [str(PEERS), "-c", DLT_PROGRAM, api.url, TOKEN, dlt_url, repos, directory],
            capture_output=True,
            text=True,
            env={**os.environ, "RUNTIME__LOG_LEVEL": "WARNING"},
        )
        elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"dlt failed:\n{done.stdout}\n{done.stderr}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--issues", type=int, default=10_002)
    parser.add_argument("--comments", type=int, default=30_000)
    parser.add_argument("--repos", type=int, default=3)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--latency", type=float, default=0.0)
    parser.add_argument(
        "--paths", default="hakiri-spark,hakiri-sail,dlt", help="hakiri-<engine> and dlt"
    )
    args = parser.parse_args()
    paths = args.paths.split(",")

    dataset = GitHubDataset.generate(repos=args.repos, issues=args.issues, comments=args.comments)
    expected = dataset.issue_count + dataset.comment_count
    server = TestPostgres()
    server.start()
    results: dict[str, list[tuple[float, int]]] = {p: [] for p in paths}
    try:
        pg_url = server.url
        with ApiServer(dataset, token=TOKEN) as api:
            for _ in range(args.repeat):
                for path in paths:
                    _reset(pg_url)
                    api.clear_requests()
                    if args.latency:
                        api.slow(args.latency, times=1_000_000)
                    if path.startswith("hakiri-"):
                        seconds = _run_hakiri(api, pg_url, path.removeprefix("hakiri-"))
                        rows, ids = _ids(
                            pg_url, "bench_hakiri_api", ["issues", "pull_requests", "comments"]
                        )
                    else:
                        seconds = _run_dlt(api, pg_url)
                        rows, ids = _ids(pg_url, "bench_dlt_api", ["issues", "comments"])
                    if rows != expected or ids != expected:
                        raise SystemExit(f"{path}: {rows} rows, {ids} ids; expected {expected}")
                    results[path].append((seconds, len(api.requests)))
                    print(f"{path}: {seconds:.2f} s, {len(api.requests)} requests", flush=True)
    finally:
        server.stop()
    print(f"\n{expected:,} records ({args.repos} repositories), median of {args.repeat}:")
    for path, runs in results.items():
        seconds = statistics.median(s for s, _ in runs)
        requests = runs[0][1]
        print(
            f"  {path:7} {seconds:7.2f} s  {expected / seconds:9,.0f} rows/s  {requests} requests"
        )


if __name__ == "__main__":
    main()
