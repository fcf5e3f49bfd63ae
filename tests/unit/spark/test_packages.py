"""Where jars named by Maven coordinates are resolved from: pure, no JVM, no network."""

from __future__ import annotations

from pathlib import Path

from hakiri.spark.packages import central_mirror, maven_repositories

SETTINGS = """<?xml version="1.0" encoding="UTF-8"?>
<settings xmlns="http://maven.apache.org/SETTINGS/1.2.0">
  <mirrors>
    <mirror>
      <id>maven-default-http-blocker</id>
      <mirrorOf>external:http:*</mirrorOf>
      <url>http://0.0.0.0/</url>
      <blocked>true</blocked>
    </mirror>
    <mirror>
      <id>only-for-snapshots</id>
      <mirrorOf>snapshots</mirrorOf>
      <url>https://snapshots.example.com/maven</url>
    </mirror>
    <mirror>
      <id>corp</id>
      <mirrorOf>central,snapshots</mirrorOf>
      <url>https://nexus.example.com/repository/maven-central/</url>
    </mirror>
  </mirrors>
</settings>
"""


def _home_with_settings(tmp_path: Path, text: str) -> dict[str, str]:
    (tmp_path / ".m2").mkdir()
    (tmp_path / ".m2" / "settings.xml").write_text(text)
    return {"HOME": str(tmp_path)}


def test_the_maven_clients_mirror_of_central_is_used(tmp_path: Path) -> None:
    env = _home_with_settings(tmp_path, SETTINGS)

    assert central_mirror(tmp_path / ".m2" / "settings.xml") == (
        "https://nexus.example.com/repository/maven-central/"
    )
    assert maven_repositories(env) == ("https://nexus.example.com/repository/maven-central/",)


def test_the_environment_wins_over_the_settings(tmp_path: Path) -> None:
    env = _home_with_settings(tmp_path, SETTINGS)
    env["HAKIRI_MAVEN_REPOSITORIES"] = " https://a.example/m2 ,https://b.example/m2"

    assert maven_repositories(env) == ("https://a.example/m2", "https://b.example/m2")


def test_blocked_unrelated_or_broken_settings_name_no_mirror(tmp_path: Path) -> None:
    only_blocked = tmp_path / "blocked.xml"
    only_blocked.write_text(SETTINGS.replace("central,snapshots", "snapshots"))
    broken = tmp_path / "broken.xml"
    broken.write_text("<settings><mirrors>")

    assert central_mirror(only_blocked) is None
    assert central_mirror(broken) is None
    assert central_mirror(tmp_path / "missing.xml") is None
