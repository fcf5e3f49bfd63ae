"""What every run of the campaign shares: a throwaway PostgreSQL, the TCP proxy in front of
it (through which faults refuse and cut connections), and the one warm SparkSession."""

from __future__ import annotations

import contextlib
import os
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from tests.support.load_model import FileVersion

from .harness import Harness
from .steps import CLOCK0, DAYS, Step

if TYPE_CHECKING:
    from .runs import Stats


class Environment:
    """What every run shares: PostgreSQL, the proxy in front of it, the warm SparkSession."""

    def __init__(self, work: Path, *, spark: bool = True) -> None:
        import psycopg
        from tests.support.postgres import TestPostgres
        from tests.support.tcp_proxy import TcpProxy

        self.work = work
        os.environ.setdefault("HAKIRI_COPY_MIN_RUN_BYTES", "0")
        os.environ["HAKIRI_JVM_LOG"] = str(work / "jvm.log")
        os.environ.pop("HAKIRI_CATALOG_URL", None)
        self.pg = TestPostgres().start()
        assert self.pg.port is not None
        self.proxy = TcpProxy("127.0.0.1", self.pg.port).start()
        self.admin = psycopg.connect(self.pg.url, autocommit=True)
        self.spark = _start_spark() if spark else None
        self.token = uuid.uuid4().hex
        # seconds: a whole subprocess apply, and one in-process apply, per destination
        self.sub_seconds = {"postgres": 10.0, "context": 13.0}
        self.inproc_seconds = {"postgres": 2.0, "context": 3.0}

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.admin.close()
        with contextlib.suppress(Exception):
            self.proxy.stop()
        if self.spark is not None:
            with contextlib.suppress(Exception):
                self.spark.stop()
        self.pg.stop()

    def calibrate(self, dests: set[str], stats: Stats) -> None:
        """One clean subprocess apply per destination: how long a whole apply takes."""
        for dest in sorted(dests):
            combo = (dest, "append", "files")
            harness = Harness(self, combo, f"calibrate-{dest}")
            try:
                harness.setup()
                harness.mutate(
                    Step(
                        "new_file",
                        "data/f00.csv",
                        FileVersion(1, ((1, 1, "ada", "1.00", DAYS[0]),), CLOCK0),
                    )
                )
                outcome = harness.apply_subprocess(Step("kill", strategy="uniform", u=10.0))
                if outcome.rc == 0:
                    self.sub_seconds[dest] = outcome.seconds
                print(
                    f"calibrate: a subprocess apply into {dest} takes {outcome.seconds:.1f}s (exit {outcome.rc})",
                    file=sys.stderr,
                )
            finally:
                harness.teardown(keep=False)

    def learn(self, table: dict[str, float], dest: str, seconds: float) -> None:
        table[dest] = 0.7 * table[dest] + 0.3 * seconds


def _start_spark() -> Any:
    """The one warm SparkSession, made as tests/conftest.py's `spark` fixture makes it."""
    from hakiri.spark.delta import delta_jars, with_delta_conf
    from hakiri.spark.session import build_spark_session, resolve_jdbc_jars

    driver = resolve_jdbc_jars(None)
    jars = [*driver.jars, *delta_jars(())]
    conf = with_delta_conf(
        {
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "2",
            "spark.default.parallelism": "2",
        }
    )
    return build_spark_session(master="local[2]", conf=conf, jars=jars, app_name="hakiri-campaign")
