"""Reading the context store as other readers do: every table hakiri writes must open with
delta-rs (the project's own reader: plan, `context show`, any agent's) and with Spark, and both
must see the same table."""

from __future__ import annotations

from pathlib import Path
from typing import Any


def read_context_table(path: Path, spark: Any = None) -> list[dict[str, Any]]:
    """The Delta table's rows as delta-rs reads them, after checking that Spark (`spark`, else
    the test process's session) opens it too and sees the same columns and number of rows."""
    from deltalake import DeltaTable

    from hakiri.spark.session import running_session

    spark = spark or running_session()
    assert spark is not None, "no Spark session in this process: request the `spark` fixture"
    arrow = DeltaTable(str(path)).to_pyarrow_table()
    frame = spark.read.format("delta").load(f"file://{Path(path).resolve()}")
    assert frame.columns == arrow.column_names, (frame.columns, arrow.column_names)
    assert frame.count() == arrow.num_rows, f"Spark and delta-rs disagree on {path}"
    return list(arrow.to_pylist())


def check_readers(store: Path, spark: Any) -> list[str]:
    """Open every table of the store with both readers (`read_context_table`); their names."""
    from hakiri.destinations.context.inspect import list_tables

    names = list_tables(store)
    for name in names:
        read_context_table(store / name, spark)
    return names


def as_a_source_reads(frame: Any) -> Any:
    """The frame with each column typed as a source's read types it over Spark Connect: cast to
    its type given as a PySpark type object, whose strings name their collation (UTF8_BINARY),
    as a mapInArrow schema does. (A frame made from a DDL string has plain strings, and would
    hide what the context store must cope with.)"""
    from pyspark.sql import functions as F

    return frame.select(
        *(
            F.col(f"`{field.name}`").cast(field.dataType).alias(field.name)
            for field in frame.schema.fields
        )
    )
