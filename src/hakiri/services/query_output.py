"""A query's result written out: the JSON document (`--format json`, serve's /v1/query), CSV and
Parquet, each streamed batch by batch as the engine hands them over; nothing holds the whole
result, and CSV and Parquet are written by Arrow's own writers without a Python row loop.

The JSON document:

    {"columns": [{"name": "status", "type": "string"}, ...],
     "rows": [["paid", 250235], ...],          # one array per row, in the columns' order
     "row_count": 4, "truncated": false}       # truncated: the limit cut the result

Values as in `hakiri context show --json`: timestamps and dates ISO 8601, decimals as strings,
binary as base64, NaN and infinities as strings.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from typing import IO, TYPE_CHECKING, Any

from hakiri.errors import HakiriError
from hakiri.services.context import _json_value
from hakiri.services.query import QueryResult

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "FORMATS",
    "columns_of",
    "result_document",
    "write_csv",
    "write_json",
    "write_parquet",
]

FORMATS = ("table", "json", "csv", "parquet")


def columns_of(schema: pa.Schema) -> list[dict[str, str]]:
    """The result's columns: name, and type in Spark's words where Arrow's differ."""
    return [{"name": f.name, "type": _type_name(f.type)} for f in schema]


def json_rows(batch: pa.RecordBatch) -> Iterator[list[Any]]:
    """A batch's rows as JSON values, one list per row."""
    columns = [column.to_pylist() for column in batch.columns]
    for row in zip(*columns, strict=True):
        yield [_json_value(v) for v in row]


def result_document(result: QueryResult) -> dict[str, Any]:
    """The whole JSON document (for results a limit keeps small: serve's)."""
    rows = [row for batch in result.batches() for row in json_rows(batch)]
    return {
        "columns": columns_of(result.schema),
        "rows": rows,
        "row_count": result.row_count,
        "truncated": result.truncated,
    }


def write_json(result: QueryResult, out: IO[str]) -> None:
    """The JSON document, written as the batches come (its rows never all in memory)."""
    out.write('{\n  "columns": ' + json.dumps(columns_of(result.schema)) + ',\n  "rows": [')
    first = True
    for batch in result.batches():
        lines = [json.dumps(row, default=str) for row in json_rows(batch)]
        if lines:
            out.write(("\n    " if first else ",\n    ") + ",\n    ".join(lines))
            first = False
    out.write(("\n  " if not first else "") + "],\n")
    out.write(f'  "row_count": {result.row_count},\n')
    out.write(f'  "truncated": {json.dumps(result.truncated)}\n}}\n')


def write_csv(result: QueryResult, out: IO[bytes]) -> None:
    """A header line, then the rows (Arrow's CSV writer; nulls as empty fields)."""
    from pyarrow import csv

    nested = [f.name for f in result.schema if _is_nested(f.type)]
    if nested:
        result.close()
        raise HakiriError(
            f"CSV cannot hold the nested column(s) {', '.join(nested)}",
            "use --format json or parquet, or select fields of them (to_json(col) makes text)",
        )
    with csv.CSVWriter(out, result.schema) as writer:
        _write_all(writer, result.batches())


def write_parquet(result: QueryResult, out: IO[bytes]) -> None:
    """One Parquet file, a row group per few batches (Arrow's writer)."""
    from pyarrow import parquet

    with parquet.ParquetWriter(out, result.schema) as writer:
        _write_all(writer, result.batches())


def _write_all(writer: Any, batches: Iterable[pa.RecordBatch]) -> None:
    for batch in batches:
        writer.write_batch(batch)


def _is_nested(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return pa.types.is_nested(kind)


def _type_name(kind: pa.DataType) -> str:
    import pyarrow as pa

    if pa.types.is_string(kind) or pa.types.is_large_string(kind) or pa.types.is_string_view(kind):
        return "string"
    if pa.types.is_timestamp(kind):
        return "timestamp" if kind.tz else "timestamp_ntz"
    names = {
        pa.int8(): "byte",
        pa.int16(): "short",
        pa.int32(): "integer",
        pa.int64(): "long",
        pa.float32(): "float",
        pa.float64(): "double",
        pa.bool_(): "boolean",
        pa.date32(): "date",
        pa.binary(): "binary",
        pa.large_binary(): "binary",
    }
    if kind in names:
        return names[kind]
    if pa.types.is_decimal(kind):
        return f"decimal({kind.precision},{kind.scale})"
    return str(kind)
