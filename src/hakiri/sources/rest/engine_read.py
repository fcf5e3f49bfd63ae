"""An API's records read inside the engine: one Spark task per walk, rows out as Arrow.

A walk is one chunk's requests (one repository's issues since a time, one page token's
run of pages): its pages are fetched in order inside a single task, so an opaque page
token is never followed in parallel, while walks run side by side. The driver builds a
frame of walk numbers, one per partition (`spark.range`), and `mapInArrow` turns each
into the records of its pages; the driver never sees a record. Every engine hakiri runs
on (Apache Spark over Spark Connect or in-process, Sail) runs the same Python function.

Each record becomes a row of the declared columns: a column names a field by a JSON path
(`user.login`), the value travels as text (nested objects and lists as JSON) and is cast
to the column's Spark type on the engine, the way declared columns of a CSV are. A task
that fails (a refused token, a page that never came) fails the read; `task_error` turns
what the engine reports back into the client's one-line hakiri error, secrets masked.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.guards.spark_types import quoted_name
from hakiri.sources.rest.budget import LeakyBucket, RateBudget
from hakiri.sources.rest.client import Auth, RestClient, RetryPolicy
from hakiri.sources.rest.paginate import PagePosition, Paginator, walk_pages
from hakiri.sources.rest.select import JsonPath
from hakiri.sources.task_errors import carried

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql import DataFrame

__all__ = [
    "ApiColumn",
    "Endpoint",
    "Walk",
    "read_children",
    "read_walks",
    "record_end",
    "recorded_end",
]


@dataclass(frozen=True)
class ApiColumn:
    """One column of the rows: its name, the JSON path of its value in a record, its Spark
    type."""

    name: str
    path: str
    type: str = "string"


@dataclass(frozen=True)
class Endpoint:
    """What every walk of one read shares: the API, how to authenticate and page, where the
    records are in a response and which columns they become."""

    base_url: str
    paginator: Paginator
    records: str  # JSON path of the records in a response body ('$' for a top-level list)
    columns: tuple[ApiColumn, ...]
    auth: Auth | None = None
    secrets: Mapping[str, str] = field(default_factory=dict, repr=False)
    headers: Mapping[str, str] = field(default_factory=dict)
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    budget: RateBudget | None = None  # shared by every task of the run
    bucket: LeakyBucket | None = None  # the API's own limit, as its answers report it
    timeout: float = 30.0


@dataclass(frozen=True)
class Walk:
    """One chunk's requests: an endpoint path and its params, walked from `start` (a stored
    `PagePosition`, None: the first page) to the last page. `values` are columns every row
    of the walk gets (e.g. the repository it came from)."""

    path: str
    params: Mapping[str, str] = field(default_factory=dict)
    start: Mapping[str, Any] | None = None
    values: Mapping[str, str] = field(default_factory=dict)
    # (JSON path, ISO time): an endpoint sorted by that field, ascending, is walked only up
    # to the first page whose last record is past the time (the chunk's end).
    until: tuple[str, str] | None = None
    pages: int | None = None  # read at most this many pages (None: to the last one)
    # Where the task records the position after its last page ({"following": position or
    # null}), so the next batch of an opaque walk starts there (`record_end`).
    end_file: str | None = None


def read_walks(spark: Any, endpoint: Endpoint, walks: Sequence[Walk]) -> DataFrame:
    """The records of every walk as one lazy DataFrame of `endpoint.columns` (then the
    walks' `values` columns), typed; one task per walk."""

    if not walks:
        raise ValueError("read_walks needs at least one walk")
    extra = _value_names(walks)
    names = [c.name for c in endpoint.columns] + extra
    text_schema = ", ".join(f"{quoted_name(n)} string" for n in names)
    numbers = spark.range(0, len(walks), 1, len(walks))
    rows = numbers.mapInArrow(_reader(endpoint, tuple(walks), names), text_schema)
    return rows.select(*_typed(endpoint.columns), *[quoted_name(n) for n in extra])


def _typed(columns: Sequence[ApiColumn]) -> list[Any]:
    """Text columns as their types: JSON text parsed for structs, arrays and maps, other
    types cast (as declared columns of a CSV are)."""
    from pyspark.sql import functions as F

    found = []
    for column in columns:
        text = F.col(quoted_name(column.name))
        nested = column.type.lstrip().lower().startswith(("struct", "array", "map"))
        value = F.from_json(text, column.type) if nested else text.cast(column.type)
        found.append(value.alias(column.name))
    return found


def _value_names(walks: Sequence[Walk]) -> list[str]:
    names = list(walks[0].values)
    for walk in walks:
        if list(walk.values) != names:
            raise ValueError("every walk of one read must carry the same value columns")
    return names


def _reader(
    endpoint: Endpoint, walks: tuple[Walk, ...], names: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    """The task's function: for each walk number in its partition, every page of that walk
    as one Arrow batch of text columns."""

    def read(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with carried():
            yield from pages(numbers)

    def pages(numbers: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        schema = pa.schema([(n, pa.string()) for n in names])
        paths = [(c.name, JsonPath.parse(c.path)) for c in endpoint.columns]

        def batch_of(found: list[dict[str, Any]], walk: Walk) -> pa.RecordBatch:
            columns = {name: [_text(path.first(r)) for r in found] for name, path in paths}
            for name, value in walk.values.items():
                columns[name] = [value] * len(found)
            return pa.RecordBatch.from_pydict(columns, schema=schema)

        records = JsonPath.parse(endpoint.records)
        with _client(endpoint) as client:
            for batch in numbers:
                for number in batch.column(0).to_pylist():
                    walk = walks[number]
                    start = PagePosition.from_json(walk.start) if walk.start else None
                    following = start
                    for read_pages, page in enumerate(
                        walk_pages(
                            client,
                            walk.path,
                            dict(walk.params),
                            endpoint.paginator,
                            records,
                            start=start,
                        ),
                        start=1,
                    ):
                        following = page.following
                        if page.records:
                            yield batch_of(page.records, walk)
                        if _past(walk, page.records):
                            break  # sorted by `until`'s field: later pages are past it too
                        if walk.pages is not None and read_pages >= walk.pages:
                            break
                    if walk.end_file is not None:
                        record_end(walk.end_file, following)

    return read


def record_end(path: str, following: PagePosition | None) -> None:
    """Write where a walk stopped, durably and whole (a reader sees the old file or the new
    one, never half of one)."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"following": following.to_json() if following else None})
    temporary = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    with open(temporary, "w", encoding="utf-8") as out:
        out.write(text)
        out.flush()
        os.fsync(out.fileno())
    os.replace(temporary, target)


def recorded_end(path: str) -> tuple[bool, dict[str, Any] | None]:
    """(found, following) of a walk's end file; following None: the walk reached its end."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except FileNotFoundError:
        return False, None
    following = json.loads(text).get("following")
    return True, following


def read_children(
    spark: Any,
    endpoint: Endpoint,
    parents: DataFrame,
    path: str,
    values: Mapping[str, str],
    params: Mapping[str, str],
    tasks: int,
) -> DataFrame:
    """The records of a child endpoint, fetched once per parent row (one walk each, its
    path filled from the parent's columns: 'issues/{number}/comments'), in `tasks` engine
    tasks; each row also gets `values` (name -> parent column). Parents whose path fields
    are NULL have no children."""
    from pyspark.sql import functions as F

    pieces = re.split(r"\{([^{}]+)\}", path)
    target = F.concat(
        *[
            F.lit(piece) if i % 2 == 0 else F.col(quoted_name(piece)).cast("string")
            for i, piece in enumerate(pieces)
            if i % 2 == 1 or piece
        ]
    )
    described = parents.select(
        target.alias(_PATH),
        *[F.col(quoted_name(field)).cast("string").alias(name) for name, field in values.items()],
    ).where(F.col(_PATH).isNotNull())
    names = [c.name for c in endpoint.columns] + list(values)
    text_schema = ", ".join(f"{quoted_name(n)} string" for n in names)
    rows = described.repartition(max(1, tasks)).mapInArrow(
        _child_reader(endpoint, dict(params), names, list(values)), text_schema
    )
    typed = _typed(endpoint.columns)
    kinds = dict(parents.dtypes)
    copied = [F.col(quoted_name(n)).cast(kinds[f]).alias(n) for n, f in values.items()]
    return rows.select(*typed, *copied)


_PATH = "_hakiri_path"


def _child_reader(
    endpoint: Endpoint, params: dict[str, str], names: list[str], value_names: list[str]
) -> Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]:
    def read(parents: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        with carried():
            yield from pages(parents)

    def pages(parents: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        schema = pa.schema([(n, pa.string()) for n in names])
        paths = [(c.name, JsonPath.parse(c.path)) for c in endpoint.columns]
        records = JsonPath.parse(endpoint.records)
        with _client(endpoint) as client:
            for batch in parents:
                for parent in batch.to_pylist():
                    for page in walk_pages(
                        client, parent[_PATH], params, endpoint.paginator, records
                    ):
                        if not page.records:
                            continue
                        found = page.records
                        columns = {n: [_text(p.first(r)) for r in found] for n, p in paths}
                        for name in value_names:
                            columns[name] = [parent[name]] * len(found)
                        yield pa.RecordBatch.from_pydict(columns, schema=schema)

    return read


def _client(endpoint: Endpoint) -> RestClient:
    return RestClient(
        endpoint.base_url,
        auth=endpoint.auth,
        secrets=endpoint.secrets,
        headers=endpoint.headers,
        timeout=endpoint.timeout,
        retry=endpoint.retry,
        budget=endpoint.budget,
        bucket=endpoint.bucket,
    )


def _past(walk: Walk, found: list[dict[str, Any]]) -> bool:
    """Is the last record of a page past the walk's `until` (so no later page is needed)?"""
    if walk.until is None or not found:
        return False
    path, until = walk.until
    last = JsonPath.parse(path).first(found[-1])
    if last is None:
        return False
    return datetime.fromisoformat(str(last)) > datetime.fromisoformat(until)


def _text(value: Any) -> str | None:
    """A JSON value as the text the engine casts: objects and lists as JSON, booleans as
    true/false, NULL as NULL."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, dict | list):
        return json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    return str(value)
