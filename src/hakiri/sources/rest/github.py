"""The `github` connector: issues, pull requests and issue comments of one or more
repositories, read past their `updated_at` cursor through GitHub's REST API.

A batch is a range of `updated_at` (the planner's chunks, as for a PostgreSQL table: a
backfill `window` cuts the history into chunks, a later apply reads from where the last
plan ended to the time it plans). Its read is one engine task per repository
(`rest.engine_read`): `since` = the range's start, sorted by `updated_at` ascending,
pages followed by GitHub's Link header until a page passes the range's end; the rows
outside the range are dropped on the engine. GitHub lists pull requests among the issues:
`issues` keeps those without a `pull_request` object, `pull_requests` those with one, both
from the issues endpoint (the only one with `since`). The token comes from the variable
`token_secret` names (GITHUB_TOKEN) and is never printed. `rate_budget` caps the
requests of every task of the pipeline on this machine together (`rest.budget`).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from hakiri.errors import HakiriError
from hakiri.sources.base import BatchRead, Reload, SourceColumn, SourceObservation, TablePlan
from hakiri.sources.cursors.batches import (
    check_cursor_fits_mode,
    incremental_of,
    plan_table,
    reload_from_source,
)
from hakiri.sources.cursors.ranges import CursorBounds, CursorColumn, CursorRange
from hakiri.sources.rest.budget import RateBudget, pipeline_budget
from hakiri.sources.rest.client import BearerToken, RestClient
from hakiri.sources.rest.engine_read import ApiColumn, Endpoint, Walk, read_walks
from hakiri.sources.rest.paginate import LinkHeader
from hakiri.sources.rest.ranges import api_time, in_range, settled_now
from hakiri.sources.task_errors import task_error
from hakiri.spec.pipeline import GithubConfig, PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile

if TYPE_CHECKING:
    from hakiri.catalog.records import Batch, NewBatch
    from hakiri.catalog.store import Catalog

__all__ = ["GithubTableSource"]

# The cursor's type, as the planner's cursors name it (a PostgreSQL type name).
_CURSOR_TYPE = "timestamp with time zone"
_HEADERS = {"X-GitHub-Api-Version": "2022-11-28"}
# Where a backfill starts without `start_from` or `window`: before GitHub's first issue.
_EPOCH = dt.datetime(2008, 1, 1, tzinfo=dt.UTC)

_ISSUE_COLUMNS = (
    ApiColumn("id", "id", "bigint"),
    ApiColumn("number", "number", "int"),
    ApiColumn("title", "title"),
    ApiColumn("state", "state"),
    ApiColumn("author", "user.login"),
    ApiColumn("labels", "labels"),
    ApiColumn("comments", "comments", "int"),
    ApiColumn("created_at", "created_at", "timestamp"),
    ApiColumn("updated_at", "updated_at", "timestamp"),
    ApiColumn("closed_at", "closed_at", "timestamp"),
    ApiColumn("body", "body"),
)
_PULL = ApiColumn("pull_request", "pull_request")
_TABLES: dict[str, tuple[str, tuple[ApiColumn, ...]]] = {
    "issues": ("issues", (*_ISSUE_COLUMNS, _PULL)),
    "pull_requests": (
        "issues",
        (*_ISSUE_COLUMNS, _PULL, ApiColumn("merged_at", "pull_request.merged_at", "timestamp")),
    ),
    "comments": (
        "issues/comments",
        (
            ApiColumn("id", "id", "bigint"),
            ApiColumn("issue_url", "issue_url"),
            ApiColumn("author", "user.login"),
            ApiColumn("body", "body"),
            ApiColumn("created_at", "created_at", "timestamp"),
            ApiColumn("updated_at", "updated_at", "timestamp"),
        ),
    ),
}


def loaded_columns(table: str) -> list[tuple[str, str]]:
    """(name, Spark type) of the rows a table loads, in order."""
    _, columns = _TABLES[table]
    found = [(c.name, c.type) for c in columns if c.name != "pull_request"]
    if table == "comments":
        found.insert(2, ("issue_number", "int"))
    return [*found, ("repo", "string")]


class GithubTableSource:
    has_cursors = True

    def __init__(
        self,
        spec: PipelineSpec,
        config: GithubConfig,
        env: Mapping[str, str],
        budget: RateBudget | None = None,
    ) -> None:
        self.spec, self.config, self.env, self.budget = spec, config, env, budget

    @classmethod
    def from_spec(
        cls, root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
    ) -> GithubTableSource:
        assert isinstance(spec.source.config, GithubConfig)
        rate = spec.backfill.rate_budget if spec.backfill else None
        return cls(spec, spec.source.config, env, pipeline_budget(root, spec.id, rate))

    # ------------------------------------------------------------------ observing and planning

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        """The columns the table loads; nothing is requested (what changed since the cursor
        is only known by asking, which `apply` does)."""
        return SourceObservation(
            table.name,
            columns=tuple(SourceColumn(n, t) for n, t in loaded_columns(table.name)),
        )

    def plan_batches(self, table: TableSpec, catalog: Catalog) -> TablePlan:
        cursor = self.cursor(table)
        where = f"pipeline `{self.spec.id}` (github {table.name})"
        check_cursor_fits_mode(self.spec, cursor, where)
        existing = [b for b in catalog.batches(self.spec.id) if b.table_name == table.name]
        state = catalog.get_cursor(self.spec.id, table.name)
        now = settled_now()
        backfill = self.spec.backfill
        first = state is None or state.get("planned_to") is None
        low = _EPOCH
        if first and backfill and backfill.window and backfill.start_from is None:
            # Windows from 2008 would be mostly empty chunks: start at the oldest record.
            low = self._oldest(table.name) or now
        return plan_table(
            self.spec,
            table,
            cursor,
            state,
            existing,
            lambda: CursorBounds(_CURSOR_TYPE, low, now),
            _no_fingerprint,
        )

    def _oldest(self, table: str) -> dt.datetime | None:
        """The earliest `updated_at` of the table in any repository: one request each (a
        windowed backfill's first plan)."""
        path, _ = _TABLES[table]
        params = _sorted_by_update(table, per_page=1)
        auth, secrets = self._auth()
        found = []
        with RestClient(
            self.config.base_url, auth=auth, secrets=secrets, headers=_HEADERS, budget=self.budget
        ) as client:
            for repo in self.config.repositories:
                records = client.get(f"/repos/{repo}/{path}", params).json()
                if isinstance(records, list) and records and records[0].get("updated_at"):
                    found.append(dt.datetime.fromisoformat(str(records[0]["updated_at"])))
        return min(found) if found else None

    def _auth(self) -> tuple[BearerToken | None, dict[str, str]]:
        """The bearer token from `token_secret`'s variable; none without it (GitHub then
        answers unauthenticated requests, 60 an hour)."""
        secret = self.config.token_secret
        token = self.env.get(secret)
        return (BearerToken(secret), {secret: token}) if token else (None, {})

    def cursor(self, table: TableSpec) -> CursorColumn:
        incremental = incremental_of(self.spec, table)
        assert incremental is not None  # the manifest's rules ask for it
        return CursorColumn.resolve(incremental, _CURSOR_TYPE, f"github {table.name}")

    def reloadable(
        self, table: TableSpec, committed: Sequence[Batch], upcoming: Sequence[Batch | NewBatch]
    ) -> Reload:
        return reload_from_source(committed)

    def requests_per_read(self) -> int:
        # A read's requests are its pages, counted where they are made: each engine task takes
        # them from the pipeline's shared budget (`rest.budget`), not from the engine's.
        return 0

    def refresh(self) -> None:
        pass

    # ------------------------------------------------------------------ reading

    def read(self, spark: Any, batch: Batch) -> BatchRead:
        from pyspark.sql import functions as F

        if batch.kind != "chunk" or not batch.predicate:
            raise HakiriError(
                f"batch {batch.batch_id} of github {batch.table_name} has no updated_at range",
                "run `hakiri apply` again: the planner makes a range for each batch",
            )
        chunk = CursorRange.from_predicate(batch.predicate)
        path, columns = _TABLES[batch.table_name]
        params = _sorted_by_update(batch.table_name, per_page=self.config.per_page)
        if chunk.lo is not None:
            params["since"] = api_time(chunk.lo)
        until = ("updated_at", api_time(chunk.hi)) if chunk.hi is not None else None
        walks = [
            Walk(f"/repos/{repo}/{path}", params, values={"repo": repo}, until=until)
            for repo in self.config.repositories
        ]
        auth, secrets = self._auth()
        endpoint = Endpoint(
            base_url=self.config.base_url,
            paginator=LinkHeader(),
            records="$",
            columns=columns,
            auth=auth,
            secrets=secrets,
            headers=_HEADERS,
            budget=self.budget,
        )
        frame = read_walks(spark, endpoint, walks).where(in_range(chunk, "updated_at"))
        if batch.table_name == "issues":
            frame = frame.where(F.col("pull_request").isNull())
        elif batch.table_name == "pull_requests":
            frame = frame.where(F.col("pull_request").isNotNull())
        else:
            number = F.element_at(F.split(F.col("issue_url"), "/"), -1).cast("int")
            frame = frame.withColumn("issue_number", number)
        frame = frame.select(*[name for name, _ in loaded_columns(batch.table_name)])
        label = f"github {batch.table_name} ({chunk.describe()})"
        return BatchRead(frame, label=label, explain=task_error)


def _sorted_by_update(table: str, *, per_page: int) -> dict[str, str]:
    """A table's endpoint params: every state, oldest update first."""
    params = {"sort": "updated", "direction": "asc", "per_page": str(per_page)}
    if table != "comments":
        params["state"] = "all"
    return params


def _no_fingerprint() -> str:
    raise AssertionError("a github table always reads past its updated_at cursor")
