"""Benchmark: what a user sees when the engine goes away under a command (issue 46).

Run by hand (a few minutes; more on a tree that hangs, each wait is capped):

    .venv/bin/python bench/engine_liveness.py [--src PATH] [--rows 600000] [--only kill,stop,serve]

`--src` runs the hakiri of another checkout (its `src/` first on PYTHONPATH), to measure a
baseline beside the current tree in one sitting. Every scenario uses the default engine on a
local master: hakiri's local Spark Connect server, its JVM started by the first command.

- kill: `hakiri apply` of one CSV of `--rows` rows into the context store; once it is loading,
  the server's JVM gets SIGKILL. Reported: seconds from the kill to the apply's exit (capped
  at 180 s, then the apply is killed and the result is "hung"), its exit code, its last stderr
  line, whether a Python traceback or gRPC object text was printed; then a second apply, and
  the rows of the table (delta-rs) against the file's.
- stop: the same apply, with `hakiri engine stop` run while it loads: the stop's words, the
  apply's exit code and the table's rows.
- load (the control, no engine goes away): the same apply into a fresh project three times on
  one warm server, each run's wall time and the table's rows: what the load path costs.
- serve: `hakiri serve` with one files pipeline; a triggered run loads a file; the JVM gets
  SIGKILL; then `/readyz` is timed (5 readings, 30 s client timeout), a new file is written
  and a run triggered (its outcome within 120 s), then SIGTERM: seconds until the process
  ends (capped at 60 s, then SIGKILL).
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import textwrap
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # for tests.support

import httpx
from tests.support.serve import TOKEN, ServeProcess

ROOT = Path(__file__).resolve().parents[1]
HAKIRI = [sys.executable, "-m", "hakiri.cli.main"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--src", type=Path, default=ROOT / "src")
    parser.add_argument("--rows", type=int, default=600_000)
    parser.add_argument("--only", default="kill,stop,serve,load")
    args = parser.parse_args()
    env = {**os.environ, "PYTHONPATH": str(args.src.resolve()), "NO_COLOR": "1"}
    env.pop("HAKIRI_SPARK_ENGINE", None)
    env.pop("HAKIRI_SPARK_REMOTE", None)
    print(f"hakiri from {args.src}; {os.cpu_count()} cores", flush=True)
    for scenario in args.only.split(","):
        with tempfile.TemporaryDirectory(prefix=f"hakiri-bench-{scenario}-") as tmp:
            # Engines of the bench's own (the user's jars linked in): `engine stop` and the
            # kills touch no other server of this machine.
            isolated = {**env, "HAKIRI_CACHE_DIR": _cache_of_own(Path(tmp))}
            project = _project(Path(tmp) / "project", args.rows)
            scenarios = {"kill": _kill, "stop": _stop, "serve": _serve, "load": _load}
            result = scenarios[scenario](project, isolated)
            print(json.dumps({"scenario": scenario, **result}), flush=True)


def _cache_of_own(tmp: Path) -> str:
    from hakiri.spark.class_sharing import cache_root

    cache = tmp / "cache"
    cache.mkdir()
    for part in ("jars", "jvm"):
        if (cache_root(os.environ) / part).is_dir():
            (cache / part).symlink_to(cache_root(os.environ) / part)
    return str(cache)


def _project(root: Path, rows: int) -> Path:
    root.mkdir()
    (root / "hakiri.toml").write_text(
        textwrap.dedent(
            """
            [project]
            name = "liveness"

            [[pipeline]]
            id = "p"
            source = { connector = "files", config = { path = "data/*.csv", columns = { id = "bigint", name = "string", amount = "double" } } }
            tables = ["t"]
            load = { mode = "append" }
            """
        )
    )
    _write_csv(root / "data" / "a.csv", 0, rows)
    return root


def _write_csv(path: Path, start: int, rows: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write("id,name,amount\n")
        for i in range(start, start + rows):
            out.write(f"{i},name {i},{i * 0.5}\n")


def _rows(project: Path) -> int | None:
    from deltalake import DeltaTable

    try:
        return DeltaTable(str(project / ".hakiri" / "context" / "t")).to_pyarrow_table().num_rows
    except Exception as exc:
        return f"unreadable: {str(exc).splitlines()[0][:120]}"  # type: ignore[return-value]


def _servers(env: dict[str, str]) -> list[dict]:
    done = subprocess.run(
        [*HAKIRI, "engine", "status", "--json"], env=env, capture_output=True, text=True
    )
    try:
        return json.loads(done.stdout or "[]")
    except ValueError:
        return []


def _start_apply(project: Path, env: dict[str, str]) -> tuple[subprocess.Popen, Path]:
    log = project / "apply.err"
    process = subprocess.Popen(
        [*HAKIRI, "apply", "--project", str(project)],
        env={**env, "HAKIRI_PROGRESS_SECONDS": "1"},
        stdout=subprocess.DEVNULL,
        stderr=log.open("w"),
    )
    return process, log


def _wait_loading(process: subprocess.Popen, log: Path, env: dict[str, str]) -> dict | None:
    """Until the apply is loading its batch on a ready server; that server."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline and process.poll() is None:
        if "loading" in log.read_text(errors="replace"):
            busy = [s for s in _servers(env) if s.get("in_use") and s.get("ready")]
            if busy:
                time.sleep(3)  # well into the load, past the server's start
                return busy[0]
        time.sleep(0.5)
    return None


def _finish(process: subprocess.Popen, cap: float) -> tuple[float, int | str]:
    started = time.monotonic()
    try:
        code = process.wait(cap)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait()
        return time.monotonic() - started, "hung"
    return time.monotonic() - started, code


def _tail(log: Path) -> dict:
    text = log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if line.strip()]
    return {
        "last_line": lines[-1][:300] if lines else "",
        "error_lines": [line[:300] for line in lines if line.startswith("error:")],
        "traceback": "Traceback" in text,
        "grpc_text": "_MultiThreadedRendezvous" in text or "StatusCode." in text,
    }


def _kill(project: Path, env: dict[str, str]) -> dict:
    subprocess.run([*HAKIRI, "engine", "stop"], env=env, capture_output=True)
    process, log = _start_apply(project, env)
    server = _wait_loading(process, log, env)
    if server is None:
        process.kill()
        return {"error": "the apply never got to loading", **_tail(log)}
    os.kill(server["server_pid"], signal.SIGKILL)
    seconds, code = _finish(process, 180)
    result = {"exit_after_kill_s": round(seconds, 1), "exit_code": code, **_tail(log)}
    again = subprocess.run(
        [*HAKIRI, "apply", "--project", str(project)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    result.update(second_apply_exit=again.returncode, rows=_rows(project))
    return result


def _load(project: Path, env: dict[str, str]) -> dict:
    subprocess.run(
        [*HAKIRI, "engine", "start", "--project", str(project)], env=env, capture_output=True
    )
    seconds, rows = [], []
    for run in range(3):
        fresh = project.parent / f"run{run}"
        shutil.copytree(project, fresh)
        started = time.monotonic()
        done = subprocess.run(
            [*HAKIRI, "apply", "--project", str(fresh)], env=env, capture_output=True, text=True
        )
        seconds.append(round(time.monotonic() - started, 2))
        rows.append(_rows(fresh) if done.returncode == 0 else done.stderr[-300:])
    subprocess.run([*HAKIRI, "engine", "stop", "--force"], env=env, capture_output=True)
    return {"apply_s": seconds, "median_s": sorted(seconds)[1], "rows": rows}


def _stop(project: Path, env: dict[str, str]) -> dict:
    subprocess.run([*HAKIRI, "engine", "stop"], env=env, capture_output=True)
    process, log = _start_apply(project, env)
    if _wait_loading(process, log, env) is None:
        process.kill()
        return {"error": "the apply never got to loading", **_tail(log)}
    stop = subprocess.run(
        [*HAKIRI, "engine", "stop"], env=env, capture_output=True, text=True, timeout=120
    )
    seconds, code = _finish(process, 300)
    return {
        "stop_exit": stop.returncode,
        "stop_said": (stop.stdout + stop.stderr).strip()[:300],
        "apply_exit": code,
        "apply_seconds_after_stop": round(seconds, 1),
        "rows": _rows(project),
        **_tail(log),
    }


def _serve(project: Path, env: dict[str, str]) -> dict:
    subprocess.run([*HAKIRI, "engine", "stop"], env=env, capture_output=True)
    result: dict = {}
    serve = ServeProcess(
        project, {**env, "HAKIRI_SERVE_TOKEN": TOKEN, "HAKIRI_PROGRESS_SECONDS": "1"}
    )
    try:
        serve.wait_ready()
        first = _trigger(serve, 180)
        result["first_run"] = first
        listed = _servers(env)
        server = next((s for s in listed if s.get("in_use") and s.get("ready")), None)
        if server is None:
            result["error"] = f"no local server in use by serve: {listed}"
            return result
        os.kill(server["server_pid"], signal.SIGKILL)
        time.sleep(1)
        readings = []
        for _ in range(5):
            started = time.monotonic()
            try:
                status = httpx.get(serve.url + "/readyz", timeout=30).status_code
            except httpx.TransportError as exc:
                status = type(exc).__name__
            readings.append((round(time.monotonic() - started, 2), status))
        result["readyz_after_kill"] = readings
        _write_csv(project / "data" / "b.csv", 10_000_000, 1000)
        result["next_run"] = _trigger(serve, 120)
        _write_csv(project / "data" / "c.csv", 20_000_000, 1000)
        result["run_after"] = _trigger(serve, 120)
        result["rows"] = _rows(project)
    finally:
        started = time.monotonic()
        serve.process.send_signal(signal.SIGTERM)
        try:
            serve.process.wait(60)
            result["sigterm_exit_s"] = round(time.monotonic() - started, 1)
            result["sigterm_exit_code"] = serve.process.returncode
        except subprocess.TimeoutExpired:
            serve.process.kill()
            result["sigterm_exit_s"] = "still alive after 60 s (killed)"
        result["serve_log_tail"] = serve.lines[-6:]
    return result


def _trigger(serve: ServeProcess, cap: float) -> dict:
    started = time.monotonic()
    posted = serve.post("/v1/pipelines/p/runs", token=TOKEN)
    run_id = posted.json().get("run_id") if posted.status_code < 300 else None
    if run_id is None:
        return {"posted": posted.status_code, "body": posted.text[:200]}
    while time.monotonic() - started < cap:
        runs = httpx.get(serve.url + "/v1/pipelines/p/runs", timeout=30).json()
        run = next((r for r in runs if r.get("run_id") == run_id), None)
        if run is not None and run.get("status") not in ("pending", "running"):
            return {
                "status": run["status"],
                "seconds": round(time.monotonic() - started, 1),
                "rows": run.get("row_count"),
                "error": (run.get("error_msg") or "")[:200],
            }
        time.sleep(0.5)
    return {"status": "still running", "seconds": cap}


if __name__ == "__main__":
    main()
