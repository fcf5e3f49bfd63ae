"""The PostgreSQL JDBC driver: where hakiri looks for it and what to say when it is missing.

Plain constants, so both the session factory and the error translator read them
without importing each other.
"""

from __future__ import annotations

from pathlib import Path

from hakiri.spark.packages import OFFLINE_ENV, REPOSITORIES_ENV

__all__ = [
    "JARS_ENV",
    "JDBC_DRIVER_CLASS",
    "JDBC_MAVEN_COORDINATE",
    "NO_JDBC_DRIVER_HINT",
    "SYSTEM_JDBC_JAR",
]

JARS_ENV = "HAKIRI_SPARK_JARS"
SYSTEM_JDBC_JAR = Path("/usr/share/java/postgresql.jar")
JDBC_MAVEN_COORDINATE = "org.postgresql:postgresql:42.7.14"
JDBC_DRIVER_CLASS = "org.postgresql.Driver"

NO_JDBC_DRIVER_HINT = (
    f"let hakiri download {JDBC_MAVEN_COORDINATE} once (network access to Maven Central, or "
    f"{REPOSITORIES_ENV} naming a mirror; unset {OFFLINE_ENV}), "
    'or set `[spark] jars = ["/path/to/postgresql.jar"]` in hakiri.toml, '
    f"or {JARS_ENV}=/path/to/postgresql.jar (comma-separated for several), "
    f"or run `sudo apt-get install libpostgresql-jdbc-java` (installs {SYSTEM_JDBC_JAR})"
)
