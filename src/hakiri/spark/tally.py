"""Counts carried out of an engine's tasks, for an engine that runs hakiri's Python in this process.

Apache Spark counts what a pass leaves out with observed metrics; Sail has none. Sail runs
in the hakiri process (`spark.sail`) and runs a `mapInArrow` function in this interpreter,
so a step of the pass itself can count: `Tally.sift` puts one `mapInArrow` step on a frame
that drops the rows a flag column marks and records, per Spark partition, how many rows had
each flag bit. The counts are read after the pass (`Tally.counts`), with no pass of their
own. A partition that runs twice (a second action over the same frame) records the same
counts again, not twice as many.
"""

from __future__ import annotations

import threading
import uuid
import weakref
from collections.abc import Callable, Iterator, Sequence
from typing import Any

__all__ = ["Tally", "mark_in_process", "tallies_in_process"]

_LOCK = threading.Lock()
# token -> Spark partition id -> counts per flag bit
_COUNTS: dict[str, dict[int, tuple[int, ...]]] = {}
_PARTITION = "_hakiri_partition"


def tallies_in_process(spark: Any) -> bool:
    """Does `spark` run hakiri's Python functions in this process (Sail started by hakiri)?"""
    return bool(getattr(spark, "_hakiri_in_process", False))


def mark_in_process(spark: Any) -> Any:
    """Record that `spark`'s engine runs in this process (read by `tallies_in_process`)."""
    spark._hakiri_in_process = True
    return spark


class Tally:
    """Counts of flag bits, one per bit, over the rows a frame's pass saw."""

    def __init__(self, bits: int) -> None:
        self.bits = bits
        self.token = uuid.uuid4().hex
        with _LOCK:
            _COUNTS[self.token] = {}
        weakref.finalize(self, _forget, self.token)

    def sift(self, frame: Any, columns: Sequence[Any], flags: Any, drop: int) -> Any:
        """`frame` projected to `columns` (Columns) without the rows whose `flags` (an integer
        Column) has a bit of `drop`; every bit of every row is counted on the way."""
        from pyspark.sql import functions as F
        from pyspark.sql.types import StructField, StructType

        fields = frame.select(*columns).schema.fields
        # Positional names through the Python step (Sail 0.7 cannot resolve a name with a dot
        # in a mapInArrow schema), the real ones after it.
        inner = [f"_c{i}" for i in range(len(fields))]
        marked = frame.select(
            *[column.alias(name) for column, name in zip(columns, inner, strict=True)],
            flags.cast("long").alias("_hakiri_flags"),
            F.spark_partition_id().alias(_PARTITION),
        )
        out = StructType(
            [StructField(n, f.dataType, f.nullable) for n, f in zip(inner, fields, strict=True)]
        )
        sifted = marked.mapInArrow(_sifter(self.token, self.bits, drop, len(fields)), out)
        return sifted.select(*[F.col(n).alias(f.name) for n, f in zip(inner, fields, strict=True)])

    def counts(self) -> tuple[int, ...]:
        """Per flag bit, the rows that had it, summed over the partitions that ran."""
        with _LOCK:
            parts = list(_COUNTS.get(self.token, {}).values())
        return tuple(sum(part[i] for part in parts) for i in range(self.bits))


def _forget(token: str) -> None:
    with _LOCK:
        _COUNTS.pop(token, None)


def _record(token: str, partition: int, counts: tuple[int, ...]) -> None:
    with _LOCK:
        if token in _COUNTS:
            _COUNTS[token][partition] = counts


def _sifter(
    token: str, bits: int, drop: int, width: int
) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The function each task runs: count the flag bits, yield the rows without a `drop` bit."""

    def sift(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa
        import pyarrow.compute as pc

        # Imported here, not captured: the counts must reach this module, not a pickled copy.
        from hakiri.spark import tally

        counts = [0] * bits
        partition = None
        for batch in batches:
            if not batch.num_rows:
                continue
            flags = batch.column(width)
            if partition is None:
                partition = batch.column(width + 1)[0].as_py()
            flagged = flags.filter(pc.not_equal(flags, 0))
            data = batch.select(list(range(width)))
            if len(flagged):
                for i in range(bits):
                    hit = pc.not_equal(pc.bit_wise_and(flagged, pa.scalar(1 << i, pa.int64())), 0)
                    counts[i] += pc.sum(hit.cast(pa.int64())).as_py() or 0
                dropped = pc.not_equal(pc.bit_wise_and(flags, pa.scalar(drop, pa.int64())), 0)
                data = data.filter(pc.invert(dropped))
            yield data
        if partition is not None:  # a partition without rows has nothing to count
            tally._record(token, partition, tuple(counts))

    return sift
