"""Benchmark: `hakiri plan` over a project of 100 pipelines with a warm catalog, as a whole process.

Target: under 2 s wall time on the reference machine (2 cores). Run by hand:

    .venv/bin/python bench/plan_latency.py [--pipelines 100] [--runs 7] [--postgres URL]

Without --postgres every pipeline reads a small CSV and lands in the context
store; with it, every pipeline targets a table in that PostgreSQL database (the
tables are created first, so plan inspects real targets). The catalog is warm:
each pipeline is recorded as applied and its files as committed, so the plan is
all no-ops, which still inspects every source file and target.
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from hakiri.catalog.records import NewBatch, Phase
from hakiri.catalog.store import Catalog
from hakiri.catalog.url import catalog_url
from hakiri.sources.files.inspect import hash_file
from hakiri.spec.fingerprint import normalized_spec, spec_hash
from hakiri.spec.loader import load_project


def make_project(root: Path, pipelines: int, postgres: str | None) -> None:
    lines = ['[project]\nname = "bench"\n']
    if postgres:
        lines.append(f'[connections.wh]\ntype = "postgres"\nurl = "{postgres}"\n')
    for i in range(pipelines):
        data = root / "data" / f"p{i:03d}"
        data.mkdir(parents=True)
        (data / "part-0.csv").write_text(
            "id,name,amount\n" + "".join(f"{n},name{n},{n * 1.5}\n" for n in range(200))
        )
        destination = (
            'destination = { connector = "postgres", config = { connection = "wh" } }\n'
            if postgres
            else ""
        )
        lines.append(
            f'[[pipeline]]\nid = "p{i:03d}"\n'
            f'source = {{ connector = "files", config = {{ path = "data/p{i:03d}/*.csv" }} }}\n'
            f'tables = ["t{i:03d}"]\n{destination}load = {{ mode = "upsert", upsert_key = ["id"] }}\n'
        )
    (root / "hakiri.toml").write_text("\n".join(lines))


def warm_catalog(root: Path, postgres: str | None) -> None:
    """Leave what 100 applies would: applied specs, committed files, and the target tables."""
    project = load_project(root)
    with Catalog.open(catalog_url(root, None, {}), migrate=True) as catalog:
        for spec in project.pipelines.values():
            catalog.record_applied(spec.id, normalized_spec(spec), spec_hash(spec), Phase.STREAMING)
            table = spec.table_specs()[0].name
            path = root / "data" / spec.id / "part-0.csv"
            relative = path.relative_to(root).as_posix()
            digest = hash_file(path)
            catalog.add_batches(spec.id, [NewBatch(digest, table, "file", relative, digest)])
            claimed = catalog.claim_batch(spec.id, "bench", 60)
            assert claimed is not None
            catalog.mark_committed(spec.id, claimed.batch_id, "bench", rows=200)
    if not postgres:
        import pyarrow as pa
        from deltalake import write_deltalake

        rows = pa.table(
            {
                "id": list(range(200)),
                "name": [f"name{n}" for n in range(200)],
                "amount": [n * 1.5 for n in range(200)],
            }
        )
        for spec in project.pipelines.values():
            write_deltalake(str(root / ".hakiri" / "context" / spec.table_specs()[0].name), rows)
    else:
        import psycopg
        from psycopg import sql

        with psycopg.connect(postgres, autocommit=True) as conn:
            for spec in project.pipelines.values():
                table = sql.Identifier("public", spec.table_specs()[0].name)
                conn.execute(sql.SQL("DROP TABLE IF EXISTS {}").format(table))
                conn.execute(
                    sql.SQL(
                        "CREATE TABLE {} (id bigint PRIMARY KEY, name text, amount double precision)"
                    ).format(table)
                )


def time_plan(root: Path, runs: int) -> list[float]:
    hakiri = shutil.which("hakiri", path=str(Path(sys.executable).parent)) or "hakiri"
    timings = []
    for _ in range(runs):
        started = time.perf_counter()
        result = subprocess.run(
            [hakiri, "plan", "--json", "--project", str(root)], capture_output=True, text=True
        )
        timings.append(time.perf_counter() - started)
        if result.returncode != 0:
            raise SystemExit(f"plan failed ({result.returncode}): {result.stderr.strip()[:500]}")
    summary = json.loads(result.stdout)["summary"]
    assert summary["no_op"] == len(load_project(root).pipelines), summary
    return timings


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=100)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument(
        "--postgres", help="libpq URL: target PostgreSQL tables instead of the context store"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="hakiri-bench-") as tmp:
        root = Path(tmp)
        make_project(root, args.pipelines, args.postgres)
        warm_catalog(root, args.postgres)
        timings = time_plan(root, args.runs)
    kind = "postgres targets" if args.postgres else "context targets"
    print(
        f"hakiri plan, {args.pipelines} pipelines ({kind}), warm catalog, {args.runs} runs: "
        f"min {min(timings):.2f}s  median {statistics.median(timings):.2f}s  max {max(timings):.2f}s"
    )


if __name__ == "__main__":
    main()
