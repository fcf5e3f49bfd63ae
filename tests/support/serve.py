"""A real `hakiri serve` process for tests: started on a free port, its log collected, its
HTTP API called with httpx, stopped with SIGTERM (or killed)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, TypeVar

import httpx

T = TypeVar("T")

TOKEN = "test-token-0123456789"
START_SECONDS = 180
# [spark] for a serve process in tests: one core and a quick JIT, so it starts faster and
# the suite's own session keeps the other core.
SERVE_SPARK = """
[spark]
master = "local[1]"
conf = { "spark.driver.extraJavaOptions" = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC", "spark.ui.enabled" = "false" }
"""


def files_manifest(
    pg_url: str,
    schema: str,
    *,
    name: str = "served",
    load: str = '{ mode = "upsert", upsert_key = ["id"] }',
    schedule: str | None = None,
    catalog: str | None = None,
) -> str:
    """hakiri.toml of pipeline `p`: data/*.csv (id bigint, name string) into `schema`.t on the
    suite's PostgreSQL, with serve's small Spark; `catalog` is a catalog URL (default SQLite)."""
    catalog_table = f'[catalog]\nurl = "{catalog}"\n' if catalog else ""
    schedule_line = f'schedule = "{schedule}"' if schedule else ""
    return f"""
[project]
name = "{name}"
{SERVE_SPARK}
{catalog_table}
[connections.wh]
type = "postgres"
url = "{pg_url}"

[[pipeline]]
id = "p"
source = {{ connector = "files", config = {{ path = "data/*.csv", columns = {{ id = "bigint", name = "string" }} }} }}
tables = ["t"]
destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}
load = {load}
{schedule_line}
"""


# A project of two files pipelines for the API tests: `orders` runs every minute, `paused`
# is switched off in its manifest.
SHOP_MANIFEST = """
[project]
name = "shop"

[[pipeline]]
id = "orders"
schedule = "every 1m"
source = { connector = "files", config = { path = "data/orders/*.csv" } }
tables = ["orders"]

[[pipeline]]
id = "paused"
enabled = false
source = { connector = "files", config = { path = "data/paused/*.csv" } }
tables = ["paused"]
"""  # Spark starts inside; the machine may be busy with other tests


class ServeProcess:
    def __init__(self, root: Path, env: Mapping[str, str] | None = None) -> None:
        environment = {k: v for k, v in os.environ.items() if k != "HAKIRI_CRASH_AT"}
        environment.update(env or {})
        command = [sys.executable, "-m", "hakiri.cli.main", "serve"]
        command += ["--project", str(root), "--port", "0"]
        self.process = subprocess.Popen(
            command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=environment
        )
        self.lines: list[str] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()
        self.url = ""

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(line.rstrip("\n"))

    @property
    def log(self) -> str:
        return "\n".join(self.lines)

    @property
    def pid(self) -> int:
        return self.process.pid

    def wait_ready(self) -> ServeProcess:
        """Until /readyz answers 200 (the API is up and so are the catalog and Spark)."""

        def listening() -> str | None:
            for line in self.lines:
                found = re.search(r"listening on (http://\S+)", line)
                if found:
                    return found.group(1)
            return None

        self.url = self.wait_for(listening, START_SECONDS, "the API to listen")
        self.wait_for(
            lambda: self.get("/readyz").status_code == 200, START_SECONDS, "/readyz to be 200"
        )
        return self

    def wait_for(self, probe: Callable[[], T | None], seconds: float, what: str) -> T:
        """Poll `probe` until it returns something truthy; fail with the serve log if not."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"serve exited ({self.process.returncode}):\n{self.log}")
            try:
                value = probe()
            except httpx.TransportError:
                value = None
            if value:
                return value
            time.sleep(0.2)
        raise AssertionError(
            f"timed out after {seconds}s waiting for {what}; serve log:\n{self.log}"
        )

    def get(self, path: str, **params: Any) -> httpx.Response:
        return httpx.get(self.url + path, params=params, timeout=10)

    def post(self, path: str, token: str | None = None, body: Any = None) -> httpx.Response:
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        return httpx.post(self.url + path, json=body, headers=headers, timeout=10)

    def terminate(self, seconds: float = 90) -> int:
        """SIGTERM, then the exit code (it drains first)."""
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout=seconds)

    def kill(self) -> None:
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(timeout=30)

    def __enter__(self) -> ServeProcess:
        return self

    def __exit__(self, *_: object) -> None:
        if self.process.poll() is None:
            self.kill()
