"""`hakiri query` and serve's `POST /v1/query`: one read-only Spark SQL query over the context
store's tables and the project's views, answered as a stream of Arrow record batches.

    prepare_query  the guard (hakiri.guards.context_sql), every name it reads resolved to a
                   table of the project's context stores or a view of its manifests, the
                   versions it time-travels to checked, the views it needs in definition order
    run_query      (services.query_engines) the prepared query on an engine: DuckDB over
                   delta-rs's Arrow datasets by default (docs/query.md says why), or Sail or
                   Apache Spark, with a row cap that says whether it cut the result

Nothing here loops over rows: results stay Arrow batches until a writer
(services.query_output) turns them into a table, JSON, CSV or Parquet.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.destinations.context.inspect import list_tables
from hakiri.errors import HakiriError, UnsafeQuery
from hakiri.spec.loader import Project
from hakiri.spec.views import ViewSpec

if TYPE_CHECKING:
    import pyarrow as pa

__all__ = [
    "PreparedQuery",
    "QueryResult",
    "TableScan",
    "prepare_query",
    "project_tables",
]


@dataclass(frozen=True)
class TableScan:
    """One Delta table the query reads, at one version, under the name the SQL gives it."""

    relation: str  # the name the prepared SQL reads it by
    table: str
    path: Path
    version: int | None  # None: the latest
    delta: Any = None  # the opened deltalake.DeltaTable (at `version`), for readers that use it


@dataclass(frozen=True)
class PreparedQuery:
    """A query the guard accepted, with everything it reads resolved."""

    sql: str  # Spark SQL; a time-travelled table is read by its scan's relation name
    scans: tuple[TableScan, ...]
    views: tuple[ViewSpec, ...]  # the views it needs, each after the views it reads
    reads: tuple[str, ...]  # the names the user's query itself reads


def project_tables(project: Project) -> dict[str, Path]:
    """Every table of the project's context stores (the project's own store first, then a
    pipeline's own `config.path`): name -> table directory; a name in two stores is the
    first store's."""
    from hakiri.services.context import stores_of

    found: dict[str, Path] = {}
    for store in stores_of(project):
        for name in list_tables(store):
            found.setdefault(name, store / name)
    return found


def prepare_query(project: Project, text: str) -> PreparedQuery:
    """The query, checked and resolved; UnsafeQuery with its line and column when the guard
    refuses it, HakiriError naming what exists when it reads an unknown name or version."""
    from hakiri.guards.context_sql import check_context_sql

    try:
        checked = check_context_sql(text, time_travel=True)
    except UnsafeQuery as exc:
        where = f" (query line {exc.line}, column {exc.column})" if exc.line else ""
        raise UnsafeQuery(
            f"{exc.reason}{where}", exc.hint, line=exc.line, column=exc.column
        ) from None
    tables = project_tables(project)
    views = project.views
    for name in checked.reads:
        if name not in tables and name not in views:
            raise HakiriError(
                f"`{name}` is neither a table of the context store nor a view",
                f"tables: {', '.join(sorted(tables)) or 'none yet (`hakiri apply` writes them)'}"
                f"; views: {', '.join(views) or 'none'}",
            )
    for name in checked.versions:
        if name in views and name not in tables:
            raise HakiriError(
                f"`{name}` is a view: time travel reads a version of a table",
                f"time-travel the tables it reads instead (`{name}` reads "
                f"{', '.join(_view_reads(views[name])) or 'nothing'})",
            )
    needed_views = _needed_views(checked.reads, views)
    view_tables = {r: v.name for v in needed_views for r in _view_reads(v) if r not in views}
    for name, view in view_tables.items():
        if name not in tables:
            raise HakiriError(
                f"view `{view}` reads `{name}`, which is not in the context store yet",
                "`hakiri apply` loads it",
            )
    # A query that reads `orders@v1` reads that version under a name of its own that no table
    # or view has; `orders` read bare too (by the query or a view) is the latest, a second scan.
    taken = set(tables) | set(views)
    renamed: dict[tuple[str, int], str] = {}
    scans: list[TableScan] = []
    for name, version in _versioned_reads(checked.sql):
        relation = _free_name(f"_{name}_v{version}", taken)
        taken.add(relation)
        renamed[name, version] = relation
        scans.append(TableScan(relation, name, tables[name], version, _open(tables[name], version)))
    bare = set(view_tables) | _bare_reads(checked.sql, set(views))
    for name in sorted(bare):
        scans.append(TableScan(name, name, tables[name], None, _open(tables[name], None)))
    sql = _renamed(checked.sql, renamed) if renamed else checked.sql
    return PreparedQuery(sql, tuple(scans), tuple(needed_views), checked.reads)


@dataclass
class QueryResult:
    """The rows of a query as Arrow record batches, at most `limit` of them (None: all);
    `truncated` is known once `batches()` has been read to its end."""

    schema: pa.Schema
    _batches: Iterator[pa.RecordBatch]
    limit: int | None
    engine: str
    truncated: bool = False
    row_count: int = 0
    _close: Any = None

    def batches(self) -> Iterator[pa.RecordBatch]:
        """Each batch once; stops at `limit` rows (reading one more row to know it cut)."""
        try:
            for batch in self._batches:
                if self.limit is not None and self.row_count + batch.num_rows > self.limit:
                    keep = self.limit - self.row_count
                    if keep:
                        self.row_count += keep
                        yield batch.slice(0, keep)
                    self.truncated = True
                    return
                self.row_count += batch.num_rows
                if batch.num_rows:
                    yield batch
        finally:
            self.close()

    def close(self) -> None:
        if self._close is not None:
            close, self._close = self._close, None
            close()


# ------------------------------------------------------------------------ names and versions


def _view_reads(view: ViewSpec) -> tuple[str, ...]:
    from hakiri.spec.view_checks import view_reads

    return view_reads(view)


def _needed_views(reads: tuple[str, ...], views: Mapping[str, ViewSpec]) -> list[ViewSpec]:
    """The views `reads` reach, directly or through other views, in the project's order (each
    after those it reads: `Project.views` is in that order)."""
    wanted: set[str] = set()
    todo = [n for n in reads if n in views]
    while todo:
        name = todo.pop()
        if name in wanted:
            continue
        wanted.add(name)
        todo.extend(r for r in _view_reads(views[name]) if r in views)
    return [view for name, view in views.items() if name in wanted]


def _free_name(name: str, taken: set[str]) -> str:
    while name in taken:
        name = f"_{name}"
    return name


def _bare_reads(sql: str, views: set[str]) -> set[str]:
    """The tables the query reads without a version (not its CTEs, not views)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="spark")
    ctes = {cte.alias_or_name.lower() for cte in tree.find_all(exp.CTE)}
    return {
        t.name.lower()
        for t in tree.find_all(exp.Table)
        if t.args.get("version") is None and t.name.lower() not in ctes | views
    }


def _versioned_reads(sql: str) -> list[tuple[str, int]]:
    """Each (table, version) the query time-travels to, once, first mention first."""
    import sqlglot
    from sqlglot import exp

    found: dict[tuple[str, int], None] = {}
    for table in sqlglot.parse_one(sql, read="spark").find_all(exp.Table):
        version = table.args.get("version")
        if version is not None:
            found[table.name.lower(), int(version.args["expression"].this)] = None
    return list(found)


def _renamed(sql: str, renamed: Mapping[tuple[str, int], str]) -> str:
    """`orders VERSION AS OF 3 o` -> `_orders_v3 AS o` (`_orders_v3 AS orders` without an
    alias, so `orders.id` still names its columns)."""
    import sqlglot
    from sqlglot import exp

    tree = sqlglot.parse_one(sql, read="spark")
    for table in list(tree.find_all(exp.Table)):
        version = table.args.get("version")
        if version is None:
            continue
        relation = renamed[table.name.lower(), int(version.args["expression"].this)]
        table.set("version", None)
        if not table.alias:
            table.set("alias", exp.TableAlias(this=exp.to_identifier(table.name)))
        table.set("this", exp.to_identifier(relation))
    return tree.sql(dialect="spark")


def _open(path: Path, version: int | None) -> Any:
    """The table at `version` (the latest when None), or an error naming the latest."""
    from hakiri.services.context import ContextTable, open_version

    return open_version(ContextTable(path.name, path.parent), version)
