"""An engine that goes away under a command, on real processes: `hakiri apply` on hakiri's local
Spark Connect server while the server's JVM is killed, or `hakiri engine stop` is run in
another shell. The apply fails within a minute with one line (or, for a plain stop, is not
disturbed at all), and the next apply loads the file once, on a new server.

Every command runs in a process of its own, on engines of this test's own (tests/support/
engines.py)."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable

from tests.support.engines import HAKIRI, isolated_engine_env, servers, stop_engines

pytestmark = pytest.mark.integration

ROWS = 200_000


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    variables = {**isolated_engine_env(tmp_path), "HAKIRI_PROGRESS_SECONDS": "1", "NO_COLOR": "1"}
    yield variables
    stop_engines(variables)


def _project(root: Path) -> Path:
    _write_rows(root / "data" / "a.csv", 0)
    (root / "hakiri.toml").write_text(
        """
[project]
name = "liveness"

[spark]
master = "local[1]"

[[pipeline]]
id = "p"
source = { connector = "files", config = { path = "data/*.csv", columns = { id = "bigint", name = "string", amount = "double" } } }
tables = ["t"]
"""
    )
    return root


def _write_rows(path: Path, first: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as out:
        out.write("id,name,amount\n")
        out.writelines(f"{i},name {i},{i * 0.5}\n" for i in range(first, first + ROWS))


def _apply(root: Path, env: dict[str, str], log: Path) -> subprocess.Popen[bytes]:
    return subprocess.Popen(
        [*HAKIRI, "apply", "--project", str(root)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=log.open("wb"),
    )


def _loading(process: subprocess.Popen[bytes], log: Path, env: dict[str, str]) -> dict:
    """Wait until the apply is loading the file on a server it holds; that server."""
    deadline = time.monotonic() + 240
    while time.monotonic() < deadline:
        assert process.poll() is None, log.read_text(errors="replace")
        if "loading" in log.read_text(errors="replace"):
            held = [s for s in servers(env) if s["in_use"] and s["ready"]]
            if held:
                time.sleep(0.5)  # the progress line says the session is up: into the load
                return held[0]
        time.sleep(0.3)
    raise AssertionError(f"the apply never got to loading:\n{log.read_text(errors='replace')}")


def _rows(root: Path) -> int:
    return DeltaTable(str(root / ".hakiri" / "context" / "t")).to_pyarrow_table().num_rows


def _fails_in_one_line(apply: subprocess.Popen[bytes], log: Path, server: dict) -> str:
    """The apply whose engine just went away: exit 1 within a minute, one `error:` line that
    names the engine's endpoint, a hint, no traceback or gRPC text. That line."""
    gone = time.monotonic()
    code = apply.wait(90)
    waited = time.monotonic() - gone
    said = log.read_text(errors="replace")
    errors = [line for line in said.splitlines() if line.startswith("error:")]
    assert code == 1, said
    assert waited < 60, f"{waited:.0f}s:\n{said}"
    assert len(errors) == 1, said
    assert f"localhost:{server['port']}" in errors[0], errors
    assert "Traceback" not in said and "_MultiThreadedRendezvous" not in said, said
    assert "hint: run the command again" in said, said
    return errors[0]


def _applies(root: Path, env: dict[str, str]) -> None:
    again = subprocess.run(
        [*HAKIRI, "apply", "--project", str(root)], env=env, capture_output=True, text=True
    )
    assert again.returncode == 0, again.stderr


def test_a_killed_or_force_stopped_engine_fails_its_apply_in_seconds_and_stop_keeps_one_in_use(
    tmp_path: Path, env: dict[str, str]
) -> None:
    """One story on the servers it starts (three: a server start is the slow part, so the ways
    an engine goes away share them): the server's JVM killed under an apply fails that apply
    in one line, and the next loads the file once, on a new server; a plain `engine stop`
    keeps that server while an apply holds it, undisturbed; `engine stop --force` under the
    next apply fails it in one line, and the one after loads once."""
    root = _project(tmp_path / "p")
    log = tmp_path / "apply.err"
    apply = _apply(root, env, log)
    server = _loading(apply, log, env)

    os.kill(server["server_pid"], signal.SIGKILL)

    error = _fails_in_one_line(apply, log, server)
    assert f"its JVM (pid {server['server_pid']}) is gone" in error
    _applies(root, env)
    assert _rows(root) == ROWS  # the file, once
    (new,) = [s for s in servers(env) if s["ready"]]
    assert new["pid"] != server["pid"]  # on a new server

    # A plain stop keeps the server the next apply holds, and that apply is undisturbed.
    _write_rows(root / "data" / "b.csv", ROWS)
    log = tmp_path / "apply-2.err"
    apply = _apply(root, env, log)
    server = _loading(apply, log, env)
    status = subprocess.run(
        [*HAKIRI, "engine", "status", "--project", str(root)],
        env=env,
        capture_output=True,
        text=True,
    )
    assert f"{server['fingerprint']} (this project's): in use" in status.stdout, status.stdout
    assert f"held by `hakiri apply` in {root}" in status.stdout, status.stdout

    stop = subprocess.run([*HAKIRI, "engine", "stop"], env=env, capture_output=True, text=True)
    assert stop.returncode == 0, stop.stderr
    assert f"kept {server['fingerprint']}" in stop.stderr, stop.stderr
    assert f"in use by `hakiri apply` in {root} (pid {apply.pid})" in stop.stderr, stop.stderr
    assert "--force" in stop.stderr
    assert apply.wait(300) == 0, log.read_text(errors="replace")  # undisturbed
    assert _rows(root) == 2 * ROWS

    # --force stops it under the next apply, which fails within a minute; the one after loads.
    _write_rows(root / "data" / "c.csv", 2 * ROWS)
    log = tmp_path / "apply-3.err"
    apply = _apply(root, env, log)
    server = _loading(apply, log, env)
    forced = subprocess.run(
        [*HAKIRI, "engine", "stop", "--force"], env=env, capture_output=True, text=True
    )
    assert forced.returncode == 0, forced.stderr
    assert f"stopped {server['fingerprint']}" in forced.stdout, forced.stderr
    _fails_in_one_line(apply, log, server)
    _applies(root, env)
    assert _rows(root) == 3 * ROWS  # c.csv, once
