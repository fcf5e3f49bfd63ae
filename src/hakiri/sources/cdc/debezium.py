"""Debezium change events in files, as cdc_mirror's net changes.

A files source with `changes = "debezium"` holds Debezium's envelope, one event per JSON
line: `op` ('c' create, 'r' snapshot read, 'u' update, 'd' delete), `before` and `after`
(the row, as structs), `source.lsn` (PostgreSQL) and `ts_ms`. With a converter that
writes schemas, each line is `{"schema": …, "payload": {…}}` and the payload is read.

Each file is a batch and files load in the order they are planned (their names), one at a
time; within a file, events are ordered by `source.lsn` (else `source.ts_ms`, else
`ts_ms`) and then by their place in the file, and reduced to the net change per key like
the WAL's (`changes.net_changes`). A value Debezium could not read from the WAL (its
placeholder `__debezium_unavailable_value`, for an unchanged TOASTed column) keeps the
target's value. A primary-key update is a delete and a create in Debezium, as here.
A truncate event ('t') fails the batch, naming the file: it is not mirrored.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from hakiri.errors import SourceDataError
from hakiri.guards.spark_types import quoted_name
from hakiri.sources.cdc.changes import LSN_COLUMN, SEQ_COLUMN, net_changes
from hakiri.sources.task_errors import carried_text
from hakiri.spec.modes.cdc_mirror import OP_COLUMN, UNCHANGED_COLUMN

if TYPE_CHECKING:
    from pyspark.sql import DataFrame

__all__ = ["UNAVAILABLE", "debezium_changes"]

UNAVAILABLE = "__debezium_unavailable_value"


def debezium_changes(frame: DataFrame, key: Sequence[str], where: str) -> DataFrame:
    """The net changes of a frame of Debezium events (lazy)."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    if "payload" in frame.columns and isinstance(frame.schema["payload"].dataType, StructType):
        frame = frame.select("payload.*")
    row_type = _row_type(frame, where)
    columns = [(f.name, f.dataType.simpleString()) for f in row_type.fields]
    missing = [k for k in key if k not in row_type.fieldNames()]
    if missing:
        raise SourceDataError(
            f"{where}: the change events' rows have no column {', '.join(missing)} "
            f"(they have {', '.join(row_type.fieldNames())})",
            "set upsert_key to the table's primary key, as the events name it",
        )
    op = F.col("op")
    deleted = op == "d"
    refused = carried_text(
        SourceDataError(
            f"{where}: a truncate (or unknown) change event is not mirrored",
            "take a new snapshot of the table (files with op = 'r'), or remove the event "
            "from the file",
        )
    )
    checked_op = (
        F.when(op.isin("c", "r", "u"), F.lit("u"))
        .when(deleted, F.lit("d"))
        .otherwise(F.raise_error(F.lit(refused)))
    )
    values, unavailable = [], []
    for name, kind in columns:
        value = F.when(deleted, _field("before", name, frame)).otherwise(
            _field("after", name, frame)
        )
        if kind == "string":
            gone = ~deleted & (value == F.lit(UNAVAILABLE))
            unavailable.append(F.when(gone, F.lit(json.dumps(name))))
            value = F.when(gone, F.lit(None)).otherwise(value)
        values.append(value.alias(name))
    listed = F.concat_ws(",", *unavailable) if unavailable else F.lit("")
    order = F.coalesce(*_order_columns(frame)).cast("bigint")
    events = frame.select(
        checked_op.alias(OP_COLUMN),
        order.alias(LSN_COLUMN),
        F.monotonically_increasing_id().alias(SEQ_COLUMN),
        F.when(listed != "", F.concat(F.lit("["), listed, F.lit("]"))).alias(UNCHANGED_COLUMN),
        *values,
    )
    return net_changes(events, columns, key)


def _row_type(frame: DataFrame, where: str) -> Any:
    """The struct of the rows: `after`'s fields, then any only `before` has."""
    from pyspark.sql.types import StructField, StructType

    kinds = {f.name: f.dataType for f in frame.schema.fields}
    if "op" not in kinds or not any(
        isinstance(kinds.get(k), StructType) for k in ("after", "before")
    ):
        raise SourceDataError(
            f"{where} holds no Debezium change events (each line needs `op` and a `before` "
            f"or `after` object; it has {', '.join(kinds) or 'no field'})",
            'point the source at Debezium JSON Lines, or remove changes = "debezium"',
        )
    fields: dict[str, StructField] = {}
    for side in ("after", "before"):
        found = kinds.get(side)
        if isinstance(found, StructType):
            for field in found.fields:
                fields.setdefault(field.name, field)
    return StructType(list(fields.values()))


def _field(side: str, name: str, frame: DataFrame) -> Any:
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    kind = frame.schema[side].dataType if side in frame.columns else None
    if isinstance(kind, StructType) and name in kind.fieldNames():
        return F.col(side).getField(name)
    return F.lit(None)


def _order_columns(frame: DataFrame) -> list[Any]:
    """Where an event's place in the stream is: the source's LSN, else its times."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    found = []
    source = frame.schema["source"].dataType if "source" in frame.columns else None
    if isinstance(source, StructType):
        for name in ("lsn", "ts_ms"):
            if name in source.fieldNames():
                found.append(F.col("source").getField(name))
    if "ts_ms" in frame.columns:
        found.append(F.col(quoted_name("ts_ms")))
    return found or [F.lit(0)]
