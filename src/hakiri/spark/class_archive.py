"""The warm-up process that writes the JVM class-data archive (see `hakiri.spark.class_sharing`).

Run as `python -m hakiri.spark.class_archive ARCHIVE`; started in the background by
`class_sharing.start_warm_up`, never imported by a run. It runs `spark-submit` on this
file with the dump option: the JVM is spark-submit's (this process waits for it to exit,
which is when it writes the archive), and the Python side runs `_exercise` through it.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

from hakiri.spark.class_sharing import QUIET_JVM_LOG, spark_submit

__all__ = ["write_archive"]

_EXERCISE = "--exercise"
_TIMEOUT_SECONDS = 600
# The script spark-submit runs: from a directory of its own, so nothing shadows a module.
_SCRIPT = "import runpy\nrunpy.run_module('hakiri.spark.class_archive', run_name='__main__')\n"


def write_archive(archive: Path) -> bool:
    """Start Spark with the dump option, run a small job, let the JVM exit, then move the
    archive into place; True when it did. Runs in the warm-up process."""
    submit = spark_submit()
    if submit is None:
        return False
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    options = f"-XX:ArchiveClassesAtExit={partial} {QUIET_JVM_LOG}"
    # Python workers and the driver script run this interpreter, which has hakiri.
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    try:
        with tempfile.TemporaryDirectory(prefix="hakiri-class-sharing-") as scratch:
            script = Path(scratch, "exercise.py")
            script.write_text(_SCRIPT, encoding="utf-8")
            done = _submit(submit, options, script, env)
        if done.returncode != 0 or partial.stat().st_size == 0:
            partial.unlink(missing_ok=True)
            return False
        os.replace(partial, archive)
    except (OSError, subprocess.TimeoutExpired):
        partial.unlink(missing_ok=True)
        return False
    archive.with_suffix(".claim").unlink(missing_ok=True)
    return True


def _submit(
    submit: Path, options: str, script: Path, env: dict[str, str]
) -> subprocess.CompletedProcess[bytes]:
    command = [
        str(submit),
        "--master",
        "local[1]",
        "--driver-java-options",
        options,
        "--conf",
        "spark.ui.enabled=false",
        str(script),
        _EXERCISE,
    ]
    return subprocess.run(
        command,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        timeout=_TIMEOUT_SECONDS,
        check=False,
    )


def _exercise(spark: Any) -> None:
    """A small run of what hakiri's jobs use, so their classes are in the archive: a CSV read,
    an aggregation, a Parquet write and an Arrow round trip through a Python worker."""
    import tempfile

    with tempfile.TemporaryDirectory(prefix="hakiri-class-sharing-") as scratch:
        source = Path(scratch, "in.csv")
        source.write_text("id,name,at\n1,a,2024-01-01 00:00:00\n2,b,2024-01-02 00:00:00\n")
        frame = spark.read.option("header", True).option("inferSchema", True).csv(str(source))
        frame.groupBy("name").count().collect()  # two counts
        frame.write.mode("overwrite").parquet(str(Path(scratch, "out")))
        frame.mapInArrow(lambda batches: batches, frame.schema).count()


def _run_exercise() -> None:
    """The driver script's side, inside spark-submit: the session is the JVM's."""
    from hakiri.spark.session import build_spark_session

    spark = build_spark_session(master="local[1]", app_name="hakiri-class-sharing")
    try:
        _exercise(spark)
    finally:
        spark.stop()


if __name__ == "__main__":
    if sys.argv[1:] == [_EXERCISE]:
        _run_exercise()
        sys.exit(0)
    sys.exit(0 if write_archive(Path(sys.argv[1])) else 1)
