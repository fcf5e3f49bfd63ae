"""JSON records split and typed in the engine's tasks, for an engine whose JSON reading cannot
say which record does not fit (Sail): the elements of files that hold one top-level array,
and JSON Lines under on_malformed = "drop" without declared columns.

A one-row-per-file frame goes through `mapInArrow`: each task streams its files (never
reading one whole), splits them into records (an array's elements, or lines) and gives one
row per record: its file, index and line, its text, and each column's value as text with a
flag when the JSON value cannot be of the column's type (Apache Spark's JSON parser rules:
a quoted number is not an int, a number is not a date but is a timestamp's seconds, any
value goes into a string). The engine then converts each text to its type; a value that does
not convert marks the record malformed too (BAD holds its text, as Spark's corrupt-record
column does). A file that is not one valid array gives a BROKEN row. The counts ride the
staging pass (`Part.frame`'s tally), as for CSV. Without declared columns the types are
inferred first, in a pass of the same tasks, by Spark's JSON inference rules (bigint,
double, boolean, string, struct with fields sorted by name, array; what two records
disagree on is a string), so the frame's types are Apache Spark's.
"""

from __future__ import annotations

import codecs
import json
import re
from collections.abc import Iterator, Sequence
from decimal import Decimal
from typing import TYPE_CHECKING, Any

from hakiri.sources.files.datetimes import formatted, parsed_date, parsed_timestamp
from hakiri.sources.files.part import BAD, BROKEN, FILE, POS, Part, spark_schema
from hakiri.sources.files.stand_ins import Located
from hakiri.spec.pipeline import FilesConfig

if TYPE_CHECKING:
    from pyspark.sql import Column, DataFrame, SparkSession
    from pyspark.sql.types import DataType, StructType

LINE = "_hakiri_line"
_ELEMENT = "_hakiri_element"
_MISFIT = "_hakiri_misfit"
_LOCAL = "_hakiri_local"
_SCHEMA = "_hakiri_schema"
_SECONDS = "#"  # marks a timestamp given as a number of seconds
_CHUNK = 1 << 16
_BATCH = 4096
_SPACE = re.compile("[ \t\r\n]*")  # JSON's whitespace
# Strings Spark's JSON parser takes for a float or double (allowNonNumericNumbers).
_NON_NUMERIC = {
    "NaN": "NaN",
    "Infinity": "Infinity",
    "+Infinity": "Infinity",
    "-Infinity": "-Infinity",
    "INF": "Infinity",
    "+INF": "Infinity",
    "-INF": "-Infinity",
}


def element_part(
    spark: SparkSession, config: FilesConfig, charset: str, locs: Sequence[Located], kind: str
) -> Part:
    """The records of `locs` (`kind` "json-array" or "jsonl") as a Part with FILE, POS, LINE,
    BROKEN and BAD, typed as declared or as Spark would infer them."""
    from pyspark.sql import functions as F

    files = spark.createDataFrame(
        [(loc.path.as_uri(), str(loc.path)) for loc in locs], f"{FILE} string, {_LOCAL} string"
    )
    encoding = charset or config.encoding
    if config.columns is not None:
        schema = spark_schema(spark, list(config.columns.items()))
    else:
        schema = _inferred_schema(files, encoding, kind)
    kinds = [(field.name, _kind_of(field.dataType)) for field in schema.fields]
    records = files.mapInArrow(_reader(encoding, kind, kinds), _out_schema(len(kinds)))
    if config.columns is None and config.timestamp_format is not None:
        timed = _timestamps(config.timestamp_format, records, schema)
        if timed != schema:
            schema = timed
            kinds = [(field.name, _kind_of(field.dataType)) for field in schema.fields]
            records = files.mapInArrow(_reader(encoding, kind, kinds), _out_schema(len(kinds)))
    lost = F.lit(False)
    values = []
    for i, field in enumerate(schema.fields):
        text = F.col(f"_t{i}")
        value = _converted(config, text, field.dataType)
        values.append(value.alias(field.name))
        lost = lost | (text.isNotNull() & value.isNull())
    bad = F.when(F.col(_MISFIT) | lost, F.col(_ELEMENT))
    raw = records.select(*values, bad.alias(BAD), FILE, POS, LINE, BROKEN)
    columns = tuple(field.name for field in schema.fields)
    return Part(raw, columns, columns, tuple(locs), kind, has_bad=True)


def _timestamps(pattern: str, records: DataFrame, schema: StructType) -> StructType:
    """With `timestamp_format` set, Spark infers a (top-level) string field whose every value
    parses with it as a timestamp: asked of the engine in one aggregate over the records."""
    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType, StructField, StructType, TimestampType

    texts = [i for i, field in enumerate(schema.fields) if isinstance(field.dataType, StringType)]
    if not texts:
        return schema
    checks = []
    for i in texts:
        text = F.col(f"_t{i}")
        parsed = parsed_timestamp(text, pattern)  # hakiri's patterns, as every reader
        checks += [F.count(text).alias(f"n{i}"), F.count(parsed).alias(f"ok{i}")]
    found = records.where(~F.col(_MISFIT) & ~F.col(BROKEN)).agg(*checks).first()
    assert found is not None  # a global aggregate has one row
    timed = {i for i in texts if found[f"n{i}"] and found[f"n{i}"] == found[f"ok{i}"]}
    return StructType(
        [
            StructField(field.name, TimestampType()) if i in timed else field
            for i, field in enumerate(schema.fields)
        ]
    )


def _converted(config: FilesConfig, text: Column, kind: DataType) -> Column:
    from pyspark.sql import functions as F
    from pyspark.sql.types import (
        ArrayType,
        DateType,
        MapType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if isinstance(kind, StringType):
        return text
    if isinstance(kind, StructType | ArrayType | MapType):
        return F.from_json(text, kind)
    if isinstance(kind, DateType) and config.date_format:
        return parsed_date(text, config.date_format)
    if isinstance(kind, TimestampType | TimestampNTZType):
        # A whole number is seconds since the epoch (marked by the task; a text so marked is refused).
        seconds = F.timestamp_seconds(F.substring(text, 2, 40).try_cast("bigint")).cast(kind)
        if formatted(config, kind):
            parsed = parsed_timestamp(text, config.timestamp_format or "")
        else:
            parsed = text.try_cast(kind)
        return F.when(text.startswith(_SECONDS), seconds).otherwise(parsed)
    if isinstance(kind, DateType):
        # Spark's JSON parser takes the date of a timestamp's text ("2026-01-08T10:11:12").
        text = F.regexp_replace(text, "^([0-9]{4}-[0-9]{1,2}-[0-9]{1,2})[T ].*$", "$1")
    return text.try_cast(kind)


def _out_schema(width: int) -> StructType:
    from pyspark.sql.types import BooleanType, LongType, StringType, StructField, StructType

    return StructType(
        [
            StructField(FILE, StringType()),
            StructField(POS, LongType()),
            StructField(LINE, LongType()),
            StructField(BROKEN, BooleanType()),
            StructField(_ELEMENT, StringType()),
            StructField(_MISFIT, BooleanType()),
            *[StructField(f"_t{i}", StringType()) for i in range(width)],
        ]
    )


def _kind_of(kind: DataType) -> str:
    """Which JSON values Spark's parser takes for a column of type `kind`."""
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        DateType,
        DecimalType,
        FractionalType,
        IntegralType,
        MapType,
        StringType,
        StructType,
        TimestampNTZType,
        TimestampType,
    )

    if isinstance(kind, IntegralType):
        return "integral"
    if isinstance(kind, DecimalType):
        return "decimal"
    if isinstance(kind, FractionalType):
        return "fractional"
    if isinstance(kind, BooleanType):
        return "boolean"
    if isinstance(kind, TimestampType | TimestampNTZType):
        return "timestamp"
    if isinstance(kind, DateType):
        return "datetime"
    if isinstance(kind, StructType | MapType):
        return "object"
    if isinstance(kind, ArrayType):
        return "array"
    return "string" if isinstance(kind, StringType) else "other"


def field_text(value: Any, kind: str) -> tuple[str | None, bool]:
    """(the value as text for the engine to convert, whether Spark's JSON parser refuses it
    for a column of `kind`). Numbers arrive as int or Decimal, so no digit is lost."""
    if value is None:
        return None, False
    if kind == "string":
        return (value, False) if isinstance(value, str) else (_dumps(value), False)
    number = isinstance(value, int | Decimal) and not isinstance(value, bool)
    if kind == "integral":
        return (str(value), False) if isinstance(value, int) and number else (None, True)
    if kind == "fractional":
        if number:
            return str(value), False
        if isinstance(value, str) and value in _NON_NUMERIC:
            return _NON_NUMERIC[value], False
        return None, True
    if kind == "decimal":
        if number:
            return str(value), False
        return (value, False) if isinstance(value, str) and value else (None, True)
    if kind == "boolean":
        return ("true" if value else "false", False) if isinstance(value, bool) else (None, True)
    if kind == "timestamp" and number and isinstance(value, int):
        return f"{_SECONDS}{value}", False  # Spark takes a whole number as seconds
    if kind == "timestamp" and isinstance(value, str) and value.startswith(_SECONDS):
        return None, True  # no timestamp's text: the mark is kept for numbers
    if kind in ("datetime", "timestamp"):
        return (value, False) if isinstance(value, str) and value else (None, True)
    if kind == "object":
        return (_dumps(value), False) if isinstance(value, dict) else (None, True)
    if kind == "array":
        return (_dumps(value), False) if isinstance(value, list) else (None, True)
    return (value, False) if isinstance(value, str) else (_dumps(value), False)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, default=float)


# ---------------------------------------------------------------- in the engine's tasks


def _reader(encoding: str, kind: str, kinds: list[tuple[str, str]]) -> Any:
    """The mapInArrow function: one row per record of each file of the batches it is given."""

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        names = [FILE, POS, LINE, BROKEN, _ELEMENT, _MISFIT, *[f"_t{i}" for i in range(len(kinds))]]
        for batch in batches:
            for uri, local in zip(
                batch.column(FILE).to_pylist(), batch.column(_LOCAL).to_pylist(), strict=True
            ):
                rows: list[tuple[Any, ...]] = []
                for row in _file_rows(uri, local, encoding, kind, kinds):
                    rows.append(row)
                    if len(rows) == _BATCH:
                        yield _batch(pa, names, rows)
                        rows = []
                if rows:
                    yield _batch(pa, names, rows)

    return read


def _batch(pa: Any, names: list[str], rows: list[tuple[Any, ...]]) -> Any:
    columns = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays(
        [
            pa.array(columns[0], pa.string()),
            pa.array(columns[1], pa.int64()),
            pa.array(columns[2], pa.int64()),
            pa.array(columns[3], pa.bool_()),
            pa.array(columns[4], pa.string()),
            pa.array(columns[5], pa.bool_()),
            *[pa.array(column, pa.string()) for column in columns[6:]],
        ],
        names=names,
    )


def _file_rows(
    uri: str, local: str, encoding: str, kind: str, kinds: list[tuple[str, str]]
) -> Iterator[tuple[Any, ...]]:
    width = len(kinds)
    for index, line, text, value, ok in records_of(local, encoding, kind):
        if index is None:  # not one valid array: the file is broken
            yield (uri, None, line, True, None, False, *([None] * width))
            return
        if not ok or not isinstance(value, dict):
            yield (uri, index, line, False, text, True, *([None] * width))
            continue
        texts, misfit = [], False
        for name, column_kind in kinds:
            found, refused = field_text(value.get(name), column_kind)
            texts.append(found)
            misfit = misfit or refused
        yield (uri, index, line, False, text, misfit, *texts)


def records_of(
    local: str, encoding: str, kind: str
) -> Iterator[tuple[int | None, int, str, Any, bool]]:
    """(index, line, text, value, parsed) of each record of a file; index None once when the
    file is not one valid JSON array (kind "json-array")."""
    if kind == "jsonl":
        with open(local, encoding=encoding, errors="replace") as lines:
            yield from _lines(lines)
        return
    decoder = codecs.getincrementaldecoder(encoding)(errors="replace")
    with open(local, "rb") as stream:
        yield from _elements(_decoded(stream, decoder))


def _decoded(stream: Any, decoder: Any) -> Iterator[str]:
    first = True
    while True:
        raw = stream.read(_CHUNK)
        text = decoder.decode(raw, final=not raw)
        if first and text:
            text, first = text.removeprefix("\ufeff"), False
        if text:
            yield text
        if not raw:
            return


def _parse(text: str) -> Any:
    return json.loads(text, parse_float=Decimal)


def _lines(stream: Any) -> Iterator[tuple[int | None, int, str, Any, bool]]:
    """Each line that is not blank (Python's universal newlines: \\n, \\r\\n, \\r, as Spark)."""
    index = 0
    for number, raw in enumerate(stream, 1):
        line = raw.rstrip("\r\n")
        if number == 1:
            line = line.removeprefix("\ufeff")
        if not line.strip():
            continue
        try:
            yield index, number, line, _parse(line), True
        except ValueError:
            yield index, number, line, None, False
        index += 1


class _Broken(Exception):
    pass


def _elements(chunks: Iterator[str]) -> Iterator[tuple[int | None, int, str, Any, bool]]:
    """The elements of a top-level array, decoded one at a time (memory: the largest element)."""
    decoder = json.JSONDecoder(parse_float=Decimal)
    state = _Scan(chunks)
    try:
        if state.skip() != "[":
            raise _Broken
        state.position += 1
        index = 0
        while True:
            found = state.skip()
            if found == "]" and index == 0:
                state.position += 1
                break
            if index > 0:
                if found == "]":
                    state.position += 1
                    break
                if found != ",":
                    raise _Broken
                state.position += 1
                state.skip()
            line = state.line()
            value, end = state.decode(decoder)
            text = state.buffer[state.position : end]
            state.position = end
            yield index, line, text, value, True
            index += 1
        if state.skip() is not None:  # something after the array
            raise _Broken
    except _Broken:
        yield None, state.line(), "", None, False


class _Scan:
    """A window on a decoded stream: the text from `position` on, and the line it is at."""

    def __init__(self, chunks: Iterator[str]) -> None:
        self.chunks, self.buffer, self.position, self.done = chunks, "", 0, False
        self.lines_before, self.counted_to = 1, 0  # line of buffer[counted_to]

    def more(self, at_least: int = 1) -> bool:
        """Drop what was read, add at least `at_least` characters (False at the end)."""
        if self.done:
            return False
        added = []
        while sum(map(len, added)) < at_least:
            chunk = next(self.chunks, None)
            if chunk is None:
                self.done = True
                break
            added.append(chunk)
        if not added:
            return False
        self.lines_before += self.buffer.count("\n", self.counted_to, self.position)
        self.buffer, self.counted_to = self.buffer[self.position :] + "".join(added), 0
        self.position = 0
        return True

    def skip(self) -> str | None:
        """The next character that is not whitespace (None at the end); position is at it."""
        while True:
            self.position = _SPACE.match(self.buffer, self.position).end()  # type: ignore[union-attr]
            if self.position < len(self.buffer):
                return self.buffer[self.position]
            if not self.more():
                return None

    def line(self) -> int:
        self.lines_before += self.buffer.count("\n", self.counted_to, self.position)
        self.counted_to = self.position
        return self.lines_before

    def decode(self, decoder: json.JSONDecoder) -> tuple[Any, int]:
        while True:
            try:
                value, end = decoder.raw_decode(self.buffer, self.position)
            except json.JSONDecodeError:
                # Read at least as much again as is pending: decoding a large element again
                # and again stays linear overall.
                if self.more(len(self.buffer) - self.position):
                    continue
                raise _Broken from None
            if end == len(self.buffer) and self.more():
                continue  # a number or literal may go on in the next chunk
            return value, end


# ---------------------------------------------------------------- Spark's JSON inference


def _inferred_schema(files: DataFrame, encoding: str, kind: str) -> StructType:
    """The columns Spark's JSON inference gives the files' records: each task infers its
    files' type; the (small) types per file are merged here."""
    from pyspark.sql.types import StringType, StructField, StructType

    found = files.mapInArrow(
        _inferrer(encoding, kind),
        StructType([StructField(FILE, StringType()), StructField(_SCHEMA, StringType())]),
    ).collect()  # one short row per file: its records' type
    merged: Any = "null"
    for row in found:
        merged = _wider(merged, json.loads(row[_SCHEMA]))
    final = _final(merged)
    if not isinstance(final, list) or final[0] != "struct":
        return StructType([])
    return _spark_type(final)  # type: ignore[no-any-return]


def _inferrer(encoding: str, kind: str) -> Any:
    def infer(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        for batch in batches:
            uris = batch.column(FILE).to_pylist()
            locals_ = batch.column(_LOCAL).to_pylist()
            for uri, local in zip(uris, locals_, strict=True):
                merged: Any = "null"
                for index, _line, _text, value, ok in records_of(local, encoding, kind):
                    if index is not None and ok and isinstance(value, dict):
                        merged = _wider(merged, _type_of(value))
                yield pa.RecordBatch.from_arrays(
                    [pa.array([uri]), pa.array([json.dumps(merged)])], names=[FILE, _SCHEMA]
                )

    return infer


def _type_of(value: Any) -> Any:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        if -(2**63) <= value < 2**63:
            return "bigint"
        digits = len(str(abs(value)))
        return ["decimal", digits] if digits <= 38 else "double"
    if isinstance(value, Decimal | float):
        return "double"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        element: Any = "null"
        for item in value:
            element = _wider(element, _type_of(item))
        return ["array", element]
    return ["struct", {key: _type_of(item) for key, item in value.items()}]


def _wider(a: Any, b: Any) -> Any:
    """Spark's compatible type of two inferred JSON types."""
    if a == b:
        return a
    if a == "null":
        return b
    if b == "null":
        return a
    numbers = ("bigint", "double")
    if a in numbers and b in numbers:
        return "double"
    if _decimal(a) or _decimal(b):
        if "double" in (a, b):
            return "double"
        digits = [x[1] if _decimal(x) else 20 for x in (a, b) if _decimal(x) or x == "bigint"]
        if len(digits) == 2:
            return ["decimal", min(38, max(digits))]
    if isinstance(a, list) and isinstance(b, list) and a[0] == b[0] == "struct":
        fields = dict(a[1])
        for key, kind in b[1].items():
            fields[key] = _wider(fields.get(key, "null"), kind)
        return ["struct", fields]
    if isinstance(a, list) and isinstance(b, list) and a[0] == b[0] == "array":
        return ["array", _wider(a[1], b[1])]
    return "string"


def _decimal(kind: Any) -> bool:
    return isinstance(kind, list) and kind[0] == "decimal"


def _final(kind: Any) -> Any:
    """As Spark canonicalizes an inferred type: NULL is string, an empty struct is left out."""
    if kind == "null":
        return "string"
    if isinstance(kind, list) and kind[0] == "array":
        element = _final(kind[1])
        return None if element is None else ["array", element]
    if isinstance(kind, list) and kind[0] == "struct":
        fields = {k: _final(v) for k, v in sorted(kind[1].items())}
        fields = {k: v for k, v in fields.items() if v is not None}
        return ["struct", fields] if fields else None
    return kind


def _spark_type(kind: Any) -> DataType:
    from pyspark.sql.types import (
        ArrayType,
        BooleanType,
        DecimalType,
        DoubleType,
        LongType,
        StringType,
        StructField,
        StructType,
    )

    if isinstance(kind, list):
        if kind[0] == "decimal":
            return DecimalType(kind[1], 0)
        if kind[0] == "array":
            return ArrayType(_spark_type(kind[1]))
        return StructType([StructField(k, _spark_type(v)) for k, v in kind[1].items()])
    simple = {"bigint": LongType(), "double": DoubleType(), "boolean": BooleanType()}
    return simple.get(kind, StringType())
