"""Benchmark: one small load started by `hakiri apply` (cron) against a trigger to `hakiri serve`.

Needs GNU time (/usr/bin/time, Debian package `time`) for each run's peak RSS.

Run by hand (about two minutes on the reference machine):

    .venv/bin/python bench/serve.py [--runs 10] [--rows 10000] [--pg-url URL] [--modes ...]

A project with one files pipeline (CSV, upsert on `id`, into PostgreSQL). Each
measured run first writes one new CSV file of `--rows` rows, so every run loads
exactly that file.

- apply: `hakiri apply` as a new process each time, as cron starts it, with its Spark
  driver in the command (`HAKIRI_SPARK_REMOTE=in-process`). Wall time from start to
  exit, JVM start-up included.
- apply, local server warm: the same with `HAKIRI_SPARK_REMOTE=local`; the warm-up run
  starts hakiri's local Spark Connect server and every measured run finds it running.
- apply, local server cold: the same, with the server stopped (untimed, `hakiri engine
  stop`) before each run, so each run starts it.
- apply on Sail: `HAKIRI_SPARK_ENGINE=sail`, Sail's server started inside the command.
  Each apply's peak RSS (its wait4 rusage) is reported too.
- serve: one `hakiri serve` process, started once (its start-up, until /readyz
  answers 200, is reported on its own). Each run is `POST /v1/pipelines/p/runs`;
  the time is from the POST until the run record shows it ended, read through
  `GET /v1/pipelines/p/runs` every 50 ms. Also timed: `GET /v1/pipelines/p`.

Both load into the same target; each mode gets a fresh project directory and
catalog. The first run of each mode is a warm-up and is not reported.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

import httpx
from tests.support.postgres import TestPostgres
from tests.support.serve import TOKEN, ServeProcess


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rows", type=int, default=10_000)
    parser.add_argument("--pg-url", help="an existing PostgreSQL (default: start a throwaway one)")
    parser.add_argument(
        "--modes",
        default="driver,warm,cold,sail,serve",
        help="which to time, comma-separated: driver, warm, cold, sail (HAKIRI_SPARK_ENGINE=sail), serve",
    )
    args = parser.parse_args()
    modes = {m.strip() for m in args.modes.split(",") if m.strip()}
    server = None if args.pg_url else TestPostgres().start()
    url = args.pg_url or server.url  # type: ignore[union-attr]
    labels = {
        "driver": "hakiri apply (new process, driver in it)",
        "warm": "  on the local server, warm",
        "cold": "  on the local server, cold",
        "sail": "  on Sail (in the process)",
    }
    results: dict[str, tuple[list[float], float]] = {}
    served: list[float] = []
    status: list[float] = []
    started = 0.0
    try:
        for mode in labels:
            if mode in modes:
                with tempfile.TemporaryDirectory() as tmp:
                    results[mode] = bench_apply(
                        Path(tmp) / mode, url, args.runs, args.rows, engine=mode
                    )
        if "serve" in modes:
            with tempfile.TemporaryDirectory() as tmp:
                started, served, status = bench_serve(
                    Path(tmp) / "serve", url, args.runs, args.rows
                )
    finally:
        if server is not None:
            server.stop()
    print(f"{args.runs} runs of {args.rows} rows each (after one warm-up run per mode)")
    for mode, (times, peak) in results.items():
        report(labels[mode], times)
        print(f"    peak RSS of the apply process: {peak:.0f} MiB")
    if "serve" in modes:
        report("trigger to hakiri serve", served)
        report("GET /v1/pipelines/p", status, unit="ms", scale=1000)
        print(f"serve start-up until /readyz 200: {started:.1f} s")


def project(root: Path, url: str) -> None:
    root.mkdir(parents=True)
    (root / "hakiri.toml").write_text(
        textwrap.dedent(f"""
        [project]
        name = "bench-serve"

        [spark]
        master = "local[2]"
        conf = {{ "spark.ui.enabled" = "false" }}

        [connections.wh]
        type = "postgres"
        url = "{url}"

        [[pipeline]]
        id = "p"
        source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", name = "string", amount = "double" }} }} }}
        tables = [{{ name = "t", target = "bench_serve_{root.name}" }}]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "public" }} }}
        load = {{ mode = "upsert", upsert_key = ["id"] }}
        """)
    )


def write_file(root: Path, index: int, rows: int) -> None:
    data = root / "data"
    data.mkdir(exist_ok=True)
    start = index * rows
    lines = "".join(f"{i},name {i},{i * 0.5}\n" for i in range(start, start + rows))
    (data / f"part-{index:04d}.csv").write_text("id,name,amount\n" + lines)


def bench_apply(
    root: Path, url: str, runs: int, rows: int, engine: str = "driver"
) -> tuple[list[float], float]:
    """`engine`: "driver" (a JVM in the command), "warm" or "cold" (the local server), "sail".
    The times, and the largest peak RSS of one apply process (MiB, by GNU time; a warm
    server's JVM is not the apply's child and not in it)."""
    project(root, url)
    command = [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)]
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("HAKIRI_SPARK_REMOTE", "HAKIRI_SPARK_ENGINE")
    }
    if engine == "sail":
        env["HAKIRI_SPARK_ENGINE"] = "sail"
    else:
        env["HAKIRI_SPARK_REMOTE"] = "in-process" if engine == "driver" else "local"
    stop = [sys.executable, "-m", "hakiri.cli.main", "engine", "stop"]
    times, peak = [], 0.0
    for index in range(runs + 1):
        write_file(root, index, rows)
        if engine == "cold":
            subprocess.run(stop, capture_output=True, env=env, check=True)
        started = time.perf_counter()
        with tempfile.NamedTemporaryFile("r", suffix=".rss") as report:
            # GNU time reports the peak RSS its own wait4 saw for the apply (a child forked
            # from this process would start with this process's pages counted).
            done = subprocess.run(
                ["/usr/bin/time", "-f", "%M", "-o", report.name, *command],
                capture_output=True,
                text=True,
                env=env,
            )
            elapsed = time.perf_counter() - started
            lines = report.read().strip().splitlines()
        if done.returncode != 0:
            raise SystemExit(f"apply failed:\n{done.stderr}")
        if index:
            times.append(elapsed)
            if lines and lines[-1].isdigit():
                peak = max(peak, int(lines[-1]) / 1024)
    return times, peak


def bench_serve(
    root: Path, url: str, runs: int, rows: int
) -> tuple[float, list[float], list[float]]:
    project(root, url)
    times, status = [], []
    begun = time.perf_counter()
    with ServeProcess(root, env={"HAKIRI_SERVE_TOKEN": TOKEN}) as serve:
        serve.wait_ready()
        started = time.perf_counter() - begun
        for index in range(runs + 1):
            write_file(root, index, rows)
            began = time.perf_counter()
            run_id = serve.post("/v1/pipelines/p/runs", token=TOKEN).json()["run_id"]
            while True:
                listed = httpx.get(serve.url + "/v1/pipelines/p/runs", timeout=10).json()
                run = next((r for r in listed if r["run_id"] == run_id), None)
                if run is not None and run["ended_at"]:
                    break
                time.sleep(0.05)
            elapsed = time.perf_counter() - began
            if run["status"] != "success" or run["row_count"] != rows:
                raise SystemExit(f"run {run_id} did not load {rows} rows: {run}")
            if index:
                times.append(elapsed)
                began = time.perf_counter()
                serve.get("/v1/pipelines/p").raise_for_status()
                status.append(time.perf_counter() - began)
        if serve.terminate() != 0:
            raise SystemExit(f"serve did not stop cleanly:\n{serve.log}")
    return started, times, status


def report(label: str, values: list[float], unit: str = "s", scale: float = 1.0) -> None:
    ordered = sorted(v * scale for v in values)
    p95 = ordered[min(len(ordered) - 1, round(0.95 * (len(ordered) - 1)))]
    print(
        f"{label:32} median {statistics.median(ordered):7.2f} {unit}   "
        f"p95 {p95:7.2f} {unit}   min {ordered[0]:7.2f} {unit}"
    )


if __name__ == "__main__":
    main()
