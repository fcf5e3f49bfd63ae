"""hakiri's local Spark Connect server, on real processes: `hakiri apply` with remote = "local".

Commands run as processes of their own with a cache directory of this test's (the jars are
the suite's, linked in), so the servers they start and stop are this test's only.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from deltalake import DeltaTable

from hakiri.spark.connect_server import pid_alive
from tests.support.engines import isolated_engine_env, servers, stop_engines, wait

pytestmark = pytest.mark.integration

ROWS = 2_000


def _project(root: Path, idle_timeout: str = "15m") -> Path:
    (root / "data").mkdir(parents=True)
    lines = ["id,name"] + [f"{i},n{i}" for i in range(ROWS)]
    (root / "data" / "a.csv").write_text("\n".join(lines) + "\n")
    (root / "hakiri.toml").write_text(
        f"""
[project]
name = "connect"

[spark]
remote = "local"
idle_timeout = "{idle_timeout}"

[[pipeline]]
id = "p"
source = {{ connector = "files", config = {{ path = "data/*.csv", format = "csv" }} }}
tables = ["t"]
"""
    )
    return root


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    variables = isolated_engine_env(tmp_path)
    yield variables
    stop_engines(variables)


def _apply(root: Path, env: dict[str, str]) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def _finish(process: subprocess.Popen[str]) -> str:
    out, err = process.communicate(timeout=300)
    assert process.returncode == 0, err[-2000:]
    return out + err


def _rows(root: Path) -> int:
    return DeltaTable(str(root / ".hakiri" / "context" / "t")).to_pyarrow_table().num_rows


def test_commands_share_one_local_server_that_outlives_them(
    tmp_path: Path, env: dict[str, str]
) -> None:
    first, second = _project(tmp_path / "one"), _project(tmp_path / "two")

    # Two commands starting at once: one server, both load.
    both = [_apply(first, env), _apply(second, env)]
    for process in both:
        _finish(process)
    assert _rows(first) == ROWS and _rows(second) == ROWS
    running = servers(env)
    assert len(running) == 1, running
    server = running[0]
    assert server["ready"] and not server["in_use"]

    # A command killed while it uses the server leaves it running; the next one reuses it.
    (first / "data" / "b.csv").write_text("id,name\n" + "".join(f"{i},m{i}\n" for i in range(50)))
    killed = _apply(first, env)
    users = Path(env["HAKIRI_CACHE_DIR"], "engine", str(server["fingerprint"]), "users.lock")
    assert wait(lambda: servers(env)[0]["in_use"], 120), "the command never used the server"
    killed.send_signal(signal.SIGKILL)
    killed.wait(30)
    assert users.exists()
    again = _apply(first, env)
    _finish(again)
    assert _rows(first) == ROWS + 50
    after = servers(env)
    assert [s["pid"] for s in after] == [server["pid"]]  # the same server, not a new one

    # `hakiri engine stop` stops it; status then finds none.
    stopped = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "engine", "stop"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert stopped.returncode == 0, stopped.stderr
    assert f"stopped {server['fingerprint']}" in stopped.stdout
    assert not pid_alive(int(server["pid"])) and not pid_alive(int(server["server_pid"]))
    assert servers(env) == []


def test_an_unused_local_server_stops_after_its_idle_timeout(
    tmp_path: Path, env: dict[str, str]
) -> None:
    root = _project(tmp_path / "p", idle_timeout="2s")
    _finish(_apply(root, env))
    assert _rows(root) == ROWS
    assert wait(lambda: servers(env) == [], 60), servers(env)
