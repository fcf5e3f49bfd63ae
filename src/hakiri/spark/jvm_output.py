"""Keep the driver JVM's own output off the user's terminal (unless --debug).

The JVM writes to the stderr it inherits from this process: start-up warnings such as
"WARNING: Using incubator modules: jdk.incubator.vector" (Spark 4 adds that module on
every start; the JVM cannot be told to keep quiet about it) and anything log4j prints.
hakiri reports Spark's failures itself, as one line with a hint, so while the JVM
starts, file descriptor 2 points at a log file instead: the JVM keeps that file as its
stderr for its whole life, and this process gets its own stderr back at once.

With `--debug` (HAKIRI_DEBUG=1) or HAKIRI_JVM_LOG=- the JVM keeps the terminal. The log
is HAKIRI_JVM_LOG, else $HAKIRI_CACHE_DIR/logs/jvm.log (default ~/.cache/hakiri/logs),
kept under 10 MB by one rotation.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path

from hakiri.spark.class_sharing import cache_root

__all__ = [
    "DEBUG_ENV",
    "JVM_LOG_ENV",
    "jvm_log_path",
    "jvm_output_to_log",
    "quiet_connect_client",
]

DEBUG_ENV = "HAKIRI_DEBUG"
JVM_LOG_ENV = "HAKIRI_JVM_LOG"
_MAX_BYTES = 10 * 1024 * 1024


def jvm_log_path(env: Mapping[str, str] = os.environ) -> Path | None:
    """Where the JVM's output goes; None when it stays on the terminal."""
    if env.get(DEBUG_ENV) == "1" or env.get(JVM_LOG_ENV) == "-":
        return None
    if env.get(JVM_LOG_ENV):
        return Path(env[JVM_LOG_ENV])
    return cache_root(env) / "logs" / "jvm.log"


@contextmanager
def jvm_output_to_log(env: Mapping[str, str] = os.environ) -> Iterator[None]:
    """Around the start of the driver JVM: its stderr is the log file, ours is restored after."""
    path = jvm_log_path(env)
    if path is None:
        yield
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        if path.is_file() and path.stat().st_size > _MAX_BYTES:
            path.replace(path.with_name(path.name + ".1"))
        log = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    except OSError:
        yield  # no place for a log: the terminal it is, rather than no Spark
        return
    sys.stderr.flush()
    saved = os.dup(2)
    os.dup2(log, 2)
    os.close(log)
    try:
        yield
    finally:
        sys.stderr.flush()
        os.dup2(saved, 2)
        os.close(saved)


# PySpark's Spark Connect client logs every failure that has a query context as one JSON
# document (the message, the Java stack trace, the gRPC call) on stderr, from these loggers.
_CLIENT_LOGGERS = ("DataFrameQueryContextLogger", "SQLQueryContextLogger")


def quiet_connect_client(env: Mapping[str, str] = os.environ) -> None:
    """Keep the Spark Connect client's own error log off stderr (unless --debug): hakiri reports
    each failure itself, as one line with a hint."""
    if env.get(DEBUG_ENV) == "1":
        return
    import logging

    from pyspark.logger import PySparkLogger

    for name in _CLIENT_LOGGERS:
        # PySpark's own logger class, made now (PySpark passes it keywords a plain one refuses).
        PySparkLogger.getLogger(name).setLevel(logging.CRITICAL + 1)
