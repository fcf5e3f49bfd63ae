"""Rendered queries on Spark: each input a temporary view of one piece of work, with a name
no other call uses, dropped when the work is done (a query's frame reads the views lazily,
so they live until the write that reads them has run)."""

from __future__ import annotations

import uuid
from types import TracebackType
from typing import TYPE_CHECKING

from sqlglot import exp

from hakiri.destinations.history.render import render, table

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, SparkSession

__all__ = ["TempViews"]


class TempViews:
    """`with TempViews(session) as views:` views of frames and of rendered queries."""

    def __init__(self, session: SparkSession) -> None:
        self.session = session
        self.prefix = f"hakiri_{uuid.uuid4().hex[:12]}"
        self.names: list[str] = []

    def __enter__(self) -> TempViews:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        for name in self.names:
            self.session.catalog.dropTempView(name)

    def add(self, frame: DataFrame, what: str) -> exp.Table:
        """`frame` as a view; the table a query names it by."""
        name = f"{self.prefix}_{what}"
        frame.createOrReplaceTempView(name)
        self.names.append(name)
        return table(name)

    def query(self, select: exp.Query) -> DataFrame:
        return self.session.sql(render(select, "spark"))

    def define(self, select: exp.Query, what: str) -> exp.Table:
        """A view of the query's rows (computed when read)."""
        return self.add(self.query(select), what)

    def count(self, select: exp.Query) -> int:
        """The one number a count query returns."""
        rows = self.query(select).collect()
        return int(rows[0][0]) if rows else 0

    def counts(self, select: exp.Query) -> tuple[int, ...]:
        """The one row of numbers a query of several counts returns (NULL as 0)."""
        rows = self.query(select).collect()
        return tuple(int(v or 0) for v in rows[0]) if rows else ()
