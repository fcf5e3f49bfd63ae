"""Staging: a DataFrame's rows written into a fresh UNLOGGED table beside the target.

The staging table lives in the target's schema (same database), so the load from
it into the target is one transaction. Spark writes the rows through a
`StageWriter`: COPY from every partition by default (`copy_writer.py`), or Spark's
JDBC writer (`JdbcStageWriter`, `writer = "jdbc"`).

Spark's JDBC writer quotes column names without escaping embedded double quotes
and matches them case-insensitively, so the table is created and written with
positional names (c1, c2, …) and renamed to the real names afterwards: any
column name PostgreSQL accepts can be staged.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Protocol

from psycopg import sql

from hakiri.destinations.base import LoadRequest, TargetColumn
from hakiri.destinations.postgres.names import check_identifier, mark_table
from hakiri.destinations.postgres.types import spark_to_postgres
from hakiri.errors import LoadError
from hakiri.guards.spark_types import quoted_name

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "STAGING_PREFIX",
    "JdbcStageWriter",
    "StageWriter",
    "create_staging_table",
    "create_table_like",
    "finish_staging_table",
    "positional_names",
    "staged_columns",
    "staging_name",
    "writable_frame",
]

STAGING_PREFIX = "_hakiri_stg_"


class StageWriter(Protocol):
    """Appends a DataFrame's rows to an existing table (Spark runs the write)."""

    def write(self, frame: Any, schema: str, table: str) -> int | None:
        """Append every row of `frame` to `schema.table`, whose columns have the frame's names and
        order; the number of rows written, or None when the writer does not know it."""
        ...


class JdbcStageWriter:
    """Spark's JDBC writer in append mode, with pgjdbc's batched-insert rewriting."""

    def __init__(self, url: str, *, batch_size: int = 10_000) -> None:
        self.url = url
        self.batch_size = batch_size

    def write(self, frame: Any, schema: str, table: str) -> None:
        from hakiri.spark.jdbc import JDBC_DRIVER_CLASS
        from hakiri.spark.session import jdbc_url_from_postgres_url

        jdbc_url, properties = jdbc_url_from_postgres_url(self.url)
        writer = (
            frame.write.format("jdbc")
            .mode("append")
            .option("url", jdbc_url)
            # Spark splices dbtable into its SQL as is: pass it already quoted.
            .option("dbtable", sql.Identifier(schema, table).as_string())
            .option("driver", JDBC_DRIVER_CLASS)
            .option("batchsize", str(self.batch_size))
            .option("reWriteBatchedInserts", "true")
        )
        for key, value in properties.items():
            writer = writer.option(key, value)
        writer.save()


def staging_name(request: LoadRequest) -> str:
    """`_hakiri_stg_` + 16 hex digits: 28 bytes, and unique even for concurrent runs of one batch."""
    seed = "\x1f".join(
        (
            request.pipeline_id,
            request.target_table,
            request.batch_id,
            request.run_id,
            uuid.uuid4().hex,
        )
    )
    return STAGING_PREFIX + hashlib.sha256(seed.encode()).hexdigest()[:16]


def staged_columns(spark_schema: Any) -> tuple[TargetColumn, ...]:
    """The staging table's columns for a Spark schema (a StructType), with PostgreSQL types."""
    columns: list[TargetColumn] = []
    seen: set[str] = set()
    for field in spark_schema.fields:
        spark_type = field.dataType.simpleString()
        pg_type = spark_to_postgres(spark_type)
        if pg_type is None:
            raise LoadError(
                f"column {field.name!r} has Spark type {spark_type}, which hakiri cannot load into PostgreSQL",
                "convert it in a transform (to_json(...) for arrays, maps and structs; a cast otherwise); "
                "see docs/types.md",
            )
        check_identifier(field.name, "column")
        if field.name in seen:
            raise LoadError(
                f"the rows have two columns named {field.name!r}",
                "rename one of them in a transform; a table cannot have duplicate column names",
            )
        seen.add(field.name)
        columns.append(TargetColumn(field.name, pg_type, bool(field.nullable)))
    if not columns:
        raise LoadError("the rows to load have no columns", "select at least one column")
    return tuple(columns)


def positional_names(columns: Sequence[TargetColumn]) -> list[str]:
    """c1, c2, … (with more leading underscores if a real column could be mistaken for one of them)."""
    real = {column.name for column in columns}
    prefix = "c"
    while any(f"{prefix}{i}" in real for i in range(1, len(columns) + 1)):
        prefix = "_" + prefix
    return [f"{prefix}{i}" for i in range(1, len(columns) + 1)]


def writable_frame(
    frame: Any,
    columns: Sequence[TargetColumn],
    *,
    blank: Sequence[str] = (),
    tags: Sequence[str] = (),
) -> Any:
    """The frame's `columns` (by name, in that order) under positional names, then the columns
    `tags` (a one-pass writer's) as they are, in ONE projection: '' in the string columns
    `blank` as NULL (what a text column of the target stores for an empty value, see
    docs/types.md), all-NULL (void) columns cast to string, which Spark's JDBC writer cannot
    write otherwise."""
    from pyspark.sql import functions as F

    types = {field.name: field.dataType.simpleString() for field in frame.schema.fields}
    values = []
    for positional, column in zip(positional_names(columns), columns, strict=True):
        value = F.col(quoted_name(column.name))
        if column.name in blank:
            value = F.nullif(value, F.lit(""))
        if types[column.name] == "void":
            value = value.cast("string")
        values.append(value.alias(positional))
    return frame.select(*values, *[F.col(quoted_name(name)) for name in tags])


def create_staging_table(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: Sequence[TargetColumn],
    request: LoadRequest,
) -> None:
    """CREATE UNLOGGED TABLE with positional column names, marked for gc (in the caller's transaction)."""
    name = sql.Identifier(schema, table)
    body = sql.SQL(", ").join(
        sql.SQL("{} {}").format(sql.Identifier(positional), sql.SQL(column.type))
        for positional, column in zip(positional_names(columns), columns, strict=True)
    )
    conn.execute(sql.SQL("CREATE UNLOGGED TABLE {} ({})").format(name, body))
    mark_table(conn, name, "staging", request)


def create_table_like(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    target: sql.Identifier,
    request: LoadRequest,
) -> None:
    """CREATE TABLE … (LIKE target INCLUDING ALL), marked for gc: a staging table that can take
    the target's place (blue_green swaps it in), so it is logged and has the target's columns,
    defaults, checks and indexes."""
    name = sql.Identifier(schema, table)
    conn.execute(sql.SQL("CREATE TABLE {} (LIKE {} INCLUDING ALL)").format(name, target))
    mark_table(conn, name, "staging", request)


def finish_staging_table(
    conn: psycopg.Connection[Any],
    schema: str,
    table: str,
    columns: Sequence[TargetColumn],
    rows: int | None = None,
) -> int:
    """Give the written columns their real names (`columns`; none for a table created with
    them); the number of rows staged (`rows` when the writer counted them, else counted here)."""
    name = sql.Identifier(schema, table)
    for positional, column in zip(positional_names(columns), columns, strict=True):
        conn.execute(
            sql.SQL("ALTER TABLE {} RENAME COLUMN {} TO {}").format(
                name, sql.Identifier(positional), sql.Identifier(column.name)
            )
        )
    if rows is not None:
        return rows
    row = conn.execute(sql.SQL("SELECT count(*) FROM {}").format(name)).fetchone()
    return int(row[0]) if row else 0
