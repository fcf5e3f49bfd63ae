"""Read a PostgreSQL query into a DataFrame on any engine: the engine's own task runs
`COPY (query) TO STDOUT (FORMAT csv)` and pyarrow parses the stream into Arrow batches.

Spark's JDBC reader exists on Apache Spark only (Sail has none), so what hakiri reads back
from PostgreSQL while it loads (the live keys the delete guard counts, quarantined rows to
replay) goes through this instead, on every engine. The rows never pass through the driver:
one task (`mapInArrow` over a one-row frame) opens the connection, streams the CSV and yields
record batches; the engine then casts each column from text to the type asked for.

CSV keeps what the values are: NULL is an unquoted empty field and an empty string a quoted
one (pyarrow tells them apart); the session's time zone is UTC and its date style ISO, so
dates and timestamps read back as the same instants. On a cluster the executors need psycopg
and pyarrow, and must reach the database (as for the COPY stage writer).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["as_text", "columns_of", "read_queries", "read_query", "spark_type"]

_BLOCK = 8 * 1024 * 1024  # bytes of CSV pyarrow parses per record batch


def read_query(
    spark: SparkSession, url: str, query: str, columns: Sequence[tuple[str, str]]
) -> DataFrame:
    """The rows of `query` (a SELECT whose output columns are `columns`, in order) as a
    DataFrame with those names and Spark SQL types (e.g. [("id", "bigint")])."""
    return read_queries(spark, url, [query], columns)


def read_queries(
    spark: SparkSession, url: str, queries: Sequence[str], columns: Sequence[tuple[str, str]]
) -> DataFrame:
    """`read_query` over several queries of the same columns, one engine task each (the
    partitions of a split read); their rows together. A column typed 'binary' arrives as
    base64 text (`encode(c, 'base64')` in the query) and is decoded here."""
    from pyspark.sql import functions as F

    names = [name for name, _ in columns]
    text = ", ".join(f"`{_positional(i)}` string" for i in range(len(names)))
    tasks = spark.range(len(queries), numPartitions=len(queries))
    rows = tasks.mapInArrow(_copy_out(url, list(queries), len(names)), text)
    converted = []
    for i, (name, kind) in enumerate(columns):
        value = F.col(f"`{_positional(i)}`")
        if kind == "binary":
            converted.append(F.unbase64(F.regexp_replace(value, "\\s", "")).alias(name))
        elif kind.startswith("array<"):  # JSON text (`as_text`)
            converted.append(F.from_json(value, kind).alias(name))
        else:
            converted.append(value.cast(kind).alias(name))
    return rows.select(*converted)


# PostgreSQL types as Spark's JDBC reader typed them (its PostgresDialect), so targets that
# hakiri created from them keep their types; others arrive as text.
_SPARK_TYPES = {
    "smallint": "smallint",
    "integer": "int",
    "bigint": "bigint",
    "real": "float",
    "double precision": "double",
    "boolean": "boolean",
    "date": "date",
    "timestamp with time zone": "timestamp",
    "timestamp without time zone": "timestamp",
    "bytea": "binary",
}


def columns_of(url: str, schema: str, table: str) -> list[tuple[str, str]]:
    """(name, format_type) of a table's columns, in order."""
    import psycopg
    from psycopg import sql

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute(
            sql.SQL(
                "SELECT attname, format_type(atttypid, atttypmod) FROM pg_attribute "
                "WHERE attrelid = {}::regclass AND attnum > 0 AND NOT attisdropped "
                "ORDER BY attnum"
            ).format(sql.Literal(sql.Identifier(schema, table).as_string(conn)))
        ).fetchall()
    return [(str(name), str(kind)) for name, kind in rows]


def spark_type(kind: str) -> str:
    """The Spark SQL type of a PostgreSQL column type (`format_type`), as Spark's JDBC reader
    gives it: numeric(p,s) as decimal(p,s), a bare numeric as decimal(38,18), arrays of the
    types above as arrays, anything else as string."""
    if kind.endswith("[]"):
        element = spark_type(kind[:-2])
        return f"array<{element}>" if element != "binary" else "string"
    if kind.startswith(("numeric(", "decimal(")):
        return "decimal" + kind[kind.index("(") :].replace(" ", "")
    if kind in ("numeric", "decimal"):
        return "decimal(38,18)"
    return _SPARK_TYPES.get(kind, "string")


def as_text(name: str, kind: str) -> Any:
    """The column as text the engine reads back exactly: ISO-8601 UTC instants, base64 bytes,
    JSON arrays; `name AS name` for a SELECT list."""
    from psycopg import sql

    column = sql.Identifier(name)
    if kind == "timestamp with time zone":
        text = "to_char({} AT TIME ZONE 'UTC', 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"
    elif kind == "timestamp without time zone":
        text = "to_char({}, 'YYYY-MM-DD\"T\"HH24:MI:SS.US')"
    elif kind == "bytea":
        text = "encode({}, 'base64')"
    elif kind.endswith("[]") and spark_type(kind) != "string":
        text = "to_jsonb({})::text"
    else:
        text = "{}::text"
    return sql.SQL(text + " AS {}").format(column, column)


def _positional(i: int) -> str:
    return f"_c{i}"


def _copy_out(url: str, queries: list[str], width: int) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The task: for each query index in its input, stream that query out of PostgreSQL as
    CSV and yield it as Arrow record batches of strings (columns _c0, _c1, …)."""

    def task(batches: Iterator[Any]) -> Iterator[Any]:
        import psycopg
        import pyarrow as pa
        import pyarrow.csv as pacsv

        names = [_positional(i) for i in range(width)]
        convert = pacsv.ConvertOptions(
            column_types={name: pa.string() for name in names},
            null_values=[""],
            strings_can_be_null=True,
            quoted_strings_can_be_null=False,  # "" is an empty string, not NULL
        )
        read = pacsv.ReadOptions(column_names=names, block_size=_BLOCK)
        mine = [int(i) for batch in batches for i in batch.column(0).to_pylist()]
        if not mine:
            return
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute("SET TimeZone TO 'UTC'")
            conn.execute("SET DateStyle TO 'ISO, YMD'")
            conn.execute("SET IntervalStyle TO 'iso_8601'")
            conn.execute("SET extra_float_digits TO 3")
            for index in mine:
                with conn.cursor() as cursor:
                    statement = f"COPY ({queries[index]}) TO STDOUT (FORMAT csv)"
                    with cursor.copy(statement) as copy:  # type: ignore[arg-type]
                        stream = _Stream(copy)
                        if stream.empty():
                            continue
                        yield from pacsv.open_csv(
                            stream, read_options=read, convert_options=convert
                        )

    return task


class _Stream:
    """A COPY's output as a read-only binary file for pyarrow's CSV reader."""

    def __init__(self, copy: Any) -> None:
        self.copy, self.pending, self.closed = copy, bytearray(), False

    def empty(self) -> bool:
        self.pending += self._next()
        return not self.pending

    def _next(self) -> bytes:
        data = self.copy.read()
        return bytes(data) if data else b""

    def read(self, size: int = -1) -> bytes:
        while size < 0 or len(self.pending) < size:
            more = self._next()
            if not more:
                break
            self.pending += more  # bytearray: appends in place
        if size < 0 or size >= len(self.pending):
            out, self.pending = bytes(self.pending), bytearray()
            return out
        out = bytes(self.pending[:size])
        del self.pending[:size]
        return out

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return False

    def close(self) -> None:
        self.closed = True
