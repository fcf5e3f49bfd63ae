"""Is there a Java that Spark can start on? Asked before the JVM is launched.

Without this check a missing or old Java surfaces as pyspark's "Java gateway
process exited before sending its port number" (or an UnsupportedClassVersionError
buried in the gateway's output), which names neither the cause nor the fix.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Mapping
from functools import lru_cache
from pathlib import Path

from hakiri.errors import SparkSetupError

__all__ = ["MIN_JAVA", "find_java", "java_major_version", "require_java"]

MIN_JAVA = 17  # Spark 4 is built for Java 17 and refuses anything older

_INSTALL_HINT = (
    "install Java 17 or newer (`sudo apt-get install -y openjdk-17-jre-headless`), "
    "or point JAVA_HOME at one"
)
# `java -version` prints e.g. `openjdk version "17.0.15" 2025-04-15` or `java version "1.8.0_392"`.
_QUOTED = re.compile(r'version "([^"]+)"')
_NUMBERS = re.compile(r"\d+")


def java_major_version(text: str) -> int | None:
    """The feature release of a `java -version` output or a bare version string.

    '17.0.15' -> 17, '1.8.0_392' -> 8 (the old "1.x" scheme), '21' -> 21, '21-ea' -> 21.
    None when no version can be read from `text`.
    """
    quoted = _QUOTED.search(text)
    version = quoted.group(1) if quoted else text.strip()
    parts = _NUMBERS.findall(version.split("+", 1)[0])
    if not parts:
        return None
    major = int(parts[0])
    if major == 1 and len(parts) > 1:
        return int(parts[1])
    return major


def find_java(env: Mapping[str, str] = os.environ) -> Path | None:
    """The java binary Spark's launcher will use: $JAVA_HOME/bin/java, else `java` on PATH."""
    home = env.get("JAVA_HOME", "").strip()
    if home:
        return Path(home) / "bin" / "java"
    found = shutil.which("java", path=env.get("PATH"))
    return Path(found) if found else None


def require_java(env: Mapping[str, str] = os.environ, minimum: int = MIN_JAVA) -> int:
    """Check that Spark's Java is present and new enough; return its major version.

    Raises SparkSetupError (with the apt line) when there is no Java, it cannot
    run, or it is older than `minimum`.
    """
    java = find_java(env)
    if java is None:
        raise SparkSetupError("Java not found: Spark needs Java 17 or newer", _INSTALL_HINT)
    if not java.is_file():
        raise SparkSetupError(
            f"JAVA_HOME points at {java.parent.parent}, which has no bin/java",
            f"fix or unset JAVA_HOME; {_INSTALL_HINT}",
        )
    major = _java_major(str(java))
    if major is None:
        raise SparkSetupError(f"cannot tell the version of {java}", _INSTALL_HINT)
    if major < minimum:
        raise SparkSetupError(
            f"Java {major} at {java} is too old: Spark 4 needs Java {minimum} or newer",
            _INSTALL_HINT,
        )
    return major


@lru_cache(maxsize=8)
def _java_major(java: str) -> int | None:
    # Cached per binary: a long-running `serve` asks once, not once per run.
    try:
        done = subprocess.run(
            [java, "-version"],
            capture_output=True,
            text=True,
            errors="replace",
            timeout=60,
            stdin=subprocess.DEVNULL,
        )
    except (OSError, subprocess.SubprocessError) as exc:
        raise SparkSetupError(f"cannot run {java}: {exc}", _INSTALL_HINT) from None
    # Java 8 and later print the banner on stderr; some builds use stdout.
    return java_major_version(done.stderr + "\n" + done.stdout)
