"""Which projects share a local Spark Connect server, on real processes: `hakiri apply` of
several projects on one machine (a cache directory of the test's own, so the servers are its
only).

Projects that differ only in settings a session holds (`spark.sql.*` runtime settings) share
one server and each sees its own values; a project whose jars the running server has runs on
it too; one needing a jar it lacks gets a server of its own. While a command waits for a
server to start, its progress line names the engine, not the file it is about to read.
"""

from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from deltalake import DeltaTable

from hakiri.spark.session import resolve_jdbc_jars
from tests.support.engines import isolated_engine_env, servers, stop_engines

pytestmark = pytest.mark.integration


def _project(root: Path, spark: str, stamp: str = "2026-01-01 00:00:00") -> Path:
    """A project loading one CSV row whose `at` has no zone: Spark reads it in the session's
    time zone, so the instant stored tells which time zone the load ran in."""
    (root / "data").mkdir(parents=True)
    (root / "data" / "a.csv").write_text(f"id,at\n1,{stamp}\n")
    (root / "hakiri.toml").write_text(
        f"""
[project]
name = "{root.name}"

[spark]
{spark}

[[pipeline]]
id = "p"
source = {{ connector = "files", config = {{ path = "data/*.csv", format = "csv" }} }}
tables = ["t"]
transforms = [{{ op = "cast", columns = {{ at = "timestamp" }} }}]
"""
    )
    return root


@pytest.fixture
def env(tmp_path: Path) -> Iterator[dict[str, str]]:
    variables = {**isolated_engine_env(tmp_path), "HAKIRI_PROGRESS_SECONDS": "1"}
    yield variables
    stop_engines(variables)


def _apply(root: Path, env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(root)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    return done.stdout + done.stderr


def _instants(root: Path) -> list[datetime]:
    table = DeltaTable(str(root / ".hakiri" / "context" / "t")).to_pyarrow_table()
    return sorted(table.column("at").to_pylist())


def _engines(env: dict[str, str]) -> list[str]:
    return sorted(p.name for p in (Path(env["HAKIRI_CACHE_DIR"]) / "engine").iterdir())


def test_projects_differing_in_session_settings_share_a_server_each_with_its_own(
    tmp_path: Path, env: dict[str, str]
) -> None:
    utc = _project(tmp_path / "utc", 'conf = { "spark.sql.session.timeZone" = "UTC" }')
    tokyo = _project(
        tmp_path / "tokyo",
        'conf = { "spark.sql.session.timeZone" = "Asia/Tokyo", '
        '"spark.sql.shuffle.partitions" = "3" }',
    )

    # The first apply starts the server: while it waits, the line names the engine.
    first = _apply(utc, env)
    waiting = [line for line in first.splitlines() if line.endswith(" so far")]
    assert any(
        re.fullmatch(r"p: starting the Spark engine \(local server\), \d+s so far", line)
        for line in waiting
    ), first
    assert not any("starting" in line and "a.csv" in line for line in waiting), first
    [server] = servers(env)

    _apply(tokyo, env)
    # One engine directory, one JVM; each project's row read in its own time zone.
    assert _engines(env) == [server["fingerprint"]]
    assert [(s["pid"], s["server_pid"]) for s in servers(env)] == [
        (server["pid"], server["server_pid"])
    ]
    assert _instants(utc) == [datetime(2026, 1, 1, 0, 0, tzinfo=UTC)]
    assert _instants(tokyo) == [datetime(2025, 12, 31, 15, 0, tzinfo=UTC)]

    # The Tokyo session's settings did not stay on the server for the next project's session.
    (utc / "data" / "b.csv").write_text("id,at\n2,2026-06-01 12:00:00\n")
    _apply(utc, env)
    assert _instants(utc)[-1] == datetime(2026, 6, 1, 12, 0, tzinfo=UTC)
    assert _engines(env) == [server["fingerprint"]]

    # `hakiri engine status` names the one server as each project's.
    for root in (utc, tokyo):
        [described] = servers(env, root)
        assert described["this_project"] is True and described["ready"] is True


def _jar(path: Path) -> Path:
    with zipfile.ZipFile(path, "w") as jar:
        jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n")
        jar.writestr(f"{path.stem}.txt", path.stem)
    return path


def test_a_server_with_the_jars_a_project_needs_serves_it_and_one_without_does_not(
    tmp_path: Path, env: dict[str, str]
) -> None:
    extra = _jar(tmp_path / "extra.jar")
    other = _jar(tmp_path / "other.jar")
    [driver] = [j for j in resolve_jdbc_jars(None).jars if "postgresql" in j]

    both = _project(tmp_path / "both", f'jars = ["{extra}", "{driver}"]')
    _apply(both, env)
    [server] = servers(env)

    # Its jars are a subset of the running server's: the same server, not a new one.
    subset = _project(tmp_path / "subset", f'jars = ["{extra}"]')
    _apply(subset, env)
    assert [s["server_pid"] for s in servers(env)] == [server["server_pid"]]
    assert _instants(subset) == [datetime(2026, 1, 1, 0, 0, tzinfo=UTC)]
    [described] = servers(env, subset)
    assert described["this_project"] is True

    # A jar the running server lacks: a server of its own.
    lacking = _project(tmp_path / "lacking", f'jars = ["{other}"]')
    _apply(lacking, env)
    running = servers(env)
    assert len(running) == 2 and len(_engines(env)) == 2
    assert server["server_pid"] in {s["server_pid"] for s in running}
    assert _instants(lacking) == [datetime(2026, 1, 1, 0, 0, tzinfo=UTC)]
    ours = {s["fingerprint"] for s in servers(env, lacking) if s["this_project"]}
    assert ours == {s["fingerprint"] for s in running} - {server["fingerprint"]}
