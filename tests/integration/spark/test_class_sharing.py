"""A real class-data-sharing archive: the warm-up writes it whole, a new driver starts from it.

Both run as processes of their own (the suite's JVM is already running), with the
cache in a temp dir, so the archive is this test's own.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.engines import QUICK_JVM_ENV

DRIVER = """
from hakiri.spark.class_sharing import class_sharing_options
from hakiri.spark.session import build_spark_session
options = class_sharing_options("")
assert "-XX:SharedArchiveFile=" in options, options
spark = build_spark_session(master="local[1]")
assert spark.range(5).count() == 5
print("counted")
"""


@pytest.mark.integration
def test_the_warm_up_writes_an_archive_a_new_driver_starts_from(tmp_path: Path) -> None:
    env = {**os.environ, **QUICK_JVM_ENV, "HAKIRI_CACHE_DIR": str(tmp_path)}
    archive = tmp_path / "jvm" / "spark-test.jsa"
    archive.parent.mkdir()
    archive.with_suffix(".claim").write_text("1\n")

    warm_up = subprocess.run(
        [sys.executable, "-m", "hakiri.spark.class_archive", str(archive)],
        env={**env, "HAKIRI_JVM_CLASS_SHARING": "0"},
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert warm_up.returncode == 0, warm_up.stderr[-2000:]
    assert archive.stat().st_size > 10_000_000  # Spark's classes, not an empty file
    assert not archive.with_suffix(".claim").exists()
    assert list(archive.parent.glob("*.partial")) == []
    assert "[cds]" not in warm_up.stdout + warm_up.stderr  # the dump's notes stay quiet

    # The archive's real name is the class path's fingerprint: put it there.
    from hakiri.spark.class_sharing import archive_path

    expected = archive_path("", env)
    assert expected is not None
    archive.rename(expected)
    driver = subprocess.run(
        [sys.executable, "-c", DRIVER], env=env, capture_output=True, text=True, timeout=300
    )
    assert driver.returncode == 0, driver.stderr[-2000:]
    assert driver.stdout.strip() == "counted"  # nothing from the JVM on stdout
