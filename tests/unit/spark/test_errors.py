"""Spark/py4j/JVM failures as one-line HakiriErrors, from representative Java stack traces (no JVM)."""

from __future__ import annotations

import pytest

from hakiri.errors import (
    DestinationUnreachable,
    HakiriError,
    LoadError,
    SourceDataError,
    SourceUnreachable,
    SparkSetupError,
)
from hakiri.spark.errors import JavaThrowable, parse_java_trace, spark_errors, translate

# What str(Py4JJavaError) looks like: py4j's preamble, then Throwable.printStackTrace.
CONNECTION_REFUSED = """\
An error occurred while calling o50.save.
: org.postgresql.util.PSQLException: Connection to 127.0.0.1:1 refused. Check that the hostname and port are correct and that the postmaster is accepting TCP/IP connections.
\tat org.postgresql.core.v3.ConnectionFactoryImpl.openConnectionImpl(ConnectionFactoryImpl.java:342)
\tat org.postgresql.Driver.connect(Driver.java:291)
\tat java.base/java.lang.Thread.run(Thread.java:840)
Caused by: java.net.ConnectException: Connection refused
\tat java.base/sun.nio.ch.Net.pollConnect(Native Method)
\t... 27 more
"""

WRONG_PASSWORD = """\
An error occurred while calling o77.save.
: org.postgresql.util.PSQLException: FATAL: password authentication failed for user "app"
\tat org.postgresql.core.v3.ConnectionFactoryImpl.doAuthentication(ConnectionFactoryImpl.java:693)
\tat org.postgresql.Driver.connect(Driver.java:291)
"""

PERMISSION_DENIED = """\
An error occurred while calling o89.save.
: org.postgresql.util.PSQLException: ERROR: permission denied for schema locked
  Position: 15
\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2676)
\tat org.apache.spark.sql.execution.datasources.jdbc.JdbcUtils$.tableExists(JdbcUtils.scala:64)
"""

VALUE_TOO_LONG = """\
An error occurred while calling o58.save.
: org.apache.spark.SparkException: Job aborted due to stage failure: Task 1 in stage 0.0 failed 1 times, most recent failure: Lost task 1.0 in stage 0.0 (TID 1) (192.0.2.2 executor driver): java.sql.BatchUpdateException: Batch entry 0 INSERT INTO public.small ("id","v") VALUES (('0'::int8),('secret-row-value')) was aborted: ERROR: value too long for type character varying(1)  Call getNextException to see other errors in the batch.
\tat org.postgresql.jdbc.BatchResultHandler.handleError(BatchResultHandler.java:165)
Caused by: org.postgresql.util.PSQLException: ERROR: value too long for type character varying(1)
\t... 21 more

Driver stacktrace:
\tat org.apache.spark.scheduler.DAGScheduler.failJobAndIndependentStages(DAGScheduler.scala:2935)
Caused by: java.sql.BatchUpdateException: Batch entry 0 INSERT INTO public.small ("id","v") VALUES (('0'::int8),('secret-row-value')) was aborted: ERROR: value too long for type character varying(1)  Call getNextException to see other errors in the batch.
\tat org.postgresql.jdbc.BatchResultHandler.handleError(BatchResultHandler.java:165)
\t... 1 more
Caused by: org.postgresql.util.PSQLException: ERROR: value too long for type character varying(1)
\tat org.postgresql.core.v3.QueryExecutorImpl.receiveErrorResponse(QueryExecutorImpl.java:2676)
\t... 21 more
"""

DRIVER_MISSING = """\
An error occurred while calling o72.save.
: java.lang.ClassNotFoundException: org.postgresql.Driver
\tat java.base/java.net.URLClassLoader.findClass(URLClassLoader.java:445)
\tat org.apache.spark.sql.execution.datasources.jdbc.DriverRegistry$.register(DriverRegistry.scala:47)
"""

NO_SUITABLE_DRIVER = """\
An error occurred while calling o79.save.
: java.sql.SQLException: No suitable driver
\tat java.sql/java.sql.DriverManager.getDriver(DriverManager.java:299)
"""

MALFORMED = """\
An error occurred while calling o71.save.
: org.apache.spark.SparkException: [FAILED_READ_FILE.NO_HINT] Encountered error while reading file file:///data/in%20box/a.csv.  SQLSTATE: KD001
\tat org.apache.spark.sql.errors.QueryExecutionErrors$.cannotReadFilesError(QueryExecutionErrors.scala:920)
Caused by: org.apache.spark.SparkException: [MALFORMED_RECORD_IN_PARSING.WITHOUT_SUGGESTION] Malformed records are detected in record parsing: [2,b,null].
Parse Mode: FAILFAST. To process malformed records as null result, try setting the option 'mode' as 'PERMISSIVE'.  SQLSTATE: 22023
\tat org.apache.spark.sql.catalyst.util.FailureSafeParser.parse(FailureSafeParser.scala:83)
\t... 22 more
Caused by: java.lang.NumberFormatException: For input string: "x"
\tat java.base/java.lang.Double.parseDouble(Double.java:651)
\t... 28 more
"""

PATH_NOT_FOUND = """\
org.apache.spark.sql.AnalysisException: [PATH_NOT_FOUND] Path does not exist: file:/data/in%20box/nope.csv. SQLSTATE: 42K03
\tat org.apache.spark.sql.errors.QueryCompilationErrors$.dataPathNotExistError(QueryCompilationErrors.scala:1500)
"""

OUT_OF_MEMORY = """\
An error occurred while calling o91.collectToPython.
: java.lang.OutOfMemoryError: Java heap space
\tat java.base/java.util.Arrays.copyOf(Arrays.java:3537)
"""

UNRESOLVED_COLUMN = """\
org.apache.spark.sql.AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] A column, variable, or function parameter with name `x` cannot be resolved. Did you mean one of the following? [`id`]. SQLSTATE: 42703;
'Project ['x]
+- Range (0, 1, step=1, splits=Some(2))

\tat org.apache.spark.sql.errors.QueryCompilationErrors$.unresolvedAttributeError(QueryCompilationErrors.scala:412)
"""


def _translated(trace: str, context: str = "staging orders", **kwargs) -> HakiriError:
    error = translate(RuntimeError(trace), context, **kwargs)
    assert "\n" not in error.reason
    assert "\tat " not in error.reason and "at org." not in error.reason
    assert len(error.reason) <= 400
    assert error.args == (error.reason,)
    return error


# ---------------------------------------------------------------- parsing


def test_parse_java_trace_reads_the_cause_chain() -> None:
    chain = parse_java_trace(MALFORMED)

    assert [t.simple_name for t in chain] == [
        "SparkException",
        "SparkException",
        "NumberFormatException",
    ]
    assert chain[0].cls == "org.apache.spark.SparkException"
    assert chain[1].message.splitlines()[1].startswith("Parse Mode: FAILFAST.")
    assert chain[2].first_line == 'For input string: "x"'


def test_parse_java_trace_skips_frames_and_suppressed_exceptions() -> None:
    trace = (
        "java.io.IOException: outer\n"
        "\tat a.B.c(B.java:1)\n"
        "\tSuppressed: java.lang.IllegalStateException: ignored\n"
        "\t\tat a.B.d(B.java:2)\n"
        "Caused by: java.io.EOFException\n"
        "\t... 3 more\n"
    )

    assert parse_java_trace(trace) == [
        JavaThrowable("java.io.IOException", "outer"),
        JavaThrowable("java.io.EOFException", ""),
    ]


def test_parse_java_trace_of_plain_text_is_empty() -> None:
    assert parse_java_trace("Answer from Java side is empty") == []


def test_scala_object_names_are_simplified() -> None:
    assert JavaThrowable("org.apache.spark.sql.errors.QueryErrors$", "m").simple_name == (
        "QueryErrors"
    )


# ---------------------------------------------------------------- PostgreSQL over JDBC


def test_connection_refused_is_destination_unreachable() -> None:
    error = _translated(CONNECTION_REFUSED)

    assert isinstance(error, DestinationUnreachable)
    assert error.reason.startswith("cannot connect to the PostgreSQL destination: Connection to ")
    assert "host and port" in (error.hint or "")


def test_the_same_failure_reading_a_source_is_source_unreachable() -> None:
    error = _translated(CONNECTION_REFUSED, side="source")

    assert isinstance(error, SourceUnreachable)
    assert "PostgreSQL source" in error.reason


def test_wrong_password_is_unreachable_with_a_credentials_hint() -> None:
    error = _translated(WRONG_PASSWORD)

    assert isinstance(error, DestinationUnreachable)
    assert error.reason == (
        'the PostgreSQL destination refused the login: password authentication failed for user "app"'
    )
    assert "password" in (error.hint or "")


def test_permission_denied_is_a_load_error() -> None:
    error = _translated(PERMISSION_DENIED)

    assert isinstance(error, LoadError)
    assert error.reason == "the PostgreSQL destination refused: permission denied for schema locked"
    assert "grant" in (error.hint or "")


def test_a_refused_batch_reports_postgres_words_not_the_rows() -> None:
    error = _translated(VALUE_TOO_LONG)

    assert isinstance(error, LoadError)
    assert error.reason == (
        "the PostgreSQL destination refused: value too long for type character varying(1)"
    )
    assert "secret-row-value" not in error.reason


def test_missing_postgres_driver_names_every_way_to_install_it() -> None:
    error = _translated(DRIVER_MISSING)

    assert isinstance(error, SparkSetupError)
    assert error.reason == (
        "the PostgreSQL JDBC driver (org.postgresql.Driver) is not on Spark's classpath"
    )
    for option in ("[spark] jars", "HAKIRI_SPARK_JARS", "libpostgresql-jdbc-java"):
        assert option in (error.hint or "")


def test_no_suitable_driver_is_a_setup_error_too() -> None:
    error = _translated(NO_SUITABLE_DRIVER)

    assert isinstance(error, SparkSetupError)
    assert "HAKIRI_SPARK_JARS" in (error.hint or "")


@pytest.mark.parametrize(
    "message",
    [
        "No suitable driver found for jdbc:postgresql://db/shop?user=app&password=hunter2",
        "cannot open postgresql://app:hunter2@db:5432/shop",
        "connection string host=db password=hunter2 dbname=shop failed",
    ],
)
def test_passwords_are_masked_wherever_they_appear(message: str) -> None:
    error = _translated(f"java.lang.IllegalStateException: {message}")

    assert "hunter2" not in error.reason
    assert "***" in error.reason


def test_explicit_secrets_are_masked() -> None:
    trace = "java.lang.IllegalStateException: bad value hunter2 in option"

    error = _translated(trace, secrets=["hunter2"])

    assert "hunter2" not in error.reason


# ---------------------------------------------------------------- files, memory, anything else


def test_malformed_records_are_a_source_data_error_naming_the_file() -> None:
    error = _translated(MALFORMED)

    assert isinstance(error, SourceDataError)
    assert error.reason == "malformed record in /data/in box/a.csv"
    assert 'on_malformed = "drop"' in (error.hint or "")


def test_path_not_found_is_a_source_data_error() -> None:
    error = _translated(PATH_NOT_FOUND)

    assert isinstance(error, SourceDataError)
    assert error.reason == "file not found: /data/in box/nope.csv"


def test_out_of_memory_says_which_setting_to_raise() -> None:
    error = _translated(OUT_OF_MEMORY)

    assert isinstance(error, SparkSetupError)
    assert "spark.driver.memory" in (error.hint or "")


def test_anything_else_is_the_innermost_message_on_one_line() -> None:
    error = _translated(UNRESOLVED_COLUMN, "transforming orders")

    assert type(error) is HakiriError
    assert error.reason.startswith(
        "transforming orders: AnalysisException: [UNRESOLVED_COLUMN.WITH_SUGGESTION] "
        "A column, variable, or function parameter with name `x` cannot be resolved."
    )
    assert "SQLSTATE" not in error.reason and "Project" not in error.reason
    assert "--debug" in (error.hint or "")


def test_the_innermost_cause_with_a_message_wins() -> None:
    trace = (
        "org.apache.spark.SparkException: Job aborted due to stage failure\n"
        "Caused by: java.io.IOException: No space left on device\n"
        "Caused by: java.lang.RuntimeException\n"
    )

    error = _translated(trace, "writing")

    assert error.reason == "writing: IOException: No space left on device"


def test_fallback_class_for_unrecognised_failures() -> None:
    error = _translated("java.lang.IllegalArgumentException: bad master", fallback=SparkSetupError)

    assert isinstance(error, SparkSetupError)


def test_huge_messages_are_cut() -> None:
    error = _translated("java.lang.IllegalStateException: " + "x" * 5000)

    assert error.reason.endswith("…")


def test_a_dead_jvm_is_a_setup_error() -> None:
    from py4j.protocol import Py4JNetworkError

    error = translate(Py4JNetworkError("Answer from Java side is empty"), "staging")

    assert isinstance(error, SparkSetupError)
    assert error.reason.startswith("lost the connection to Spark's JVM")


def test_a_gateway_that_never_started_is_a_setup_error() -> None:
    from pyspark.errors import PySparkRuntimeError

    exc = PySparkRuntimeError(errorClass="JAVA_GATEWAY_EXITED", messageParameters={})

    error = translate(exc, "starting Spark")

    assert isinstance(error, SparkSetupError)
    assert "java -version" in (error.hint or "")


def test_hakiri_errors_are_returned_as_they_are() -> None:
    original = LoadError("already one line", "hint")

    assert translate(original) is original


# ---------------------------------------------------------------- the context manager


def test_spark_errors_translates_py4j_failures_and_keeps_the_cause() -> None:
    from py4j.protocol import Py4JNetworkError

    failure = Py4JNetworkError("An error occurred while trying to connect to the Java server")

    with pytest.raises(SparkSetupError) as raised, spark_errors("staging"):
        raise failure

    assert raised.value.__cause__ is failure


def test_spark_errors_leaves_python_bugs_and_hakiri_errors_alone() -> None:
    with pytest.raises(KeyError), spark_errors("staging"):
        raise KeyError("a bug stays a bug")
    with pytest.raises(LoadError), spark_errors("staging"):
        raise LoadError("mine")
