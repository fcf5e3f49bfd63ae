"""A failed Spark write of a staging table, as the one line and hint a user reads: a server
that went away is not blamed on the data, and a value the type cannot hold is named as such."""

from __future__ import annotations

from hakiri.destinations.postgres.sql_client import Where, translate_spark_write_error
from hakiri.errors import DestinationUnreachable, LoadError

WHERE = Where("postgresql://u:secret@db:5432/app", "public", "_hakiri_stg_1", "stage rows into")


def test_a_server_shutting_down_mid_write_is_a_lost_connection() -> None:
    raised = RuntimeError(
        "Job aborted. org.postgresql.util.PSQLException: FATAL: terminating connection due "
        "to administrator command\n\tat org.postgresql.core.v3.QueryExecutorImpl"
    )
    error = translate_spark_write_error(raised, WHERE)
    assert isinstance(error, DestinationUnreachable)
    assert error.reason.startswith("lost the connection to PostgreSQL at postgresql://u:***@db")
    assert "terminating connection due to administrator command" in error.reason
    assert "nothing was committed" in (error.hint or "")
    assert "secret" not in error.reason


def test_a_value_the_type_cannot_hold_and_anything_else_get_their_own_hints() -> None:
    bad = RuntimeError(
        "org.postgresql.util.PSQLException: ERROR: value too long for type character varying(3)"
    )
    error = translate_spark_write_error(bad, WHERE)
    assert isinstance(error, LoadError)
    assert (error.hint or "").startswith("a value the target type cannot hold")
    other = translate_spark_write_error(
        RuntimeError("org.postgresql.util.PSQLException: ERROR: disk full"), WHERE
    )
    assert "value" not in (other.hint or "")
