"""The warm-up process that writes the JVM class-data archive (see `hakiri.spark.class_sharing`).

Run as `python -m hakiri.spark.class_archive ARCHIVE`; started in the background by
`class_sharing.start_warm_up`, never imported by a run.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

from hakiri.spark.class_sharing import QUIET_JVM_LOG
from hakiri.spark.session import build_spark_session

__all__ = ["write_archive"]


def write_archive(archive: Path) -> bool:
    """Start Spark with the dump option, run a small job, let the JVM exit, then move the
    archive into place; True when it did. Runs in the warm-up process."""
    partial = archive.with_name(f"{archive.stem}.{os.getpid()}.partial")
    options = f"-XX:ArchiveClassesAtExit={partial} {QUIET_JVM_LOG}"
    spark = build_spark_session(
        master="local[1]",
        conf={"spark.driver.extraJavaOptions": options},
        app_name="hakiri-class-sharing",
    )
    try:
        _exercise(spark)
    finally:
        process = spark.sparkContext._gateway.proc  # type: ignore[union-attr]
        spark.stop()
        if process is not None:
            process.stdin.close()  # the JVM exits when its stdin closes, writing the archive
            process.wait()
    try:
        if partial.stat().st_size == 0:
            return False
        os.replace(partial, archive)
    except OSError:
        partial.unlink(missing_ok=True)
        return False
    archive.with_suffix(".claim").unlink(missing_ok=True)
    return True


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


if __name__ == "__main__":
    sys.exit(0 if write_archive(Path(sys.argv[1])) else 1)
