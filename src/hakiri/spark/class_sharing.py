"""Class-data sharing for the driver JVM: start Spark from an archive of the classes it loads.

Most of a cold SparkSession's seconds go to loading and verifying the ten thousand
classes of Spark's jars. Java can write the classes an application loaded into an
archive when it exits (`-XX:ArchiveClassesAtExit`) and map that archive at the
next start (`-XX:SharedArchiveFile`). Measured on the reference machine (2 cores):
SparkSession start 4.2 s -> 2.5 s, its first job 1.8 s -> 0.9 s.

An archive fits one JVM and one class path, so it is named by a fingerprint of
both (the Java installation, every jar of Spark's class path with its size and
mtime). It is written by a warm-up process of its own (`python -m
hakiri.spark.class_archive ARCHIVE`), started in the background after a run that
needed Spark found none: it starts a session with the dump option, runs a small
job, stops, waits for its JVM to finish writing and exit, and only then renames
the file into place. A JVM maps an archive that is cut short with a SIGBUS, so a
run only ever sees a whole archive or none (`-Xshare:auto` starts without one).
An exclusive claim file makes concurrent runs start one warm-up.

Off with HAKIRI_JVM_CLASS_SHARING=0, or when `[spark] conf` sets its own
`-Xshare`/`SharedArchiveFile` options. The archives live under
$HAKIRI_CACHE_DIR (default $XDG_CACHE_HOME/hakiri, else ~/.cache/hakiri)/jvm.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path

__all__ = [
    "CLASS_SHARING_ENV",
    "archive_path",
    "cache_root",
    "class_sharing_options",
    "spark_home",
    "spark_submit",
    "start_warm_up",
]

CLASS_SHARING_ENV = "HAKIRI_JVM_CLASS_SHARING"
_CLAIM_SECONDS = 600.0  # a claim this old without an archive was a warm-up that died
QUIET_JVM_LOG = "-Xlog:disable -Xlog:all=error:stderr"


def class_sharing_options(driver_options: str, env: Mapping[str, str] = os.environ) -> str:
    """JVM options that map the archive for this class path, if there is one; '' otherwise."""
    archive = archive_path(driver_options, env)
    if archive is None or not archive.is_file():
        return ""
    return f"-XX:SharedArchiveFile={archive} -Xshare:auto {QUIET_JVM_LOG}"


def start_warm_up(driver_options: str, env: Mapping[str, str] = os.environ) -> bool:
    """Start the background process that writes the archive, unless it exists or another run
    claimed it (a claim older than ten minutes was a warm-up that died); True if started."""
    archive = archive_path(driver_options, env)
    if archive is None or archive.is_file():
        return False
    claim = archive.with_suffix(".claim")
    try:
        if time.time() - claim.stat().st_mtime > _CLAIM_SECONDS:
            claim.unlink(missing_ok=True)
    except OSError:
        pass
    try:
        with open(claim, "x", encoding="utf-8") as marker:
            marker.write(f"{os.getpid()}\n")
    except OSError:
        return False
    subprocess.Popen(
        [sys.executable, "-m", "hakiri.spark.class_archive", str(archive)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        start_new_session=True,  # outlives this run, never gets its signals
        env={**os.environ, CLASS_SHARING_ENV: "0"},
    )
    return True


def archive_path(driver_options: str, env: Mapping[str, str]) -> Path | None:
    """Where the archive for this class path lives; None when class sharing is off."""
    if env.get(CLASS_SHARING_ENV, "1").strip().lower() in ("0", "false", "no", "off"):
        return None
    if "SharedArchiveFile" in driver_options or "-Xshare" in driver_options:
        return None  # the user manages class-data sharing
    classpath = _spark_jars()
    if not classpath:
        return None
    directory = cache_root(env) / "jvm"
    try:
        directory.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return directory / f"{_fingerprint(classpath)}.jsa"


def spark_home() -> Path | None:
    """The Spark distribution pyspark runs (SPARK_HOME, else pyspark's own); None without pyspark."""
    try:
        from pyspark.find_spark_home import _find_spark_home
    except ImportError:
        return None
    return Path(os.environ.get("SPARK_HOME") or _find_spark_home())


def spark_submit() -> Path | None:
    """That distribution's `bin/spark-submit`, if it has one."""
    home = spark_home()
    submit = home / "bin" / "spark-submit" if home is not None else None
    return submit if submit is not None and submit.is_file() else None


def _spark_jars() -> list[Path]:
    """The jars of the driver's class path: pyspark's own Spark distribution."""
    home = spark_home()
    return sorted((home / "jars").glob("*.jar")) if home is not None else []


def _fingerprint(classpath: list[Path]) -> str:
    digest = hashlib.sha256()
    java_home = os.environ.get("JAVA_HOME", "")
    digest.update(f"{java_home}\0".encode())
    release = Path(java_home, "release") if java_home else None
    if release is not None and release.is_file():
        digest.update(release.read_bytes())
    else:
        digest.update(str(Path(shutil.which("java") or "java").resolve()).encode())
    for jar in classpath:
        stat = jar.stat()
        digest.update(f"{jar}\0{stat.st_size}\0{stat.st_mtime_ns}\n".encode())
    return "spark-" + digest.hexdigest()[:20]


def cache_root(env: Mapping[str, str]) -> Path:
    if env.get("HAKIRI_CACHE_DIR"):
        return Path(env["HAKIRI_CACHE_DIR"])
    base = env.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "hakiri"
