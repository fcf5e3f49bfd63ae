"""Read one batch of a PostgreSQL source table into Spark, through the JDBC driver.

The batch's rows are a SQL condition (a cursor range, or every row of the table);
Spark splits the read into `num_partitions` parallel queries on a partition column
when the batch's bounds on it are known. Each partition query is its own
statement, so the rows of a batch are read as they are at that moment; the cursor
range, not a snapshot, is what keeps batches apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

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
    """The rows of `config.schema.table` matching `where` (every row when None)."""
    from psycopg import sql

    from hakiri.spark.jdbc import JDBC_DRIVER_CLASS
    from hakiri.spark.session import jdbc_url_from_postgres_url

    jdbc_url, properties = jdbc_url_from_postgres_url(url)
    query = sql.SQL("SELECT * FROM {}").format(sql.Identifier(config.schema_name, table))
    if where is not None:
        query = sql.SQL("{} WHERE {}").format(query, sql.SQL(where))
    reader: Any = (
        spark.read.format("jdbc")
        .option("url", jdbc_url)
        .option("driver", JDBC_DRIVER_CLASS)
        .option("dbtable", f"({query.as_string()}) AS {_ALIAS}")
        .option("fetchsize", str(config.fetch_size))
    )
    for key, value in properties.items():
        if key != "driver":
            reader = reader.option(key, value)
    if split is not None and split.partitions > 1:
        reader = (
            reader.option("partitionColumn", split.column)
            .option("lowerBound", split.lower)
            .option("upperBound", split.upper)
            .option("numPartitions", str(split.partitions))
        )
    return reader.load()


def latest_per_key(frame: DataFrame, key: list[str], cursor: str) -> DataFrame:
    """One row per key: the one with the greatest cursor value (NULL cursors last)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    def col(name: str) -> Any:
        return F.col("`" + name.replace("`", "``") + "`")

    rank = "_hakiri_rank"
    order = Window.partitionBy(*[col(k) for k in key]).orderBy(col(cursor).desc_nulls_last())
    return frame.withColumn(rank, F.row_number().over(order)).where(F.col(rank) == 1).drop(rank)
