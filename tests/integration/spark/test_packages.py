"""Jars by Maven coordinates, for real: Spark's resolver downloads them once from Maven Central
(or the configured mirror) into hakiri's jar cache, and later resolutions never leave it."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from hakiri.errors import SparkSetupError
from hakiri.spark import packages
from hakiri.spark.jdbc import JDBC_MAVEN_COORDINATE
from hakiri.spark.packages import resolve_packages

pytestmark = pytest.mark.integration


def test_coordinates_are_resolved_once_then_served_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    env = {**os.environ, "HAKIRI_CACHE_DIR": str(tmp_path)}

    first = resolve_packages([JDBC_MAVEN_COORDINATE], env)
    [manifest] = (tmp_path / "jars").glob("*.json")
    recorded = manifest.stat().st_mtime_ns
    jars = {jar: Path(jar).stat().st_mtime_ns for jar in first}

    def no_resolution(*_: object) -> tuple[str, ...]:
        raise AssertionError("a cached set of coordinates was resolved again")

    # The second resolution is a read of the cache: no lock, no spark-submit, no JVM.
    monkeypatch.setattr(packages, "_resolve", no_resolution)
    again = resolve_packages([JDBC_MAVEN_COORDINATE], {**env, "HAKIRI_SPARK_OFFLINE": "true"})

    names = [Path(jar).name for jar in first]
    assert "org.postgresql_postgresql-42.7.14.jar" in names  # with its dependencies
    assert all(Path(jar).is_file() and Path(jar).is_relative_to(tmp_path) for jar in first)
    assert again == first
    assert json.loads(manifest.read_text())["jars"] == list(first)
    # Served as recorded: neither the jar list nor a jar was written again.
    assert manifest.stat().st_mtime_ns == recorded
    assert {jar: Path(jar).stat().st_mtime_ns for jar in again} == jars


def test_a_coordinate_that_does_not_exist_is_one_line_naming_it(tmp_path: Path) -> None:
    env = {**os.environ, "HAKIRI_CACHE_DIR": str(tmp_path)}

    with pytest.raises(SparkSetupError) as raised:
        resolve_packages(["org.postgresql:postgresql:0.0.0-nope"], env)

    reason = raised.value.reason
    assert "\n" not in reason and "Traceback" not in reason
    assert reason.startswith("could not download org.postgresql:postgresql:0.0.0-nope from")
    assert "unresolved dependency" in reason
    assert "HAKIRI_MAVEN_REPOSITORIES" in (raised.value.hint or "")


def test_two_first_runs_at_once_resolve_once_and_agree(tmp_path: Path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    env = {**os.environ, "HAKIRI_CACHE_DIR": str(tmp_path)}

    with ThreadPoolExecutor(2) as pool:
        first, second = pool.map(lambda _: resolve_packages([JDBC_MAVEN_COORDINATE], env), range(2))

    assert first == second
    assert all(Path(jar).is_file() for jar in first)
    assert len(list((tmp_path / "jars").glob("*.json"))) == 1
