"""Dataset validators as Spark aggregations over the staged batch (the Delta context store).

The counterpart of the PostgreSQL probes in `validators`: each validator is ONE
small aggregation over the staged DataFrame whose single result row comes to
the driver, and the verdict is judged by `verdicts`, so the check ids, messages
and observed values are the ones a PostgreSQL load reports. Rows never reach
the driver; fk_integrity alone runs a second job, and only when it fails, to
quote at most three orphan values.

Every probe reads `frame` again: persist it first when its lineage is costly.

As in PostgreSQL, '' in a string column is NULL (that is how hakiri publishes
it), a key with a NULL part is not a duplicate, and column names are matched
case-sensitively. Freshness reads string columns as ISO 8601 timestamps with a
safe cast (Spark 4 runs with ANSI mode on); an offset-less value is read in the
Spark session's time zone, which hakiri's sessions set to UTC.

A probe that cannot run (a missing column, ref_table or ref_column, a freshness
column that is not a timestamp, text that is not one, fk columns of types that
cannot be compared) raises `ValidationFailed` naming the validator.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, date, datetime, timedelta
from typing import TYPE_CHECKING, Any

from hakiri.errors import HakiriError, ValidationFailed
from hakiri.guards.spark_types import quoted_name
from hakiri.quality.verdicts import (
    COLUMN_NAMES_HINT,
    EXAMPLE_LIMIT,
    ProbeResult,
    fk_column_hint,
    fk_uncomparable_hint,
    freshness_text_hint,
    judge_cardinality,
    judge_duplicate_key,
    judge_fk_integrity,
    judge_freshness,
    judge_row_count,
    not_a_timestamp,
    probe_failed,
)
from hakiri.spec.quality import (
    CardinalityValidator,
    DatasetValidator,
    DuplicateKeyValidator,
    FkIntegrityValidator,
    FreshnessValidator,
    RowCountValidator,
)

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame
    from pyspark.sql.types import DataType

__all__ = ["probe_frame"]

_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_RETRY_HINT = "fix the validator in [pipeline.validate] or the rows it checks, then apply again"


def probe_frame(
    frame: DataFrame,
    validators: Sequence[DatasetValidator],
    *,
    ref_table: Callable[[str], DataFrame],
) -> list[ProbeResult]:
    """Run every validator against the staged batch; one ProbeResult each, in order.

    `ref_table` resolves a validator's `ref_table` (a context-store table name) to
    a DataFrame, and raises when there is no such table.
    """
    if not validators:
        return []
    probe = _FrameProbe(frame, ref_table)
    results: list[ProbeResult] = []
    for validator in validators:
        with _reported_as(validator):
            results.append(probe.run(validator))
    return results


class _FrameProbe:
    def __init__(self, frame: DataFrame, ref_table: Callable[[str], DataFrame]):
        self.frame = frame
        self.ref_table = ref_table
        self.types: dict[str, DataType] = {f.name: f.dataType for f in frame.schema.fields}

    def run(self, validator: DatasetValidator) -> ProbeResult:
        if isinstance(validator, RowCountValidator):
            return judge_row_count(validator, self.frame.count())
        if isinstance(validator, FreshnessValidator):
            return self.freshness(validator)
        if isinstance(validator, FkIntegrityValidator):
            return self.fk_integrity(validator)
        if isinstance(validator, CardinalityValidator):
            return self.cardinality(validator)
        return self.duplicate_key(validator)

    def value(self, validator: DatasetValidator, column: str) -> Column:
        """A staged column as the load will publish it: '' is NULL in string columns."""
        from pyspark.sql import functions as F

        if column not in self.types:
            raise probe_failed(
                validator, f'column "{column}" does not exist', _column_hint(validator)
            )
        value = F.col(quoted_name(column))
        return F.nullif(value, F.lit("")) if _is_text(self.types[column]) else value

    def freshness(self, v: FreshnessValidator) -> ProbeResult:
        from pyspark.sql import functions as F
        from pyspark.sql.types import DateType, TimestampNTZType, TimestampType

        value = self.value(v, v.column)
        dtype = self.types[v.column]
        newest: datetime | date | None
        if _is_text(dtype):
            parsed = F.try_to_timestamp(value)
            micros, unreadable, example = self._one(
                F.unix_micros(F.max(parsed)),
                F.count_if(value.isNotNull() & parsed.isNull()),
                F.min(F.when(parsed.isNull(), value)),
            )
            if unreadable:
                values, are = ("value", "is not an ISO 8601 timestamp")
                if unreadable != 1:
                    values, are = ("values", "are not ISO 8601 timestamps")
                raise probe_failed(
                    v,
                    f'{unreadable:,} {values} in {v.column} {are} (e.g. "{example}")',
                    freshness_text_hint(v),
                )
            newest = _instant(micros)
        elif isinstance(dtype, TimestampType):
            # As epoch microseconds: the exact instant, whatever the driver's time zone.
            newest = _instant(self._one(F.unix_micros(F.max(value)))[0])
        elif isinstance(dtype, TimestampNTZType | DateType):
            newest = self._one(F.max(value))[0]  # naive timestamp or date, read as UTC
        else:
            raise not_a_timestamp(v, dtype.simpleString())
        return judge_freshness(v, newest, datetime.now(UTC))

    def fk_integrity(self, v: FkIntegrityValidator) -> ProbeResult:
        from pyspark.sql import functions as F

        value = self.value(v, v.column)
        ref = self._ref(v)
        staged_type, ref_type = self.types[v.column], ref.schema[v.ref_column].dataType
        if not _comparable(staged_type, ref_type):
            raise probe_failed(
                v,
                f"{v.column} ({staged_type.simpleString()}) cannot be compared with "
                f"{v.ref_table}.{v.ref_column} ({ref_type.simpleString()})",
                fk_uncomparable_hint(v),
            )
        staged = self.frame.select(value.alias("v")).where(F.col("v").isNotNull())
        refs = ref.select(F.col(quoted_name(v.ref_column)).alias("r"))
        orphans = staged.join(refs, staged["v"] == refs["r"], "left_anti")
        count = orphans.count()
        examples: list[str] = []
        if count:
            # A second, tiny job: a few distinct orphans to quote, in text order as in PostgreSQL.
            quoted = orphans.select(F.col("v").cast("string").alias("e")).distinct()
            examples = [row[0] for row in quoted.orderBy("e").limit(EXAMPLE_LIMIT).collect()]
        return judge_fk_integrity(v, count, examples, f"{v.ref_table}({v.ref_column})")

    def cardinality(self, v: CardinalityValidator) -> ProbeResult:
        from pyspark.sql import functions as F

        return judge_cardinality(v, self._one(F.count_distinct(self.value(v, v.column)))[0])

    def duplicate_key(self, v: DuplicateKeyValidator) -> ProbeResult:
        from pyspark.sql import functions as F

        keys = [f"k{i}" for i in range(len(v.columns))]
        values = [self.value(v, c).alias(k) for c, k in zip(v.columns, keys, strict=True)]
        # A key with a NULL part is not a duplicate (as for a UNIQUE constraint);
        # not_null rules are the place to refuse NULL keys.
        not_null = F.lit(True)
        for key in keys:
            not_null = not_null & F.col(key).isNotNull()
        repeated = (
            self.frame.select(*values)
            .where(not_null)
            .groupBy(*keys)
            .agg(F.count(F.lit(1)).alias("n"))
            .where(F.col("n") > 1)
        )
        # The smallest repeated key (ordered by the typed values), as PostgreSQL quotes it.
        row = (
            repeated.agg(F.count(F.lit(1)).alias("d"), F.min(F.struct(*keys)).alias("first"))
            .select("d", *(F.col("first")[k].cast("string") for k in keys))
            .first()
        )
        if row is None or not row[0]:
            return judge_duplicate_key(v, 0, None)
        return judge_duplicate_key(v, int(row[0]), list(row[1:]))

    # ------------------------------------------------------------------ small

    def _one(self, *aggregates: Column) -> tuple[Any, ...]:
        row = self.frame.agg(*aggregates).first()
        if row is None:  # pragma: no cover - an aggregate always returns one row
            raise ValidationFailed("a validator probe returned no row", "report this as a bug")
        return tuple(row)

    def _ref(self, v: FkIntegrityValidator) -> DataFrame:
        hint = (
            f"check ref_table {v.ref_table!r}: it must name a table of the context store "
            "that exists before the load"
        )
        try:
            ref = self.ref_table(v.ref_table)
            columns = ref.columns  # a Spark Connect frame is resolved only when asked
        except HakiriError as exc:
            raise probe_failed(v, exc.reason, exc.hint or hint) from None
        except Exception as exc:  # whatever the resolver raises for a table it cannot read
            raise probe_failed(v, _first_line(exc), hint) from None
        if v.ref_column not in columns:
            raise probe_failed(
                v, f'column "{v.ref_column}" does not exist in {v.ref_table}', fk_column_hint(v)
            )
        return ref


@contextmanager
def _reported_as(validator: DatasetValidator) -> Iterator[None]:
    """Spark refusing to analyse a probe is the validator's failure, told in one line.
    Errors while running the job (reading the batch) are not: they go to the caller."""
    from pyspark.errors import AnalysisException

    try:
        yield
    except AnalysisException as exc:
        raise probe_failed(validator, _first_line(exc), _RETRY_HINT) from None


def _column_hint(validator: DatasetValidator) -> str:
    if isinstance(validator, FkIntegrityValidator):
        return fk_column_hint(validator)
    return COLUMN_NAMES_HINT


def _is_text(dtype: DataType) -> bool:
    from pyspark.sql.types import CharType, StringType, VarcharType

    return isinstance(dtype, StringType | CharType | VarcharType)


def _comparable(a: DataType, b: DataType) -> bool:
    """Types whose values PostgreSQL would compare too: numbers with numbers, text with
    text, dates with timestamps; anything else only with its own type. Spark would coerce
    more (a string to a number), and under ANSI a bad string would fail the job."""
    from pyspark.sql.types import DateType, NumericType, TimestampNTZType, TimestampType

    families: tuple[Callable[[DataType], bool], ...] = (
        lambda t: isinstance(t, NumericType),
        _is_text,
        lambda t: isinstance(t, DateType | TimestampType | TimestampNTZType),
    )
    for family in families:
        if family(a) or family(b):
            return family(a) and family(b)
    return a == b


def _instant(micros: int | None) -> datetime | None:
    return None if micros is None else _EPOCH + timedelta(microseconds=micros)


def _first_line(exc: BaseException) -> str:
    lines = str(exc).strip().splitlines()
    return lines[0].strip() if lines else type(exc).__name__
