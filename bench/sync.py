"""Benchmark: `hakiri sync` of a context store to an S3-compatible bucket, beside the floor.

Run by hand (about a minute on 2 cores):

    .venv/bin/python bench/sync.py [--tables 4] [--versions 50] [--rows 20000] [--repeat 3]

The store: TABLES Delta tables written with delta-rs, each VERSIONS appends of ROWS rows
(one parquet file per version). The bucket: the test suite's s3proxy 4.1.0 (filesystem
backend, on loopback), started here and stopped at the end. Each path runs REPEAT times
into a fresh bucket, whole process timed (interpreter start included), median reported:

- floor: one Python process that uploads every file of the store with obstore, 8 at a
  time, in no particular order (what any copy tool does; no reader safety, no listing).
- hakiri-sync: `hakiri sync`, first push of the whole store (lists, data in parallel, then
  the commits one at a time in version order, If-None-Match on each).
- hakiri-sync-one-version: after one more append to every table, `hakiri sync` again (the
  incremental case: a listing and a history check per table, two files per table moved).
- hakiri-sync-noop: `hakiri sync` with nothing to push.
- hakiri-pull: `hakiri sync pull --into` an empty directory.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from tests.support.s3_server import S3Server  # noqa: E402

HAKIRI = [sys.executable, "-m", "hakiri.cli.main"]

FLOOR = """
import sys
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
import obstore
from obstore.store import S3Store
endpoint, key, secret, bucket, root = sys.argv[1:6]
store = S3Store(bucket, prefix="store", endpoint=endpoint, region="us-east-1",
                access_key_id=key, secret_access_key=secret, client_options={"allow_http": True})
base = Path(root)
files = [p for p in base.rglob("*") if p.is_file() and not p.name.startswith(".")]
with ThreadPoolExecutor(8) as pool:
    list(pool.map(lambda p: obstore.put(store, p.relative_to(base).as_posix(), p), files))
"""


def _store(root: Path, tables: int, versions: int, rows: int) -> int:
    import pyarrow as pa
    from deltalake import write_deltalake

    for t in range(tables):
        for v in range(versions):
            start = v * rows
            batch = pa.table(
                {
                    "id": pa.array(range(start, start + rows), pa.int64()),
                    "v": pa.array([v] * rows, pa.int32()),
                    "note": pa.array([f"row {i} of table {t}" for i in range(rows)]),
                }
            )
            write_deltalake(str(root / f"t{t}"), batch, mode="append")
    return sum(p.stat().st_size for p in root.rglob("*") if p.is_file())


def _project(root: Path, bucket: str, server: S3Server) -> None:
    (root / "hakiri.toml").write_text(
        f'[project]\nname = "bench"\n\n[sync]\nbucket = "s3://{bucket}/store"\n'
        f'endpoint = "{server.endpoint}"\n'
    )


def _timed(argv: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    done = subprocess.run(argv, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise SystemExit(f"{' '.join(argv[:6])} failed:\n{done.stderr[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--tables", type=int, default=4)
    parser.add_argument("--versions", type=int, default=50)
    parser.add_argument("--rows", type=int, default=20000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args()

    server = S3Server.start()
    work = Path(tempfile.mkdtemp(prefix="hakiri-bench-sync-"))
    try:
        project = work / "project"
        store = project / ".hakiri" / "context"
        store.mkdir(parents=True)
        size = _store(store, args.tables, args.versions, args.rows)
        files = sum(1 for p in store.rglob("*") if p.is_file())
        env = {**os.environ, **server.env()}
        times: dict[str, list[float]] = {}
        for _ in range(args.repeat):
            bucket = f"b{uuid.uuid4().hex[:8]}"
            server.create_bucket(bucket)
            times.setdefault("floor", []).append(
                _timed(
                    [
                        sys.executable,
                        "-c",
                        FLOOR,
                        server.endpoint,
                        server.access_key,
                        server.secret_key,
                        bucket,
                        str(store),
                    ],
                    env,
                )
            )
            bucket = f"b{uuid.uuid4().hex[:8]}"
            server.create_bucket(bucket)
            _project(project, bucket, server)
            times.setdefault("hakiri-sync", []).append(
                _timed([*HAKIRI, "sync", "--project", str(project)], env)
            )
            times.setdefault("hakiri-sync-noop", []).append(
                _timed([*HAKIRI, "sync", "--project", str(project)], env)
            )
            pulled = work / f"pulled-{bucket}"
            times.setdefault("hakiri-pull", []).append(
                _timed(
                    [*HAKIRI, "sync", "pull", "--into", str(pulled), "--project", str(project)], env
                )
            )
            shutil.rmtree(pulled)
        # the incremental case, once per repetition on the last bucket
        for r in range(args.repeat):
            _append_one(store, args.tables, args.versions + r, args.rows)
            times.setdefault("hakiri-sync-one-version", []).append(
                _timed([*HAKIRI, "sync", "--project", str(project)], env)
            )
        print(
            f"store: {args.tables} tables x {args.versions} versions, {files} files, "
            f"{size / 1e6:.1f} MB; s3proxy {server.endpoint}; median of {args.repeat}"
        )
        floor = statistics.median(times["floor"])
        for name, values in times.items():
            median = statistics.median(values)
            print(
                f"  {name:26s} {median:6.2f} s  ({median / floor:4.2f}x floor)  "
                f"runs: {', '.join(f'{v:.2f}' for v in values)}"
            )
    finally:
        server.stop()
        shutil.rmtree(work, ignore_errors=True)


def _append_one(store: Path, tables: int, version: int, rows: int) -> None:
    import pyarrow as pa
    from deltalake import write_deltalake

    for t in range(tables):
        batch = pa.table(
            {
                "id": pa.array(range(rows), pa.int64()),
                "v": pa.array([version] * rows, pa.int32()),
                "note": pa.array([f"row {i}" for i in range(rows)]),
            }
        )
        write_deltalake(str(store / f"t{t}"), batch, mode="append")


if __name__ == "__main__":
    main()
