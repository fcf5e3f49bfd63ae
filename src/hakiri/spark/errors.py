"""The one place where Spark and JVM failures become HakiriErrors.

Wrap every Spark action (and session start) in `spark_errors(...)`:

    with spark_errors("staging orders into PostgreSQL", secrets=[password]):
        frame.write.format("jdbc")...save()

A Java failure reaches Python as one of pyspark's exceptions (a Spark Connect client's
`SparkConnectException`s, a classic session's `CapturedException`s or gateway errors),
carrying the Java stack trace as text. `translate`
reads the chain of exceptions out of that text (outermost first, then each
"Caused by:"), recognises the failures a user can fix (no JDBC driver,
PostgreSQL unreachable or refusing, malformed or missing files, bad encodings,
out of memory, a dead JVM) and otherwise reports the innermost Java message.
Either way the reason is one line, without a stack frame, with passwords masked;
the original exception stays attached as `__cause__` for `--debug`.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Literal
from urllib.parse import unquote

from hakiri.errors import (
    DestinationUnreachable,
    EngineLost,
    HakiriError,
    LoadError,
    SourceDataError,
    SourceUnreachable,
    SparkSetupError,
)
from hakiri.spark.jdbc import JDBC_DRIVER_CLASS, NO_JDBC_DRIVER_HINT
from hakiri.spark.liveness import is_engine_stopping, is_engine_unavailable, lost_engine
from hakiri.spec.interpolate import mask_url

__all__ = ["JavaThrowable", "Side", "parse_java_trace", "spark_errors", "translate"]

Side = Literal["source", "destination"]

_MAX_REASON = 400  # characters; a reason is one line, not a data dump

# What a classic (in-process JVM) session's gateway raises, and the modules it raises from.
_GATEWAY_ERRORS = frozenset({"Py4JError", "Py4JJavaError", "Py4JNetworkError"})
_GATEWAY_MODULES = ("java_gateway", "clientserver", "protocol")
_ENGINE_ERRORS = frozenset({"CapturedException", "SparkConnectException", "PySparkRuntimeError"})

_DEBUG_HINT = "run again with --debug to see the full Java stack trace"
_MALFORMED_HINT = 'fix the file, or set `on_malformed = "drop"` in the source config to skip and count bad records'
_CONNECT_HINT = (
    "check the host and port of the connection and that PostgreSQL accepts TCP connections there"
)
_AUTH_HINT = (
    "check the user, password and database of the connection "
    "(keep the password in an environment variable: ${VAR})"
)
_PERMISSION_HINT = (
    "grant the connection's user what the load needs: USAGE and CREATE on the schema, "
    "SELECT/INSERT/UPDATE/DELETE on the tables"
)
_MEMORY_HINT = (
    "give Spark more memory in hakiri.toml, e.g. `[spark.conf] "
    '"spark.driver.memory" = "4g"`, or load smaller batches'
)
_JVM_HINT = (
    "Spark's JVM stopped (often out of memory); check `java -version` (17+) and the "
    "[spark] settings in hakiri.toml, then run again with --debug"
)


@dataclass(frozen=True)
class JavaThrowable:
    """One exception of a Java cause chain: its class and its (possibly multi-line) message."""

    cls: str
    message: str

    @property
    def simple_name(self) -> str:
        """`org.apache.spark.SparkException` -> `SparkException` (Scala's `$` suffixes dropped;
        Spark's internal `ExtendedAnalysisException` is the AnalysisException users know)."""
        name = self.cls.rsplit(".", 1)[-1].rstrip("$")
        return "AnalysisException" if name == "ExtendedAnalysisException" else name

    @property
    def first_line(self) -> str:
        return _first_line(self.message)


@contextmanager
def spark_errors(
    context: str,
    *,
    side: Side = "destination",
    secrets: Iterable[str] = (),
    fallback: type[HakiriError] = HakiriError,
) -> Iterator[None]:
    """Turn Spark/JVM failures inside the block into one-line HakiriErrors.

    `context` says what was being done ("staging batch 3 of orders"); it starts
    the reason of errors that are not recognised. `side` says whether a JDBC
    failure is about a source or the destination. `secrets` (e.g. the password
    of the connection) are masked wherever they appear. `fallback` is the class
    for unrecognised failures (SparkSetupError while starting a session).
    HakiriErrors and ordinary Python exceptions pass through untouched.
    """
    secrets = tuple(secrets)
    try:
        yield
    except HakiriError:
        raise
    except BaseException as exc:
        if not is_spark_failure(exc):
            raise
        raise translate(exc, context, side=side, secrets=secrets, fallback=fallback) from exc


def is_spark_failure(exc: BaseException) -> bool:
    """True for exceptions raised on behalf of the engine (not for pyspark API misuse)."""
    kind = type(exc)
    names = {k.__name__ for k in kind.__mro__}
    if names & _GATEWAY_ERRORS or "RpcError" in names:  # RpcError: a Connect call, raw
        return True
    if (kind.__module__ or "").startswith("pyspark.errors"):
        # SparkConnectException (a Connect server's answer) and CapturedException (a classic
        # session's) come from the engine; PySparkRuntimeError covers a session failing to
        # start. PySparkTypeError and PySparkValueError are bugs in our calls.
        return bool(names & _ENGINE_ERRORS)
    if isinstance(exc, ConnectionError):
        # A socket error on the classic gateway's connection means the JVM is gone.
        tb = exc.__traceback__
        while tb is not None:
            if tb.tb_frame.f_globals.get("__name__", "").endswith(_GATEWAY_MODULES):
                return True
            tb = tb.tb_next
    return False


def translate(
    exc: BaseException,
    context: str = "",
    *,
    side: Side = "destination",
    secrets: Iterable[str] = (),
    fallback: type[HakiriError] = HakiriError,
) -> HakiriError:
    """The HakiriError that says what `exc` (raised by Spark or the JVM) means for the user."""
    if isinstance(exc, HakiriError):
        return exc
    if is_engine_unavailable(exc) or is_engine_stopping(_trace_text(exc)):
        # The engine itself went away (or is going), whatever was being done.
        error: HakiriError = EngineLost(*lost_engine(exc))
    else:
        error = _classify(_chain_of(exc), context, side, fallback)
    error.reason = _one_line(error.reason, tuple(secrets))
    error.args = (error.reason,)
    return error


# ---------------------------------------------------------------- reading the chain


# A throwable line: `java.sql.SQLException: message`, maybe after "Caused by: ".
_HEADER = re.compile(r"^(?:Caused by: )?((?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*)(?::\s?(.*))?$")
_FRAME = re.compile(r"^\s+(?:at |\.\.\. \d+ more|Suppressed: |Caused by: )")


def parse_java_trace(text: str) -> list[JavaThrowable]:
    """The exception chain in a printed Java stack trace, outermost first.

    Accepts what `Throwable.printStackTrace` writes (also after the classic gateway's
    "An error occurred while calling o12.save." preamble). Frames, suppressed
    exceptions and "... N more" lines are skipped; message continuation lines
    are kept. Returns [] when `text` holds no Java exception line.
    """
    chain: list[JavaThrowable] = []
    cls: str | None = None
    lines: list[str] = []
    in_frames = False
    for raw in text.splitlines():
        line = raw[2:] if raw.startswith(": ") else raw
        header = None if line[:1].isspace() else _HEADER.match(line)
        if header and (cls is None or in_frames or line.startswith("Caused by: ")):
            if cls is not None:
                chain.append(JavaThrowable(cls, "\n".join(lines).strip()))
            cls, lines, in_frames = header.group(1), [header.group(2) or ""], False
        elif cls is not None and _FRAME.match(line):
            in_frames = True
        elif cls is not None and not in_frames:
            lines.append(line)
    if cls is not None:
        chain.append(JavaThrowable(cls, "\n".join(lines).strip()))
    return chain


# A Spark Connect client's words for a server-side failure: the message (after "(java.Class) "
# when the class has no PySpark counterpart), then, when the server sends it, a blank line,
# "JVM stacktrace:" and the chain, whose first line is the class alone (its message is the one
# above).
_JVM_SECTION = "\n\nJVM stacktrace:\n"
_CONNECT_CLASS = re.compile(r"^\(((?:[A-Za-z_$][\w$]*\.)+[A-Za-z_$][\w$]*)\) ", re.S)


def _chain_of(exc: BaseException) -> list[JavaThrowable]:
    text = _trace_text(exc)
    head, section, trace = text.partition(_JVM_SECTION)
    connect = bool(section) or bool(_CONNECT_CLASS.match(head))
    chain = parse_java_trace(trace if section else text) if text else []
    if connect:
        named = _CONNECT_CLASS.match(head)
        message = head[named.end() :].strip() if named else head.strip()
        if chain and not chain[0].message:
            chain[0] = JavaThrowable(chain[0].cls, message)
        elif not chain:
            cls = named.group(1) if named else type(exc).__name__
            chain = [JavaThrowable(cls, message)]
    if not chain:
        chain = [JavaThrowable(type(exc).__name__, str(exc) or type(exc).__name__)]
    return chain


def _trace_text(exc: BaseException) -> str:
    # pyspark's CapturedException keeps the Java trace (with every "Caused by:") in
    # _stackTrace; its str() may or may not append it, depending on a SQL conf.
    trace = getattr(exc, "_stackTrace", None)
    if isinstance(trace, str) and trace.strip():
        return trace
    try:
        # The classic gateway's Java error asks the JVM for the printed stack trace.
        return str(exc)
    except Exception:
        return ""


# ---------------------------------------------------------------- classifying


def _classify(
    chain: list[JavaThrowable], context: str, side: Side, fallback: type[HakiriError]
) -> HakiriError:
    text = "\n".join(f"{t.cls}: {t.message}" for t in chain)
    for rule in (_gateway, _jdbc_driver, _postgres, _file_data, _memory):
        error = rule(chain, text, side)
        if error is not None:
            return error
    root = _innermost(chain)
    detail = (
        f"{root.simple_name}: {_plain(root.first_line)}" if root.first_line else root.simple_name
    )
    return fallback(f"{context}: {detail}" if context else detail, _DEBUG_HINT)


def _gateway(chain: list[JavaThrowable], text: str, side: Side) -> HakiriError | None:
    if "JAVA_GATEWAY_EXITED" in text or "Java gateway process exited" in text:
        return SparkSetupError(
            "Spark's JVM exited before it started",
            "check `java -version` (17 or newer), JAVA_HOME and the [spark] settings in "
            "hakiri.toml; run again with --debug to see the JVM's output",
        )
    names = {t.cls for t in chain}
    if names & {
        "Py4JNetworkError",
        "ConnectionRefusedError",
        "ConnectionResetError",
        "BrokenPipeError",
    } or ("Answer from Java side is empty" in text):
        return SparkSetupError(
            f"lost the connection to Spark's JVM: {_plain(chain[-1].first_line)}", _JVM_HINT
        )
    return None


def _jdbc_driver(chain: list[JavaThrowable], text: str, side: Side) -> HakiriError | None:
    for t in chain:
        missing = t.first_line.strip()
        if t.simple_name == "ClassNotFoundException" and missing.endswith("Driver"):
            what = (
                f"the PostgreSQL JDBC driver ({JDBC_DRIVER_CLASS}) is not on Spark's classpath"
                if missing == JDBC_DRIVER_CLASS
                else f"JDBC driver class {missing} is not on Spark's classpath"
            )
            return SparkSetupError(what, NO_JDBC_DRIVER_HINT)
        if t.simple_name == "SQLException" and missing.startswith("No suitable driver"):
            return SparkSetupError(
                "no JDBC driver accepts the connection URL (is it a jdbc:postgresql:// URL, "
                "and is the PostgreSQL driver on Spark's classpath?)",
                NO_JDBC_DRIVER_HINT,
            )
    return None


_CONNECT = re.compile(
    r"Connection to \S+ refused|The connection attempt failed|Connection refused|"
    r"UnknownHostException|No route to host|connect timed out|Connection timed out|"
    r"SocketTimeoutException|Network is unreachable",
    re.IGNORECASE,
)
_AUTH = re.compile(
    r"password authentication failed|no pg_hba\.conf entry|role \"[^\"]*\" does not exist|"
    r"database \"[^\"]*\" does not exist|authentication, but no password was provided|"
    r"SCRAM-based authentication|is not permitted to log in",
    re.IGNORECASE,
)
_PERMISSION = re.compile(r"permission denied|must be owner of", re.IGNORECASE)
_NETWORK_CLASSES = {
    "ConnectException",
    "UnknownHostException",
    "SocketTimeoutException",
    "NoRouteToHostException",
}
_SQL_CLASSES = {"PSQLException", "SQLException", "BatchUpdateException", *_NETWORK_CLASSES}


def _postgres(chain: list[JavaThrowable], text: str, side: Side) -> HakiriError | None:
    sql = [t for t in chain if t.simple_name in _SQL_CLASSES]
    if not sql:
        return None
    # The innermost SQL error is PostgreSQL's own words; outer ones (BatchUpdateException)
    # repeat the INSERT statement, row values and all: keep only what follows "was aborted:".
    root = sql[-1]
    message = _plain(_strip_severity(root.first_line.rpartition(" was aborted: ")[2]))
    where = "source" if side == "source" else "destination"
    unreachable = SourceUnreachable if side == "source" else DestinationUnreachable
    if _CONNECT.search(text) or root.simple_name in _NETWORK_CLASSES:
        # pgjdbc's own words name the host and port; the socket error beneath does not.
        outer = next((t for t in sql if t.simple_name == "PSQLException"), root)
        message = _plain(outer.first_line).split(". Check that", 1)[0]
        return unreachable(f"cannot connect to the PostgreSQL {where}: {message}", _CONNECT_HINT)
    if _AUTH.search(text):
        return unreachable(f"the PostgreSQL {where} refused the login: {message}", _AUTH_HINT)
    refused = SourceUnreachable if side == "source" else LoadError
    if _PERMISSION.search(root.message):
        return refused(f"the PostgreSQL {where} refused: {message}", _PERMISSION_HINT)
    return refused(f"the PostgreSQL {where} refused: {message}", _DEBUG_HINT)


# Paths as Spark words them; they may hold spaces, so they end at ". SQLSTATE" or the line's end.
_READING_FILE = re.compile(
    r"(?:reading file|Path does not exist:)\s*(.+?)\.?(?=\s+SQLSTATE|\s*$)"
    r"|File (.+?) does not exist",
    re.MULTILINE,
)
_MALFORMED = re.compile(
    r"MALFORMED_RECORD_IN_PARSING|Malformed records are detected|BadRecordException|Malformed CSV record"
)


def _file_data(chain: list[JavaThrowable], text: str, side: Side) -> HakiriError | None:
    if _MALFORMED.search(text):
        shown = _file_in(text)
        where = f" in {shown}" if shown else ""
        return SourceDataError(f"malformed record{where}", _MALFORMED_HINT)
    if (
        "PATH_NOT_FOUND" in text
        or "Path does not exist" in text
        or any(t.simple_name == "FileNotFoundException" for t in chain)
    ):
        shown = _file_in(text)
        return SourceDataError(
            f"file not found: {shown}" if shown else "a source file was not found",
            "restore the file, or run `hakiri apply` again so that the plan sees it is gone",
        )
    if (
        "CHARSET" in text
        or "UnsupportedCharsetException" in text
        or "MALFORMED_CHARACTER_CODING" in text
    ):
        return SourceDataError(
            f"cannot decode a source file: {_plain(_innermost(chain).first_line)}",
            "set `encoding` in the source config to the files' encoding, e.g. 'utf-8' or 'latin-1'",
        )
    if "PARQUET_TYPE_ILLEGAL" in text:
        return SourceDataError(
            f"unsupported Parquet column type: {_plain(_innermost(chain).first_line)}",
            "write the file with a type Spark reads (for pyarrow timestamps: coerce_timestamps='us')",
        )
    return None


def _memory(chain: list[JavaThrowable], text: str, side: Side) -> HakiriError | None:
    if any(t.simple_name == "OutOfMemoryError" for t in chain) or "Java heap space" in text:
        return SparkSetupError("Spark ran out of memory (Java heap space)", _MEMORY_HINT)
    return None


# ---------------------------------------------------------------- wording


def _innermost(chain: list[JavaThrowable]) -> JavaThrowable:
    """The deepest cause that says something; wrappers rarely do."""
    for t in reversed(chain):
        if t.first_line:
            return t
    return chain[-1]


def _file_in(text: str) -> str | None:
    match = _READING_FILE.search(text)
    if not match:
        return None
    path = unquote(match.group(1) or match.group(2))
    for prefix in ("file:///", "file://", "file:"):
        if path.startswith(prefix):
            return "/" + path[len(prefix) :].lstrip("/")
    return path


def _first_line(text: str) -> str:
    for line in text.splitlines():
        if line.strip():
            return line.strip()
    return ""


_SQLSTATE = re.compile(r"\s*SQLSTATE: \w+\.?")


def _plain(line: str) -> str:
    """A Java message line without Spark's trailing SQLSTATE and pgjdbc's batch chatter."""
    line = _SQLSTATE.sub("", line)
    return line.replace("  Call getNextException to see other errors in the batch.", "").strip()


def _strip_severity(line: str) -> str:
    # pgjdbc prefixes the server's severity: "ERROR: permission denied for schema x".
    return re.sub(r"^(?:ERROR|FATAL|PANIC):\s+", "", line)


# postgresql://user:secret@host -> postgresql://user:***@host, anywhere in a message.
_URL_PASSWORD = re.compile(r"([A-Za-z][\w+.-]*://[^\s:/@]*):([^\s@/]*)@")


def _one_line(reason: str, secrets: tuple[str, ...]) -> str:
    line = " ".join(reason.split())
    for secret in secrets:
        if secret:
            line = line.replace(secret, "***")
    line = mask_url(_URL_PASSWORD.sub(r"\1:***@", line))
    if len(line) > _MAX_REASON:
        line = line[: _MAX_REASON - 1].rstrip() + "…"
    return line
