"""JSON parts: JSON Lines, and files that hold one top-level array of records.

JSON Lines are read by the engine's JSON reader, or, with declared columns on an engine
whose reader stops at a bad line (Sail), as lines of text parsed by hakiri; undeclared
under on_malformed = "drop" there, by hakiri's tasks (`json_elements`). An array is split
into its elements first, so `on_malformed` applies per record, by hakiri's engine tasks on
every engine (`json_elements`): Sail's from_json cannot say which element does not fit, and
Spark's from_json over a whole file slowed past a few thousand elements.
Inferred fields are put back in the order the records first use them.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from hakiri.errors import SourceUnreachable
from hakiri.sources.files.datetimes import (
    formatted,
    inferred_timestamps,
    kind_of,
    with_parsed_columns,
)
from hakiri.sources.files.inspect import json_keys, open_text, skip_whitespace
from hakiri.sources.files.json_elements import element_part
from hakiri.sources.files.malformed import PARSER_STOPPED, unreadable_record
from hakiri.sources.files.part import (
    BAD,
    FILE,
    TEXT,
    Part,
    quoted_col,
    spark_schema,
    union,
    with_bad,
)
from hakiri.sources.files.stand_ins import Located
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, DataFrameReader, SparkSession


def json_parts(
    spark: SparkSession,
    config: FilesConfig,
    charset: str,
    located: list[Located],
    observed: bool = True,
    per_file: bool = False,
) -> list[Part]:
    """`per_file`: each JSON Lines file is read on its own and its rows carry its name in FILE
    (for each row's file's hash on an engine without input_file_name(), Sail); inferred
    columns are inferred from all the files first, so every file is read with one schema."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StructType

    arrays = [loc for loc in located if _starts_with_bracket(config, loc)]
    lines = [loc for loc in located if loc not in arrays]
    parts = []
    if lines and not observed and config.columns is None and config.on_malformed == "drop":
        # Sail's reader stops at a line that is not JSON: hakiri's tasks split and infer.
        parts.append(element_part(spark, config, charset, lines, "jsonl"))
    elif lines:
        reader = _json_reader(spark, config, charset, observed)
        paths = [loc.spark_path for loc in lines]
        if config.columns is not None and (not observed or _reads_patterns(spark, config)):
            # Also on an engine with a JSON reader that sets bad lines aside: values read with
            # date_format/timestamp_format are parsed by hakiri on every engine.
            raw = _json_lines_as_text(spark, config, lines)
            columns = tuple(config.columns)
        elif config.columns is not None:
            declared = spark_schema(spark, list(config.columns.items()))
            raw = with_bad(reader, declared, observed, lines, "json")
            columns = tuple(config.columns)
        else:
            try:
                raw = reader.json(paths)
                columns = tuple(c for c in raw.columns if c != BAD)
                if per_file:
                    inferred = StructType([f for f in raw.schema.fields if f.name != BAD])
                    raw = with_bad(reader, inferred, False, lines, "json")
            except Exception as exc:  # Sail's inference stops at a line that is not JSON
                if observed or not PARSER_STOPPED.search(str(exc)):
                    raise
                unread = Part(spark.range(0), (), (), tuple(lines), "jsonl", has_bad=True)
                raise unreadable_record(config, unread, exc) from None
            if not observed:  # a line that is not JSON stops Sail's parser: Check names it
                raw = raw.withColumn(BAD, F.lit(None).cast("string"))
            raw = inferred_timestamps(config, raw)
        has_bad = BAD in raw.columns
        parts.append(Part(raw, columns, columns, tuple(lines), "jsonl", has_bad))
    if arrays:  # split in hakiri's tasks on every engine (`json_elements`)
        parts.append(element_part(spark, config, charset, arrays, "json-array"))
    return parts


def _json_lines_as_text(
    spark: SparkSession, config: FilesConfig, locs: Sequence[Located]
) -> DataFrame:
    """JSON Lines with declared columns on an engine whose JSON reader stops at a bad line
    (Sail): each file read as lines of text (with its name in FILE), each line parsed by
    `from_json` into a map of its fields as text, each field converted to its declared type
    by hakiri (as for CSV). A line that is not a JSON object, or has a value that does not
    convert, is malformed: its text goes to BAD, where Spark's reader puts it."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import ArrayType, MapType, StringType, StructType

    assert config.columns is not None
    declared = spark_schema(spark, list(config.columns.items()))
    frames = []
    for loc in locs:
        text = spark.read.text(loc.spark_path).select(
            F.regexp_replace("value", "^\ufeff", "").alias(TEXT),
            F.lit(loc.path.as_uri()).alias(FILE),
        )
        frames.append(text.where(F.trim(TEXT) != ""))
    fields = F.from_json(F.col(TEXT), "map<string,string>")
    lines = union(frames).select(TEXT, FILE, fields.alias("_hakiri_fields"))
    patterns = {f.name: formatted(config, f.dataType) for f in declared.fields}
    lines = with_parsed_columns(
        lines,
        [
            (f"_hakiri_parsed{i}", F.col("_hakiri_fields").getItem(f.name), kind_of(f.dataType), p)
            for i, f in enumerate(declared.fields)
            if (p := patterns[f.name]) is not None
        ],
    )
    converted, lost = [], F.lit(False)
    for i, field in enumerate(declared.fields):
        given = F.col("_hakiri_fields").getItem(field.name)
        if isinstance(field.dataType, StringType):
            value = given
        elif patterns[field.name] is not None:
            value = F.col(f"_hakiri_parsed{i}")
        elif isinstance(field.dataType, StructType | ArrayType | MapType):
            value = F.from_json(given, field.dataType)
        else:
            value = given.try_cast(field.dataType)
        converted.append(value.alias(field.name))
        lost = lost | (given.isNotNull() & value.isNull())
    bad = F.when(F.col("_hakiri_fields").isNull() | lost, F.col(TEXT))
    return lines.select(*converted, bad.alias(BAD), FILE)


def _reads_patterns(spark: SparkSession, config: FilesConfig) -> bool:
    """Does a declared date or timestamp column read with date_format/timestamp_format?"""
    assert config.columns is not None
    declared = spark_schema(spark, list(config.columns.items()))
    return any(formatted(config, f.dataType) for f in declared.fields)


def _json_reader(
    spark: SparkSession, config: FilesConfig, charset: str, observed: bool = True
) -> DataFrameReader:
    reader = spark.read
    if observed:
        reader = reader.option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", BAD)
    # No dateFormat/timestampFormat: values read with a pattern are read as text and parsed by
    # hakiri (`datetimes`), the same on every engine.
    if charset != "UTF-8":
        # Outside UTF-8 Spark cannot find line ends without being told what they are.
        reader = reader.option("encoding", charset).option("lineSep", "\n")
    return reader


def _starts_with_bracket(config: FilesConfig, loc: Located) -> bool:
    with open_text(config, loc.path, loc.shown) as stream:
        try:
            return skip_whitespace(stream).startswith("[")
        except UnicodeError:
            return False  # read as lines; the bad bytes are then reported with their line


def in_file_order(config: FilesConfig, located: list[Located], frame: DataFrame) -> DataFrame:
    """Spark sorts inferred JSON fields by name; put them in the order the records first use them."""
    lenient = config.model_copy(update={"on_malformed": "drop"})
    try:
        keys = json_keys(lenient, [(loc.path, loc.shown) for loc in located]) or []
    except SourceUnreachable:
        return frame
    known = [k for k in keys if k in frame.columns]
    rest = [c for c in frame.columns if c not in set(known)]
    if known + rest == frame.columns:
        return frame
    return frame.select(*[quoted_col(c) for c in known + rest])
