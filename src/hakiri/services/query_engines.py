"""The engines `hakiri query` runs a prepared query on. Each registers the scans (Delta tables at
their versions) and defines the views, runs the query, and hands back its rows as Arrow record
batches, at most `limit`, stopped after `timeout` seconds.

- duckdb (the default): DuckDB in this process, over delta-rs's Arrow datasets of the tables
  (delta-rs reads the log: versions, partitions, schema; DuckDB scans the parquet files through
  Arrow, pushing projections and filters down). The Spark SQL of views and queries is
  transpiled by sqlglot (`read="spark", write="duckdb"`). The connection has external access
  off: it reads the datasets registered here and nothing else, whatever the SQL says.
- sail: Sail's Spark Connect server in this process; Spark SQL as written.
- spark: hakiri's warm local Spark Connect server (started if it is not running), delta-spark.

docs/query.md says why DuckDB is the default (bench/query.py measured them).
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any, Protocol

from hakiri.errors import HakiriError, QueryTimeout
from hakiri.services.query import PreparedQuery, QueryResult
from hakiri.spec.loader import Project

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = ["ENGINES", "QueryEngine", "engine_named", "run_query", "to_duckdb"]

# The engines `hakiri query` runs on; the first is the default (docs/query.md, "Engines").
ENGINES = ("duckdb", "sail", "spark")

Rows = tuple["pa.Schema", Iterator["pa.RecordBatch"], Callable[[], None]]
_BATCH_ROWS = 65_536
_ON_SPARK = "`--engine sail` runs the Spark SQL as written"


class QueryEngine(Protocol):
    def run(self, query: PreparedQuery, limit: int | None, timeout: float | None) -> Rows:
        """(schema, batches, close): the rows, read lazily; `close` ends the query early."""
        ...


def run_query(
    project: Project,
    query: PreparedQuery,
    *,
    engine: str = ENGINES[0],
    limit: int | None = None,
    timeout: float | None = None,
    env: Mapping[str, str] | None = None,
) -> QueryResult:
    """The prepared query's rows (at most `limit`) on `engine`, as a stream of batches;
    QueryTimeout when it runs over `timeout` seconds (reading the rows included)."""
    runner = engine_named(engine, project, os.environ if env is None else env)
    # limit + 1: the engine may stop after one row more than the cap, which says it cut.
    schema, batches, close = runner.run(query, None if limit is None else limit + 1, timeout)
    return QueryResult(schema, batches, limit, engine, _close=close)


def engine_named(name: str, project: Project, env: Mapping[str, str]) -> QueryEngine:
    if name == "duckdb":
        return DuckDBEngine()
    if name in ("sail", "spark"):
        return SparkEngine(project, env, remote="sail" if name == "sail" else None)
    raise HakiriError(f"no query engine `{name}`", "use duckdb, sail or spark")


def to_duckdb(sql: str, what: str = "the query") -> str:
    """Spark SQL as DuckDB's, or an error naming what sqlglot cannot translate."""
    import sqlglot
    from sqlglot.errors import ErrorLevel, SqlglotError

    try:
        return sqlglot.transpile(
            sql, read="spark", write="duckdb", unsupported_level=ErrorLevel.RAISE
        )[0]
    except SqlglotError as exc:
        raise HakiriError(
            f"{what} cannot be translated from Spark SQL to DuckDB's: {_first_line(exc)}",
            _ON_SPARK,
        ) from None


class DuckDBEngine:
    def run(self, query: PreparedQuery, limit: int | None, timeout: float | None) -> Rows:
        import duckdb
        from pyarrow import fs

        sql = to_duckdb(query.sql)
        views = [(v.name, to_duckdb(v.sql, f"view `{v.name}`")) for v in query.views]
        con = duckdb.connect(config={"enable_external_access": False})
        timer = _Deadline(timeout, con.interrupt)
        try:
            for scan in query.scans:
                # pyarrow's own local filesystem, not delta-rs's Python one: no scan thread
                # calls back into Python (what made `context show` read with one thread).
                local = fs.SubTreeFileSystem(str(scan.path), fs.LocalFileSystem())
                con.register(scan.relation, scan.delta.to_pyarrow_dataset(filesystem=local))
            for name, text in views:
                with _duckdb_errors(timer, f"view `{name}`"):
                    con.execute(f'CREATE VIEW "{name}" AS {text}')
            with _duckdb_errors(timer, "the query"):
                reader = con.sql(sql).to_arrow_reader(_BATCH_ROWS)
        except BaseException:
            timer.cancel()
            con.close()
            raise

        def batches() -> Iterator[pa.RecordBatch]:
            seen = 0
            while limit is None or seen < limit:
                with _duckdb_errors(timer, "the query"):
                    try:
                        batch = reader.read_next_batch()
                    except StopIteration:
                        return
                seen += batch.num_rows
                yield batch

        def close() -> None:
            timer.cancel()
            con.close()

        return reader.schema, batches(), close


class SparkEngine:
    """Sail in this process, or the project's Spark (its warm local server): temp views in a
    session of the query's own, so nothing it defines is seen by other work on the engine."""

    def __init__(self, project: Project, env: Mapping[str, str], remote: str | None) -> None:
        from hakiri.services.runtime import LazySpark

        self.spark = LazySpark(project, delta=True, remote=remote, env=env)

    def run(self, query: PreparedQuery, limit: int | None, timeout: float | None) -> Rows:
        from hakiri.spark.errors import spark_errors
        from hakiri.spark.session import isolated_session

        try:
            session = isolated_session(self.spark.get(), {})
            timer = _Deadline(timeout, session.interruptAll)
            with spark_errors("running the query"):
                for scan in query.scans:
                    reader = session.read.format("delta")
                    if scan.version is not None:
                        reader = reader.option("versionAsOf", scan.version)
                    reader.load(str(scan.path)).createOrReplaceTempView(scan.relation)
                for view in query.views:
                    session.sql(view.sql).createOrReplaceTempView(view.name)
                frame = session.sql(query.sql)
                if limit is not None:
                    frame = frame.limit(limit)
                try:
                    table = frame.toArrow()
                except Exception:
                    if timer.fired:
                        raise QueryTimeout(*_timeout_words(timeout)) from None
                    raise
            timer.cancel()
        except BaseException:
            self.spark.stop()
            raise
        return table.schema, iter(table.to_batches(_BATCH_ROWS)), self.spark.stop


class _Deadline:
    """Calls `stop` once `timeout` seconds have passed, unless cancelled first."""

    def __init__(self, timeout: float | None, stop: Callable[[], Any]) -> None:
        self.timeout, self.fired = timeout, False
        self._timer: threading.Timer | None = None
        if timeout is not None:
            self._timer = threading.Timer(timeout, self._fire, args=(stop,))
            self._timer.daemon = True
            self._timer.start()

    def _fire(self, stop: Callable[[], Any]) -> None:
        self.fired = True
        with contextlib.suppress(Exception):  # the query ended (and closed) meanwhile
            stop()

    def cancel(self) -> None:
        if self._timer is not None:
            self._timer.cancel()


class _duckdb_errors:
    """DuckDB's errors as one line each; an interrupt by the deadline as QueryTimeout."""

    def __init__(self, deadline: _Deadline, what: str) -> None:
        self.deadline, self.what = deadline, what

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, exc: BaseException | None, tb: Any) -> bool:
        import duckdb

        if exc is None or not isinstance(exc, duckdb.Error):
            return False
        if isinstance(exc, duckdb.InterruptException) or self.deadline.fired:
            raise QueryTimeout(*_timeout_words(self.deadline.timeout)) from None
        raise HakiriError(
            f"{self.what} failed on DuckDB: {_first_line(exc)}",
            f"check the names and types it uses (`hakiri context show TABLE`); {_ON_SPARK}",
        ) from None


def _timeout_words(timeout: float | None) -> tuple[str, str]:
    return (
        f"the query ran over its time limit ({timeout:g}s) and was stopped",
        "narrow it (a WHERE, fewer joins), or raise [serve] query_timeout",
    )


def _first_line(exc: BaseException) -> str:
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    return lines[0] if lines else type(exc).__name__
