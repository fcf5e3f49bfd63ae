"""Read one batch of a PostgreSQL source table into the engine.

The batch's rows are a SQL condition (a cursor range, or every row of the table); the read
is split into `num_partitions` parallel queries on a partition column when the batch's bounds
on it are known. Each partition query is its own statement, so the rows of a batch are read as
they are at that moment; the cursor range, not a snapshot, is what keeps batches apart.

Every engine reads the same way (`hakiri.spark.pg_reader`; Sail has no JDBC reader): each
partition's query runs in an engine task as `COPY … TO STDOUT`, its columns converted to text
in PostgreSQL (ISO dates, UTC timestamps, base64 bytes) and cast in the engine to the types
Spark's JDBC reader gave them before, so targets keep their column types.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from hakiri.guards.spark_types import quoted_name
from hakiri.spec.pipeline import PostgresSourceConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["PartitionSplit", "latest_per_key", "read_table"]

# Spark's name for the derived table; the user's columns keep their own names.
_ALIAS = "hakiri_batch"


@dataclass(frozen=True)
class PartitionSplit:
    """How Spark splits the read: a column and the (inclusive) bounds of its values in the batch."""

    column: str
    lower: str
    upper: str
    partitions: int


def read_table(
    spark: SparkSession,
    url: str,
    config: PostgresSourceConfig,
    table: str,
    where: str | None,
    split: PartitionSplit | None = None,
) -> DataFrame:
    """The rows of `config.schema.table` matching `where` (every row when None), on any
    engine: each partition's query runs in an engine task as COPY (`pg_reader`)."""
    from psycopg import sql

    from hakiri.spark.pg_reader import as_text, columns_of, read_queries, spark_type

    columns = columns_of(url, config.schema_name, table)
    projection = sql.SQL(", ").join(as_text(name, kind) for name, kind in columns)
    base = sql.SQL("SELECT {} FROM {}").format(
        projection, sql.Identifier(config.schema_name, table)
    )
    conditions = [sql.SQL(where)] if where is not None else []
    kinds = dict(columns)
    parts: list[Any] = [None]
    if split is not None and split.partitions > 1:
        parts = _partitions(split, kinds.get(split.column, ""))
    queries = []
    for part in parts:
        clauses = [*conditions, *([part] if part is not None else [])]
        query = base
        if clauses:
            query = sql.SQL("{} WHERE {}").format(
                base, sql.SQL(" AND ").join(sql.SQL("({})").format(c) for c in clauses)
            )
        queries.append(query.as_string())
    return read_queries(spark, url, queries, [(n, spark_type(k)) for n, k in columns])


_SPLITTABLE = ("smallint", "integer", "bigint", "real", "double precision", "numeric")


def _partitions(split: PartitionSplit, kind: str) -> list[Any]:
    """The predicates of `split.partitions` ranges of equal width between the bounds (the
    first also takes NULLs, as Spark's JDBC partitioning does); one range for a column that
    is not numeric."""
    from psycopg import sql

    base = kind.split("(")[0]
    if base not in _SPLITTABLE:
        return [None]
    column = sql.Identifier(split.column)
    low, high = sql.Literal(split.lower), sql.Literal(split.upper)
    n = split.partitions

    def bound(i: int) -> Any:
        return sql.SQL("({}::numeric + ({}::numeric - {}::numeric) * {} / {})").format(
            low, high, low, sql.Literal(i), sql.Literal(n)
        )

    parts = []
    for i in range(n):
        if i == 0:
            parts.append(sql.SQL("{} < {} OR {} IS NULL").format(column, bound(1), column))
        elif i == n - 1:
            parts.append(sql.SQL("{} >= {}").format(column, bound(i)))
        else:
            parts.append(
                sql.SQL("{} >= {} AND {} < {}").format(column, bound(i), column, bound(i + 1))
            )
    return parts


def latest_per_key(frame: DataFrame, key: list[str], cursor: str) -> DataFrame:
    """One row per key: the one with the greatest cursor value (NULL cursors last)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def col(name: str) -> Any:
        return F.col(quoted_name(name))

    rank = "_hakiri_rank"
    order = Window.partitionBy(*[col(k) for k in key]).orderBy(col(cursor).desc_nulls_last())
    return frame.withColumn(rank, F.row_number().over(order)).where(F.col(rank) == 1).drop(rank)
