"""Commands in processes of their own, with engines of their own: a cache directory of the
test's (its `engine/` empty) that shares the suite's jars, so the local Spark Connect servers
those commands start, stop or kill are the test's only."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from hakiri.spark.class_sharing import cache_root

HAKIRI = [sys.executable, "-m", "hakiri.cli.main"]

# The JVM options of the JVMs a test starts for itself (its own local servers, in-process
# drivers, the stock Connect server, the standalone cluster's daemons and executors). They
# live seconds to minutes over small data, where the optimizing compiler's work never pays
# back: the first-tier compiler alone and the serial collector cost a third less CPU for a
# test that starts its own servers. The suite's shared server keeps Java's defaults: it works
# for the whole run, and on the first tier alone its Delta writes and MERGEs took longer
# (docs/performance.md, "The suite after the sources refactor"). So do users' JVMs; what a
# test proves depends on neither.
QUICK_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
QUICK_JVM_ENV = {"SPARK_SUBMIT_OPTS": QUICK_JVM}  # read by Spark's launcher (spark-submit)


def isolated_engine_env(tmp_path: Path) -> dict[str, str]:
    """os.environ with HAKIRI_CACHE_DIR in `tmp_path` (the suite's jars and JVM archive linked
    in) and no HAKIRI_SPARK_REMOTE: the default engine, on servers of this test's own (with
    QUICK_JVM)."""
    from hakiri.spark.delta import delta_jars
    from hakiri.spark.session import resolve_jdbc_jars

    resolve_jdbc_jars(None)  # resolved once into the suite's cache, as the `spark` fixture does
    delta_jars(())
    cache = tmp_path / "cache"
    cache.mkdir()
    (cache / "jars").symlink_to(cache_root(os.environ) / "jars")
    if (cache_root(os.environ) / "jvm").is_dir():
        (cache / "jvm").symlink_to(cache_root(os.environ) / "jvm")
    variables = {k: v for k, v in os.environ.items() if k != "HAKIRI_SPARK_REMOTE"}
    return {**variables, **QUICK_JVM_ENV, "HAKIRI_CACHE_DIR": str(cache)}


def servers(env: dict[str, str], project: Path | None = None) -> list[dict[str, Any]]:
    """`hakiri engine status --json` under `env` (with `project`: its `this_project` marks)."""
    where = ["-p", str(project)] if project is not None else []
    done = subprocess.run(
        [*HAKIRI, "engine", "status", "--json", *where],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
    )
    return list(json.loads(done.stdout))


def wait(condition: Callable[[], Any], seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.2)
    return bool(condition())


def stop_engines(env: dict[str, str]) -> None:
    """Stop every local server of `env`'s cache (a test's own engines, after it)."""
    from hakiri.spark.connect_server import running_servers, stop_server

    for state in running_servers(env):
        stop_server(state)
