"""A real Spark standalone cluster on loopback: one master and two workers, each its own JVM
process started with the pip-installed PySpark's own launcher (`bin/spark-class`).

`StandaloneCluster().start()` returns once the master reports both workers alive;
`url` is the `spark://127.0.0.1:<port>` to put in `[spark] master`; `workers` are
the worker processes (their pids are what a fault test kills). Each worker offers
one core and 1 GiB, so the cluster fits the 2-core machine beside the driver.
Logs and work directories live in a temp directory, removed by `stop()`.
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

from tests.support.engines import QUICK_JVM

_START_TIMEOUT_SECONDS = 90.0


class ClusterUnavailable(RuntimeError):
    pass


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    __test__ = False

    def __init__(self, workers: int = 2) -> None:
        self.worker_count = workers
        self.port = _free_port()
        self.web_port = _free_port()
        self.base: Path | None = None
        self.master: subprocess.Popen[bytes] | None = None
        self.workers: list[subprocess.Popen[bytes]] = []

    @property
    def url(self) -> str:
        return f"spark://127.0.0.1:{self.port}"

    # An application's executors take their JVM options from the application's settings:
    # the `[spark] conf` entry a test's project gives its applications on this cluster.
    executor_conf = f'"spark.executor.extraJavaOptions" = "{QUICK_JVM}"'

    def _env(self) -> dict[str, str]:
        assert self.base is not None
        return {
            **os.environ,
            "SPARK_HOME": str(_spark_home()),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_JAVA_OPTS": QUICK_JVM,  # the master and the workers
            "SPARK_LOG_DIR": str(self.base / "logs"),
            "SPARK_PID_DIR": str(self.base),
            # Executors run the COPY writer and the rules' Python: this interpreter, with hakiri.
            "PYSPARK_PYTHON": sys.executable,
        }

    def _launch(self, name: str, *args: str) -> subprocess.Popen[bytes]:
        assert self.base is not None
        log = open(self.base / f"{name}.log", "wb")  # noqa: SIM115 - kept open for the process
        return subprocess.Popen(
            [str(_spark_home() / "bin" / "spark-class"), *args],
            env=self._env(),
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def start(self) -> StandaloneCluster:
        self.base = Path(tempfile.mkdtemp(prefix="hakiri-spark-cluster-"))
        try:
            self.master = self._launch(
                "master",
                "org.apache.spark.deploy.master.Master",
                "--host", "127.0.0.1",
                "--port", str(self.port),
                "--webui-port", str(self.web_port),
            )  # fmt: skip
            for i in range(self.worker_count):
                self.workers.append(self.start_worker(i, wait=False))
            self._wait_for_workers(self.worker_count)
        except BaseException:
            self.stop()
            raise
        return self

    def start_worker(self, index: int, *, wait: bool = True) -> subprocess.Popen[bytes]:
        """Start worker `index` (again); with `wait`, return once the master has it."""
        assert self.base is not None
        work = self.base / f"worker-{index}"
        work.mkdir(exist_ok=True)
        # The master counts the workers whose processes run (a killed one drops out at once:
        # its connection closes), and this new one.
        expected = sum(1 for w in self.workers if w.poll() is None) + 1
        process = self._launch(
            f"worker-{index}",
            "org.apache.spark.deploy.worker.Worker",
            "--host", "127.0.0.1",
            "--cores", "1",
            "--memory", "1g",
            "--webui-port", str(_free_port()),
            "--work-dir", str(work),
            self.url,
        )  # fmt: skip
        if wait:
            self._wait_for_workers(expected)
        return process

    def state(self) -> dict[str, object]:
        """The master's own JSON status (what its web UI shows); {} while it is not ready."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.web_port}/json/", timeout=2) as r:
                return dict(json.load(r))
        except (OSError, ValueError):  # not listening yet, or answering before it is ready
            return {}

    def alive_workers(self) -> int:
        return int(self.state().get("aliveworkers", 0))  # type: ignore[call-overload]

    def finished_apps(self) -> list[str]:
        """The names of the applications that ran on the cluster and ended."""
        return [str(app.get("name")) for app in self.state().get("completedapps", [])]  # type: ignore[union-attr]

    def _wait_for_workers(self, count: int) -> None:
        deadline = time.monotonic() + _START_TIMEOUT_SECONDS
        while time.monotonic() < deadline:
            if self.master is not None and self.master.poll() is not None:
                raise ClusterUnavailable(f"the Spark master exited: {self._tail('master')}")
            if self.alive_workers() >= count:
                return
            time.sleep(0.5)
        raise ClusterUnavailable(
            f"{count} Spark workers did not register within {_START_TIMEOUT_SECONDS:.0f} s: "
            f"{self._tail('worker-0')}"
        )

    def _tail(self, name: str) -> str:
        assert self.base is not None
        try:
            lines = (self.base / f"{name}.log").read_text(errors="replace").splitlines()
        except OSError:
            return "(no log)"
        return " | ".join(lines[-5:])

    def stop(self) -> None:
        for process in [*self.workers, *([self.master] if self.master else [])]:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=30)
        self.workers, self.master = [], None
        if self.base is not None:
            shutil.rmtree(self.base, ignore_errors=True)
            self.base = None
