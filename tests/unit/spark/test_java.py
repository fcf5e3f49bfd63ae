"""Which Java Spark would start on, and whether it is new enough: checked without starting a JVM."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from hakiri.errors import SparkSetupError
from hakiri.spark.java import find_java, java_major_version, require_java


@pytest.mark.parametrize(
    ("text", "major"),
    [
        ("17.0.15", 17),
        ("1.8.0_392", 8),
        ("21", 21),
        ("21-ea", 21),
        ("11.0.2+9", 11),
        ('openjdk version "17.0.15" 2025-04-15\nOpenJDK Runtime Environment (build 17.0.15+6)', 17),
        ('java version "1.8.0_392"\nJava(TM) SE Runtime Environment (build 1.8.0_392-b08)', 8),
        ('Picked up JAVA_TOOL_OPTIONS: -Xmx2g\nopenjdk version "21.0.2" 2024-01-16', 21),
        ("openjdk 22 2024-03-19", 22),
    ],
)
def test_java_major_version(text: str, major: int) -> None:
    assert java_major_version(text) == major


@pytest.mark.parametrize("text", ["", "command not found", 'version ""'])
def test_java_major_version_unreadable(text: str) -> None:
    assert java_major_version(text) is None


def _fake_java(directory: Path, banner: str) -> Path:
    """A `java` that prints `banner` on stderr, as `java -version` does."""
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text(f"#!/bin/sh\ncat >&2 <<'EOF'\n{banner}\nEOF\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return java


def test_java_on_path_new_enough(tmp_path: Path) -> None:
    _fake_java(tmp_path / "bin", 'openjdk version "17.0.15" 2025-04-15')

    assert require_java({"PATH": str(tmp_path / "bin")}) == 17


def test_java_home_wins_over_path(tmp_path: Path) -> None:
    _fake_java(tmp_path / "old" / "bin", 'openjdk version "11.0.2"')
    _fake_java(tmp_path / "home" / "bin", 'openjdk version "21.0.2"')
    env = {"PATH": str(tmp_path / "old" / "bin"), "JAVA_HOME": str(tmp_path / "home")}

    assert find_java(env) == tmp_path / "home" / "bin" / "java"
    assert require_java(env) == 21


def test_old_java_is_refused_with_the_apt_line(tmp_path: Path) -> None:
    _fake_java(tmp_path / "bin", 'java version "1.8.0_392"')

    with pytest.raises(SparkSetupError) as raised:
        require_java({"PATH": str(tmp_path / "bin")})

    assert raised.value.reason.startswith("Java 8 at ")
    assert "needs Java 17 or newer" in raised.value.reason
    assert "apt-get install -y openjdk-17-jre-headless" in (raised.value.hint or "")


def test_no_java_at_all(tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()

    with pytest.raises(SparkSetupError) as raised:
        require_java({"PATH": str(tmp_path / "empty")})

    assert raised.value.reason == "Java not found: Spark needs Java 17 or newer"
    assert "JAVA_HOME" in (raised.value.hint or "")


def test_java_home_without_a_java(tmp_path: Path) -> None:
    with pytest.raises(SparkSetupError) as raised:
        require_java({"PATH": os.defpath, "JAVA_HOME": str(tmp_path)})

    assert "JAVA_HOME" in raised.value.reason


def test_a_java_that_prints_no_version(tmp_path: Path) -> None:
    _fake_java(tmp_path / "bin", "Error: could not open `jvm.cfg'")

    with pytest.raises(SparkSetupError) as raised:
        require_java({"PATH": str(tmp_path / "bin")})

    assert raised.value.reason.startswith("cannot tell the version of ")
