"""session_for checks what it can before starting a JVM: Java, then the configured jars."""

from __future__ import annotations

import stat
from pathlib import Path

import pytest

from hakiri.errors import SparkSetupError
from hakiri.spark.session import session_for
from hakiri.spec.project import SparkSettings


def _java(directory: Path, version: str) -> dict[str, str]:
    directory.mkdir(parents=True, exist_ok=True)
    java = directory / "java"
    java.write_text(f"#!/bin/sh\necho 'openjdk version \"{version}\"' >&2\n")
    java.chmod(java.stat().st_mode | stat.S_IXUSR)
    return {"PATH": str(directory)}


def test_java_is_checked_before_anything_starts(tmp_path: Path) -> None:
    env = _java(tmp_path / "bin", "11.0.2")

    with pytest.raises(SparkSetupError) as raised:
        session_for(SparkSettings(), tmp_path, env=env)

    assert raised.value.reason.startswith("Java 11 at ")


def test_a_configured_jar_is_looked_up_in_the_project_dir(tmp_path: Path) -> None:
    env = _java(tmp_path / "bin", "17.0.15")

    with pytest.raises(SparkSetupError) as raised:
        session_for(SparkSettings(jars=["lib/postgresql.jar"]), tmp_path, env=env)

    assert str(tmp_path / "lib" / "postgresql.jar") in raised.value.reason
    assert "[spark] jars" in raised.value.reason


def test_a_jar_named_in_the_environment_must_exist(tmp_path: Path) -> None:
    env = {**_java(tmp_path / "bin", "17.0.15"), "HAKIRI_SPARK_JARS": str(tmp_path / "no.jar")}

    with pytest.raises(SparkSetupError) as raised:
        session_for(SparkSettings(), tmp_path, env=env)

    assert "HAKIRI_SPARK_JARS" in raised.value.reason
