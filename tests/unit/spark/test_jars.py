"""JDBC driver resolution and JDBC URL conversion: pure, no JVM."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from hakiri.errors import SparkSetupError
from hakiri.spark.jdbc import JDBC_MAVEN_COORDINATE
from hakiri.spark.packages import PackageSet, maven_repositories
from hakiri.spark.session import (
    JarResolution,
    jdbc_url_from_postgres_url,
    resolve_jdbc_jars,
)


@pytest.fixture
def jar(tmp_path: Path) -> Path:
    path = tmp_path / "postgresql.jar"
    path.write_bytes(b"PK")
    return path


@pytest.fixture
def no_system_jar(tmp_path: Path) -> Path:
    return tmp_path / "absent" / "postgresql.jar"


def test_configured_jars_win_over_env_and_system(jar: Path, tmp_path: Path) -> None:
    other = tmp_path / "other.jar"
    other.write_bytes(b"PK")

    got = resolve_jdbc_jars([str(jar)], {"HAKIRI_SPARK_JARS": str(other)}, system_jar=other)

    assert got == JarResolution(source="config", jars=(str(jar),))
    assert got.spark_conf() == {"spark.jars": str(jar)}


def test_configured_relative_path_is_taken_from_the_project_dir(jar: Path) -> None:
    got = resolve_jdbc_jars([jar.name], {}, base_dir=jar.parent)

    assert got.jars == (str(jar),)


def test_empty_configured_list_counts_as_not_configured(jar: Path) -> None:
    got = resolve_jdbc_jars([], {"HAKIRI_SPARK_JARS": str(jar)})

    assert got.source == "env"


def test_env_jars_are_comma_separated(jar: Path, tmp_path: Path, no_system_jar: Path) -> None:
    second = tmp_path / "second.jar"
    second.write_bytes(b"PK")

    got = resolve_jdbc_jars(
        None, {"HAKIRI_SPARK_JARS": f" {jar} ,{second},"}, system_jar=no_system_jar
    )

    assert got == JarResolution(source="env", jars=(str(jar), str(second)))
    assert got.spark_conf() == {"spark.jars": f"{jar},{second}"}


def test_system_jar_when_nothing_is_configured(jar: Path) -> None:
    got = resolve_jdbc_jars(None, {}, system_jar=jar)

    assert got == JarResolution(source="system", jars=(str(jar),))


def _cache_with_driver(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """A jar cache (HAKIRI_CACHE_DIR) in which the JDBC coordinates were resolved before."""
    env = {"HAKIRI_CACHE_DIR": str(tmp_path / "cache")}
    packages = PackageSet(
        (JDBC_MAVEN_COORDINATE,), maven_repositories(env), tmp_path / "cache" / "jars"
    )
    cached = packages.ivy_dir / "jars" / "org.postgresql_postgresql.jar"
    cached.parent.mkdir(parents=True)
    cached.write_bytes(b"PK")
    packages.manifest.write_text(
        json.dumps({"coordinates": [JDBC_MAVEN_COORDINATE], "jars": [str(cached)]})
    )
    return env, cached


def test_maven_coordinates_come_from_the_jar_cache_once_resolved(
    tmp_path: Path, no_system_jar: Path
) -> None:
    env, cached = _cache_with_driver(tmp_path)

    got = resolve_jdbc_jars(None, {**env, "HAKIRI_SPARK_OFFLINE": "true"}, system_jar=no_system_jar)

    assert got == JarResolution(source="maven", jars=(str(cached),))
    assert got.spark_conf() == {"spark.jars": str(cached)}
    # A session that may not download takes the cached driver too.
    assert resolve_jdbc_jars(None, env, system_jar=no_system_jar, download=False) == got


def test_system_jar_is_preferred_to_maven(tmp_path: Path, jar: Path) -> None:
    env, _ = _cache_with_driver(tmp_path)

    assert resolve_jdbc_jars(None, env, system_jar=jar).source == "system"


@pytest.mark.parametrize("how", ["offline", "no download"])
def test_no_jar_anywhere_is_an_error_naming_every_option(
    how: str, tmp_path: Path, no_system_jar: Path
) -> None:
    env = {"HAKIRI_CACHE_DIR": str(tmp_path / "empty-cache")}

    with pytest.raises(SparkSetupError) as raised:
        if how == "offline":
            resolve_jdbc_jars(None, {**env, "HAKIRI_SPARK_OFFLINE": "1"}, system_jar=no_system_jar)
        else:
            resolve_jdbc_jars(None, env, system_jar=no_system_jar, download=False)

    err = raised.value
    assert "\n" not in err.reason
    assert "JDBC" in err.reason
    assert err.hint is not None
    for option in (
        JDBC_MAVEN_COORDINATE,
        "HAKIRI_MAVEN_REPOSITORIES",
        "[spark] jars",
        "HAKIRI_SPARK_JARS",
        "apt-get install libpostgresql-jdbc-java",
    ):
        assert option in err.hint


def test_missing_configured_jar_names_the_path(tmp_path: Path, jar: Path) -> None:
    missing = tmp_path / "nope" / "postgresql.jar"

    with pytest.raises(SparkSetupError) as raised:
        resolve_jdbc_jars([str(missing)], {}, system_jar=jar)

    assert str(missing) in raised.value.reason
    assert "[spark] jars" in raised.value.reason
    assert "\n" not in raised.value.reason


def test_missing_env_jar_names_the_path_and_the_variable(tmp_path: Path, jar: Path) -> None:
    missing = tmp_path / "nope.jar"

    with pytest.raises(SparkSetupError) as raised:
        resolve_jdbc_jars(None, {"HAKIRI_SPARK_JARS": f"{jar},{missing}"}, system_jar=jar)

    assert str(missing) in raised.value.reason
    assert "HAKIRI_SPARK_JARS" in raised.value.reason


def test_a_directory_is_not_a_jar(tmp_path: Path, jar: Path) -> None:
    with pytest.raises(SparkSetupError):
        resolve_jdbc_jars([str(tmp_path)], {}, system_jar=jar)


def test_importing_the_module_does_not_import_pyspark() -> None:
    import subprocess
    import sys

    code = "import sys, hakiri.spark.session; print('pyspark' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)

    assert out.stdout.strip() == "False"


class TestJdbcUrlFromPostgresUrl:
    def test_plain_url(self) -> None:
        url, props = jdbc_url_from_postgres_url("postgresql://postgres@127.0.0.1:5433/hakiri_test")

        assert url == "jdbc:postgresql://127.0.0.1:5433/hakiri_test"
        assert props == {"user": "postgres", "driver": "org.postgresql.Driver"}

    def test_password_is_percent_decoded_and_kept_out_of_the_url(self) -> None:
        url, props = jdbc_url_from_postgres_url(
            "postgres://app:p%40ss%3Aw%2Frd@db.example:5432/shop"
        )

        assert url == "jdbc:postgresql://db.example:5432/shop"
        assert props["user"] == "app"
        assert props["password"] == "p@ss:w/rd"
        assert "p@ss" not in url

    def test_unencoded_at_in_password_still_splits_at_the_last_at(self) -> None:
        _, props = jdbc_url_from_postgres_url("postgresql://app:p@ss@db:5432/shop")

        assert props["password"] == "p@ss"

    def test_empty_password_is_kept(self) -> None:
        _, props = jdbc_url_from_postgres_url("postgresql://app:@db/shop")

        assert props["password"] == ""

    def test_database_name_is_re_encoded_for_pgjdbc(self) -> None:
        url, _ = jdbc_url_from_postgres_url("postgresql://db/my%20db+x")

        assert url == "jdbc:postgresql://db/my%20db%2Bx"

    def test_query_parameters_become_properties(self) -> None:
        url, props = jdbc_url_from_postgres_url(
            "postgresql+psycopg://u@h1:5432,h2:5433/d?sslmode=require&application_name=hakiri&connect_timeout=5"
        )

        assert url == "jdbc:postgresql://h1:5432,h2:5433/d"
        assert props["sslmode"] == "require"
        assert props["ApplicationName"] == "hakiri"
        assert props["connectTimeout"] == "5"

    def test_ipv6_host(self) -> None:
        url, _ = jdbc_url_from_postgres_url("postgresql://u@[::1]:5432/d")

        assert url == "jdbc:postgresql://[::1]:5432/d"

    @pytest.mark.parametrize(
        "bad",
        [
            "mysql://u:secret@h/d",
            "postgresql:///d",
            "postgresql://u:secret@%2Fvar%2Frun%2Fpostgresql/d",
            "h/d",
        ],
    )
    def test_unusable_urls_raise_without_leaking_the_password(self, bad: str) -> None:
        with pytest.raises(ValueError) as raised:
            jdbc_url_from_postgres_url(bad)

        assert "secret" not in str(raised.value)
