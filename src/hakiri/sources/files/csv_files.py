"""CSV parts (`csv_parts`): the files that share a header, read as text and typed by hakiri.

Every column is read as text, then converted by hakiri's projection (`_converted`) to its
declared type, or to the one `_inferred_fields` infers from every well-formed record (one
aggregate, the same on every engine; plan's sample applies the same rules: `csv_sample`).
A record with a value that does not convert is marked (`MISTYPED`), not refused.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hakiri.errors import SourceDataError, SourceUnreachable
from hakiri.sources.files.csv_records import csv_text
from hakiri.sources.files.csv_sample import INTEGER_TEXT, ISO_DATE_TEXT, ISO_TIMESTAMP_TEXT
from hakiri.sources.files.datetimes import with_parsed_columns
from hakiri.sources.files.inspect import csv_names
from hakiri.sources.files.malformed import PARSER_STOPPED, raise_if_undecodable, unreadable_record
from hakiri.sources.files.part import (
    BAD,
    FILE,
    MISTYPED,
    TEXT,
    Part,
    quoted_col,
    spark_schema,
)
from hakiri.sources.files.stand_ins import Located
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, DataFrameReader, SparkSession
    from pyspark.sql.types import StructField, StructType


def csv_parts(
    spark: SparkSession,
    config: FilesConfig,
    charset: str,
    located: list[Located],
    observed: bool = True,
    parser_typing: bool = False,
) -> list[Part]:
    """The parts of a CSV batch. `parser_typing`: the engine's typed CSV parser refuses (fails
    the read at) a value it cannot parse, and hakiri judges malformed records in the pass and
    names the first by reading again (Sail in the hakiri process): the declared columns whose
    types that parser reads exactly as hakiri's conversion does (`parser_typed`) are typed by
    it, under on_malformed = "fail" (a refused value fails the batch either way)."""
    from pyspark.sql.types import StringType, StructField, StructType

    # Spark applies one schema by position to every file of a read, so files whose
    # headers differ (order included) are read separately and united by name.
    groups: dict[tuple[str, ...] | None, list[Located]] = {}
    for loc in located:
        header = _header_of(config, loc) if config.header else None
        if config.header and header is None:
            continue  # an empty file: no header, no rows
        groups.setdefault(header, []).append(loc)

    parts = []
    for header, locs in groups.items():
        declared = config.columns
        if declared is not None:
            if header is not None:
                _require_declared(declared, header, locs[0])
                fields = [(name, declared.get(name, "string")) for name in header]
            else:
                fields = list(declared.items())
            typed = spark_schema(spark, fields)  # a declared type Spark does not know fails here
            text = spark_schema(spark, [(n, "string") for n, _ in fields])
            parsed, columns = tuple(n for n, _ in fields), tuple(declared)
            raw = _text(spark, config, charset, observed, text, locs)
            spelled = Part(
                _converted(config, raw, typed),
                parsed,
                columns,
                tuple(locs),
                "csv",
                has_bad=True,
                has_mistyped=True,
            )
            by_parser = parser_typed(config, typed) if parser_typing else frozenset()
            if not by_parser:
                parts.append(spelled)
                continue
            # The parser types the columns it reads as the conversion would; the others are
            # read as text and converted. The all-text part names a malformed record's line.
            mixed = StructType(
                [f if f.name in by_parser else StructField(f.name, StringType()) for f in typed]
            )
            read = _text(spark, config, charset, observed, mixed, locs)
            parts.append(
                Part(
                    _converted(config, read, typed, by_parser),
                    parsed,
                    columns,
                    tuple(locs),
                    "csv",
                    has_bad=True,
                    has_mistyped=True,
                    spelled=spelled,
                )
            )
            continue
        # Inferred columns are typed the same way: hakiri infers the types from the text of
        # every well-formed record (one aggregate, the same on every engine: no engine's own
        # inference, which differ), the read takes every column as text and hakiri's
        # projection converts it.
        names = header if header is not None else _first_record_names(config, locs[0])
        text = StructType([StructField(name, StringType()) for name in names])
        parsed = columns = tuple(names)
        raw = _text(spark, config, charset, observed, text, locs)
        fields = _inferred_fields(config, raw, names, locs)
        raw = _converted(config, raw, StructType(fields))
        parts.append(
            Part(raw, parsed, columns, tuple(locs), "csv", has_bad=True, has_mistyped=True)
        )
    return parts


def _text(
    spark: SparkSession,
    config: FilesConfig,
    charset: str,
    observed: bool,
    text: StructType,
    locs: Sequence[Located],
) -> DataFrame:
    """The files' records as text, BAD and FILE: by the engine's reader, or by hakiri's tasks
    on an engine that cannot set a record of the wrong width aside under "drop" (`csv_records`)."""
    reader = _csv_reader(spark, config, charset, observed)
    return csv_text(spark, config, charset, reader, text, observed, locs)


def _first_record_names(config: FilesConfig, loc: Located) -> tuple[str, ...]:
    """A header-less file's column names: `column_names`, else _c0, _c1, … for the fields of
    its first record (more names than fields, or fewer, make every record malformed)."""
    try:
        names = csv_names(config, loc.path, loc.shown)
    except SourceUnreachable as exc:
        raise SourceDataError(exc.reason, exc.hint) from None
    return tuple(names or ())


# Text that is an integer, a date or a timestamp as Spark's CSV inference reads them by
# default: the same patterns plan's sample applies (sources.csv_sample).
_INTEGER, _ISO_DATE, _ISO_TIMESTAMP = INTEGER_TEXT, ISO_DATE_TEXT, ISO_TIMESTAMP_TEXT


def _inferred_fields(
    config: FilesConfig, raw: DataFrame, names: Sequence[str], locs: Sequence[Located]
) -> list[StructField]:
    """The type of each text column: the narrowest of int, bigint, decimal(38,0), double,
    boolean, date, timestamp that every non-NULL value of the well-formed records converts
    to, else string (also for a column without a value), as Spark's CSV inference decides.
    One aggregate over the files, asked of the engine with its own casts."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        BooleanType,
        DataType,
        DateType,
        DecimalType,
        DoubleType,
        IntegerType,
        LongType,
        StringType,
        StructField,
        TimestampType,
    )

    candidates: list[tuple[str, DataType]] = [
        ("int", IntegerType()),
        ("bigint", LongType()),
        ("decimal", DecimalType(38, 0)),
        ("double", DoubleType()),
        ("boolean", BooleanType()),
        ("date", DateType()),
        ("timestamp", TimestampType()),
    ]
    good = raw.where(F.col(BAD).isNull())
    # Values read with date_format/timestamp_format: parsed in projections of their own first.
    probes = []
    for i, name in enumerate(names):
        value = _present(config, quoted_col(name))
        if config.date_format:
            probes.append((f"_hakiri_d{i}", value, "date", config.date_format))
        if config.timestamp_format:
            probes.append((f"_hakiri_t{i}", value, "timestamp", config.timestamp_format))
    good = with_parsed_columns(good, probes)
    checks = []
    for i, name in enumerate(names):
        value = _present(config, quoted_col(name))
        as_date = _as_date(config, value, F.col(f"_hakiri_d{i}"))
        as_timestamp = _as_timestamp(config, value, F.col(f"_hakiri_t{i}"))
        fits = {
            "int": value.rlike(_INTEGER) & value.try_cast("int").isNotNull(),
            "bigint": value.rlike(_INTEGER) & value.try_cast("bigint").isNotNull(),
            "decimal": value.rlike(_INTEGER) & value.try_cast("decimal(38,0)").isNotNull(),
            "double": _as_double(config, value).isNotNull(),
            "boolean": F.lower(value).isin("true", "false"),
            "date": as_date.isNotNull(),
            "timestamp": as_timestamp.isNotNull() | as_date.isNotNull(),
        }
        checks.append(F.count(value).alias(f"n{i}"))
        checks += [
            F.count_if(value.isNotNull() & ~fit).alias(f"{kind}{i}")
            for kind, fit in ((k, fits[k]) for k, _ in candidates)
        ]
    try:
        found = good.agg(*checks).first()
    except Exception as exc:  # Sail's CSV parser stops at a record of the wrong width
        if not PARSER_STOPPED.search(str(exc)):
            raise
        unread = Part(raw, tuple(names), tuple(names), tuple(locs), "csv", has_bad=True)
        raise unreadable_record(config, unread, exc) from None
    assert found is not None  # a global aggregate has one row
    fields = []
    for i, name in enumerate(names):
        kind: DataType = StringType()
        if found[f"n{i}"]:
            kind = next((t for k, t in candidates if not found[f"{k}{i}"]), StringType())
        fields.append(StructField(name, kind))
    return fields


def _present(config: FilesConfig, text: Column) -> Column:
    """The field's text, NULL when it is empty or the null value (`null_value`)."""
    from pyspark.sql import functions as F

    present = text != ""
    if config.null_value is not None:
        present = present & (text != config.null_value)
    return F.when(present, text)


def _as_double(config: FilesConfig, value: Column) -> Column:
    from pyspark.sql import functions as F

    if config.nan_value not in (None, "NaN"):
        value = F.when(value == config.nan_value, F.lit("NaN")).otherwise(value)
    return value.try_cast("double")


def _as_date(config: FilesConfig, value: Column, parsed: Column) -> Column:
    """The value as a date: `parsed` (its parse with date_format), or ISO 8601 without one."""
    from pyspark.sql import functions as F

    if config.date_format:
        return parsed
    return F.when(value.rlike(_ISO_DATE), value.try_cast("date"))


def _as_timestamp(config: FilesConfig, value: Column, parsed: Column) -> Column:
    from pyspark.sql import functions as F

    if config.timestamp_format:
        return parsed
    return F.when(value.rlike(_ISO_TIMESTAMP), value.try_cast("timestamp"))


# Sail's typed CSV parser (0.7) reads these declared types exactly as hakiri's conversion
# does, or refuses the value (which fails the read): integers of every width (overflow
# refused; signs, leading zeros and surrounding spaces read alike) and floating point (NaN,
# inf, exponents alike) unless `nan_value` respells NaN; and none of them when `null_value` is
# set (the parser fails on a null value in a typed column). Not decimal (the parser truncates
# extra digits where the conversion rounds, and takes exponents the conversion refuses), not
# boolean (the parser refuses 'yes', 't', '1', … that the conversion takes), not date (the
# parser takes '20240105' and '2024-01-05T10:00:00' that the conversion refuses), not
# timestamp (it refuses '2024-01-05 10:00'). Proven value by value by
# tests/integration/sources/test_parser_typing.py; docs/performance.md has the table.
_INTEGERS = ("tinyint", "smallint", "int", "bigint")
_FLOATS = ("float", "double")


def parser_typed(config: FilesConfig, typed: StructType) -> frozenset[str]:
    """The declared columns the engine's typed CSV parser may type (see the table above)."""
    if config.null_value is not None:
        return frozenset()
    kinds = _INTEGERS if config.nan_value not in (None, "NaN") else _INTEGERS + _FLOATS
    return frozenset(f.name for f in typed.fields if f.dataType.simpleString() in kinds)


def _converted(
    config: FilesConfig,
    raw: DataFrame,
    typed: StructType,
    by_parser: frozenset[str] = frozenset(),
) -> DataFrame:
    """CSV text columns converted to their declared or inferred types (what Spark's typed
    parse did, for less: reading text is the cheaper half), plus MISTYPED, true when a value
    does not convert (which one is worked out only when a read fails). An empty value is
    NULL, never malformed. The columns `by_parser` were typed by the reader: kept as read."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import DateType, FractionalType, StringType, TimestampType

    texts = [f"_hakiri_t{i}" for i in range(len(typed.fields))]
    # Values read with date_format/timestamp_format: parsed in projections of their own first.
    patterns = {
        f.name: config.date_format
        if isinstance(f.dataType, DateType)
        else config.timestamp_format
        if type(f.dataType) is TimestampType
        else None
        for f in typed.fields
    }
    raw = with_parsed_columns(
        raw,
        [
            (
                f"_hakiri_parsed{i}",
                _present(config, quoted_col(f.name)),
                "date" if isinstance(f.dataType, DateType) else "timestamp",
                pattern,
            )
            for i, f in enumerate(typed.fields)
            if (pattern := patterns[f.name])
        ],
    )
    converted, problems = [], []
    for i, (field, kept) in enumerate(zip(typed.fields, texts, strict=True)):
        text = quoted_col(field.name)
        if field.name in by_parser:
            converted.append(text.alias(field.name))
            continue
        if isinstance(field.dataType, StringType):
            if config.null_value is not None:  # as the reader's nullValue, on every engine
                text = F.when(text != config.null_value, text)
            converted.append(text.alias(field.name))
            continue
        value = _present(config, text)
        if isinstance(field.dataType, FractionalType) and config.nan_value not in (None, "NaN"):
            value = F.when(value == config.nan_value, F.lit("NaN")).otherwise(value)
        if patterns[field.name]:
            result = F.col(f"_hakiri_parsed{i}")
        else:
            result = value.try_cast(field.dataType)
        converted.append(result.alias(field.name))
        problems.append(_present(config, F.col(kept)).isNotNull() & quoted_col(field.name).isNull())
    mistyped = F.lit(False)
    for problem in problems:
        mistyped = mistyped | problem
    extra = [quoted_col(FILE)] if FILE in raw.columns else []
    # Two projections: the conversions first, then the verdict from their results (in one,
    # an engine without common-subexpression elimination, Sail, converts every value twice).
    values = raw.select(
        *converted,
        *[
            quoted_col(field.name).alias(kept)
            for field, kept in zip(typed.fields, texts, strict=True)
        ],
        *extra,
        quoted_col(BAD),
    )
    # The parser's verdict (BAD) comes first: a record it refused has no values to convert.
    return values.select(
        *[quoted_col(field.name) for field in typed.fields],
        *extra,
        quoted_col(BAD),
        (F.col(BAD).isNull() & mistyped).alias(MISTYPED),
        # Read only when a failing read names its line: the queries that load never use it.
        F.array(*[F.col(kept).cast("string") for kept in texts]).alias(TEXT),
    )


def _csv_reader(
    spark: SparkSession, config: FilesConfig, charset: str, observed: bool = True
) -> DataFrameReader:
    reader = (
        spark.read.option("header", config.header)
        .option("sep", config.delimiter)
        .option("encoding", charset)
        # "" turns quoting off; Spark spells that as the NUL character.
        .option("quote", config.quote or "\u0000")
        # The default escape is the quote itself (RFC 4180: a quote inside a quoted field is
        # doubled, as Python's csv module reads it); Spark's own default, a backslash,
        # misreads such fields without a word.
        .option("escape", config.escape)
    )
    if observed:
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", BAD)
    options = {
        "comment": config.comment,
        "nullValue": config.null_value,
        "nanValue": config.nan_value,
    }
    return reader.options(**{k: v for k, v in options.items() if v is not None})


def _header_of(config: FilesConfig, loc: Located) -> tuple[str, ...] | None:
    try:
        names = csv_names(config, loc.path, loc.shown)
    except SourceUnreachable as exc:
        # Python decodes ahead of the header: a bad byte further down fails it, so find its line.
        raise_if_undecodable(config, [loc])
        raise SourceDataError(exc.reason, exc.hint) from None
    return tuple(names) if names is not None else None


def _require_declared(declared: dict[str, str], header: tuple[str, ...], loc: Located) -> None:
    missing = [name for name in declared if name not in header]
    if not missing:
        return
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    shown_header = ", ".join(repr(n) for n in header[:12]) + (", …" if len(header) > 12 else "")
    raise SourceDataError(
        f"{loc.shown}: declared column {missing[0]!r}{more} is not in the CSV header",
        f"the header has {shown_header}; fix `columns` in the source config, or the file",
    )
