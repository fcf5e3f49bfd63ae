"""Which JVM options the driver gets for class-data sharing, and when a warm-up is started."""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

from hakiri.spark import class_sharing
from hakiri.spark.class_sharing import class_sharing_options, start_warm_up


@pytest.fixture
def started(monkeypatch: pytest.MonkeyPatch) -> list[list[str]]:
    """The warm-up commands start_warm_up launched (recorded instead of run)."""
    # pyspark binds `from subprocess import Popen` when java_gateway is first imported: import
    # it before Popen is replaced, or the suite's SparkSession would launch its JVM with the fake.
    import pyspark.java_gateway  # noqa: F401

    launched: list[list[str]] = []

    def popen(argv: list[str], **_: Any) -> None:
        launched.append(argv)

    monkeypatch.setattr(subprocess, "Popen", popen)
    return launched


def _env(tmp_path: Path, **more: str) -> dict[str, str]:
    return {"HAKIRI_CACHE_DIR": str(tmp_path), **more}


def test_without_an_archive_the_driver_gets_nothing_and_one_warm_up_starts(
    tmp_path: Path, started: list[list[str]]
) -> None:
    env = _env(tmp_path)
    assert class_sharing_options("", env) == ""
    assert start_warm_up("", env) is True
    assert start_warm_up("", env) is False  # claimed: a concurrent run starts none
    [argv] = started
    assert argv[1:3] == ["-m", "hakiri.spark.class_archive"]
    assert argv[3].startswith(str(tmp_path / "jvm" / "spark-")) and argv[3].endswith(".jsa")


def test_a_whole_archive_is_mapped_quietly(tmp_path: Path, started: list[list[str]]) -> None:
    env = _env(tmp_path)
    start_warm_up("", env)
    archive = Path(started[0][3])
    archive.write_bytes(b"an archive")  # what the warm-up renames into place
    options = class_sharing_options("", env)
    assert (
        options
        == f"-XX:SharedArchiveFile={archive} -Xshare:auto -Xlog:disable -Xlog:all=error:stderr"
    )
    assert start_warm_up("", env) is False


def test_a_claim_left_by_a_warm_up_that_died_is_taken_over(
    tmp_path: Path, started: list[list[str]]
) -> None:
    env = _env(tmp_path)
    start_warm_up("", env)
    claim = Path(started[0][3]).with_suffix(".claim")
    old = time.time() - 3600
    os.utime(claim, (old, old))
    assert start_warm_up("", env) is True
    assert len(started) == 2


@pytest.mark.parametrize(
    ("options", "env_more"),
    [
        ("-XX:SharedArchiveFile=/mine.jsa", {}),
        ("-Xshare:off", {}),
        ("", {"HAKIRI_JVM_CLASS_SHARING": "0"}),
    ],
)
def test_class_sharing_stays_off_when_the_user_says_so(
    tmp_path: Path, started: list[list[str]], options: str, env_more: dict[str, str]
) -> None:
    env = _env(tmp_path, **env_more)
    assert class_sharing_options(options, env) == ""
    assert start_warm_up(options, env) is False
    assert started == []


def test_the_archive_name_changes_with_the_class_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, started: list[list[str]]
) -> None:
    jars = tmp_path / "jars"
    jars.mkdir()
    (jars / "a.jar").write_bytes(b"a")
    monkeypatch.setattr(class_sharing, "_spark_jars", lambda: sorted(jars.glob("*.jar")))
    env = _env(tmp_path / "cache")
    start_warm_up("", env)
    (jars / "b.jar").write_bytes(b"b")
    start_warm_up("", env)
    assert started[0][3] != started[1][3]
