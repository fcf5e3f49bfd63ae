"""Jars by Maven coordinates, resolved once into a cache that later runs use without the network.

Spark users name jars by coordinates (`spark.jars.packages`), and Spark resolves
them with its own Ivy at every start: a second or more, and a network round trip
each time. hakiri resolves a set of coordinates once, with Spark's own resolver
(`spark-submit --packages`, output captured), into
`$HAKIRI_CACHE_DIR/jars/<key>/jars/`, records the jar list in `<key>.json`, and
from then on hands those files to `spark.jars`: no resolution, no network.

Repositories, first match: `HAKIRI_MAVEN_REPOSITORIES` (comma-separated URLs);
else the mirror of Maven Central that the Maven client uses (`~/.m2/settings.xml`,
then `$MAVEN_HOME/conf/settings.xml` and `/etc/maven/settings.xml`); else Spark's
default, Maven Central. `HAKIRI_SPARK_OFFLINE=true` forbids a resolution: the
jars must be cached (or given as paths) already.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import tempfile
import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from hakiri.errors import SparkSetupError
from hakiri.spark.class_sharing import cache_root

__all__ = [
    "OFFLINE_ENV",
    "REPOSITORIES_ENV",
    "PackageSet",
    "cached_packages",
    "maven_repositories",
    "resolve_packages",
]

REPOSITORIES_ENV = "HAKIRI_MAVEN_REPOSITORIES"
OFFLINE_ENV = "HAKIRI_SPARK_OFFLINE"
_TRUTHY = frozenset({"1", "true", "yes", "on"})
_RESOLVE_TIMEOUT_SECONDS = 600
# Maven settings that may name a mirror, the user's first (Maven merges them the same way).
_SETTINGS = ("~/.m2/settings.xml", "$MAVEN_HOME/conf/settings.xml", "/etc/maven/settings.xml")


@dataclass(frozen=True)
class PackageSet:
    """Maven coordinates and the repositories to resolve them from, with their cache entry."""

    coordinates: tuple[str, ...]
    repositories: tuple[str, ...]
    cache: Path  # $HAKIRI_CACHE_DIR/jars

    @property
    def key(self) -> str:
        text = "\n".join([*self.coordinates, "--", *self.repositories])
        return hashlib.sha256(text.encode()).hexdigest()[:20]

    @property
    def ivy_dir(self) -> Path:
        return self.cache / self.key

    @property
    def manifest(self) -> Path:
        return self.cache / f"{self.key}.json"

    def cached_jars(self) -> tuple[str, ...] | None:
        """The jars a previous resolution recorded, if every one of them is still there."""
        try:
            document = json.loads(self.manifest.read_text())
        except (OSError, ValueError):
            return None
        jars = tuple(str(j) for j in document.get("jars", ()))
        if document.get("coordinates") != list(self.coordinates) or not jars:
            return None
        return jars if all(Path(j).is_file() for j in jars) else None


def cached_packages(
    coordinates: Sequence[str], env: Mapping[str, str] = os.environ
) -> tuple[str, ...] | None:
    """The cached jars for `coordinates`, or None when they were never resolved here."""
    return _package_set(coordinates, env).cached_jars()


def _package_set(coordinates: Sequence[str], env: Mapping[str, str]) -> PackageSet:
    return PackageSet(tuple(coordinates), maven_repositories(env), cache_root(env) / "jars")


def resolve_packages(
    coordinates: Sequence[str], env: Mapping[str, str] = os.environ
) -> tuple[str, ...]:
    """Local jar paths for `coordinates` and everything they depend on: from the cache, else
    resolved now (once) with Spark's resolver. Raises SparkSetupError naming the fix."""
    packages = _package_set(coordinates, env)
    cached = packages.cached_jars()
    if cached is not None:
        return cached
    if env.get(OFFLINE_ENV, "").strip().lower() in _TRUTHY:
        raise SparkSetupError(
            f"{', '.join(coordinates)} is not in hakiri's jar cache and {OFFLINE_ENV} forbids "
            "downloading it",
            f"run once with network access (or {REPOSITORIES_ENV} pointing at a reachable "
            "mirror), or give the jar's path in `[spark] jars`",
        )
    return _resolve(packages, env)


def _resolve(packages: PackageSet, env: Mapping[str, str]) -> tuple[str, ...]:
    """Resolve under a lock, unless another process did meanwhile."""
    from hakiri.spark.java import require_java

    require_java(env)
    packages.ivy_dir.mkdir(parents=True, exist_ok=True)
    # One resolution at a time per set (first runs of several processes, serve replicas):
    # whoever waited finds the jars the other one recorded.
    with open(packages.cache / f"{packages.key}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        cached = packages.cached_jars()
        if cached is not None:
            return cached
        return _download(packages, env)


def _download(packages: PackageSet, env: Mapping[str, str]) -> tuple[str, ...]:
    """`spark-submit --packages` with an empty Python script: Spark's Ivy resolves and
    downloads into `packages.ivy_dir`, and nothing else runs."""
    argv = [
        _spark_submit(),
        "--conf",
        f"spark.jars.ivy={packages.ivy_dir}",
        "--packages",
        ",".join(packages.coordinates),
    ]
    if packages.repositories:
        argv += ["--repositories", ",".join(packages.repositories)]
    with tempfile.TemporaryDirectory(prefix="hakiri-resolve-") as scratch:
        script = Path(scratch) / "resolved.py"
        script.write_text("")
        child_env = {**env, "PYSPARK_PYTHON": env.get("PYSPARK_PYTHON", sys.executable)}
        try:
            done = subprocess.run(
                [*argv, str(script)],
                capture_output=True,
                text=True,
                env=child_env,
                timeout=_RESOLVE_TIMEOUT_SECONDS,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise _failed(packages, f"spark-submit did not finish: {exc}") from None
    jars = tuple(sorted(str(p) for p in (packages.ivy_dir / "jars").glob("*.jar")))
    if done.returncode != 0 or not jars:
        raise _failed(packages, _reason(done.stdout + done.stderr))
    document = {
        "coordinates": list(packages.coordinates),
        "repositories": list(packages.repositories),
        "jars": list(jars),
    }
    written = packages.manifest.with_suffix(".json.tmp")
    written.write_text(json.dumps(document, indent=2))
    os.replace(written, packages.manifest)  # readers see the whole list or none
    return jars


def _failed(packages: PackageSet, why: str) -> SparkSetupError:
    where = ", ".join(packages.repositories) or "Maven Central"
    return SparkSetupError(
        f"could not download {', '.join(packages.coordinates)} from {where}: {why}",
        f"check the network, or set {REPOSITORIES_ENV} to a Maven mirror you can reach "
        "(docs/operations.md), or give local jars in `[spark] jars`",
    )


def _reason(output: str) -> str:
    """The line of Ivy's output that says what went wrong, else its last line."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    for marker in ("unresolved dependency", "not found", "UnknownHost", "Connection refused"):
        for line in lines:
            if marker in line:
                return line[line.index(marker) :].strip(" []:!")[:300]
    return lines[-1][:300] if lines else "spark-submit failed without a message"


def _spark_submit() -> str:
    import pyspark

    return str(Path(pyspark.__file__).parent / "bin" / "spark-submit")


def maven_repositories(env: Mapping[str, str] = os.environ) -> tuple[str, ...]:
    """Where to resolve from: HAKIRI_MAVEN_REPOSITORIES, else the Maven client's mirror of
    Maven Central, else () for Spark's default (Maven Central itself)."""
    listed = tuple(u.strip() for u in env.get(REPOSITORIES_ENV, "").split(",") if u.strip())
    if listed:
        return listed
    home = env.get("HOME") or str(Path.home())
    for raw in _SETTINGS:
        if raw.startswith("$MAVEN_HOME") and not env.get("MAVEN_HOME"):
            continue
        path = Path(raw.replace("$MAVEN_HOME", env.get("MAVEN_HOME", "")).replace("~", home, 1))
        mirror = central_mirror(path)
        if mirror:
            return (mirror,)
    return ()


def central_mirror(settings: Path) -> str | None:
    """The URL of the first mirror in a Maven settings.xml that stands in for Maven Central
    (`mirrorOf` `*`, `central` or `external:*`, not blocked); None when there is none."""
    try:
        root = ET.parse(settings).getroot()
    except (OSError, ET.ParseError):
        return None
    for element in root.iter():
        if _local(element.tag) != "mirror":
            continue
        fields = {_local(child.tag): (child.text or "").strip() for child in element}
        targets = {t.strip() for t in fields.get("mirrorOf", "").split(",")}
        if fields.get("blocked", "").lower() == "true" or not fields.get("url"):
            continue
        if targets & {"*", "central", "external:*"}:
            return fields["url"]
    return None


def _local(tag: str) -> str:
    return tag.rsplit("}", 1)[-1]
