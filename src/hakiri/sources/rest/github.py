"""The `github` connector, a preset of `rest`: issues, pull requests and issue comments of
one or more repositories, read past their `updated_at` cursor through GitHub's REST API.

The manifest's `GithubConfig` becomes a `RestConfig` (`rest_config`): bearer auth from the
variable `token_secret` names (none when it is unset: GitHub answers unauthenticated
requests, 60 an hour), GitHub's API version header, Link-header pages, and one endpoint
per table, `repos/{repo}/issues` or `…/issues/comments` for each repository (`for_each`:
one engine task each, every row tagged with its `repo`), `since` = the range's start,
sorted by `updated_at` ascending. `RestTableSource` plans and reads it: a batch is a
range of `updated_at`, its walk stops at the first page past the range's end
(`sorted_by_cursor`), and the engine keeps the rows inside the range.

What is GitHub's own: the three tables and their columns; GitHub lists pull requests among
the issues, so `issues` keeps the records without a `pull_request` object and
`pull_requests` those with one, both from the issues endpoint (the only one with `since`);
a comment's `issue_number` is read from its `issue_url`; a first range starts in 2008,
before GitHub's first issue, and a windowed backfill without `start_from` starts at the
oldest record instead (one request per repository, at its first plan).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from hakiri.sources.base import SourceColumn, SourceObservation
from hakiri.sources.cursors.ranges import CursorColumn
from hakiri.sources.rest.budget import pipeline_budget
from hakiri.sources.rest.source import RestTableSource
from hakiri.spec.pipeline import GITHUB_TABLES, GithubConfig, PipelineSpec, TableSpec
from hakiri.spec.project import ProjectFile
from hakiri.spec.rest import BearerAuth, LinkHeaderPages, RestColumn, RestConfig, RestEndpoint

__all__ = ["GithubTableSource", "loaded_columns", "rest_config"]

# Where a first range starts without `start_from`: before GitHub's first issue.
_EPOCH = dt.datetime(2008, 1, 1, tzinfo=dt.UTC)
_HEADERS = {"X-GitHub-Api-Version": "2022-11-28"}

_ISSUE: dict[str, str | RestColumn] = {
    "id": "bigint",
    "number": "int",
    "title": "string",
    "state": "string",
    "author": RestColumn(path="user.login"),
    "labels": "string",
    "comments": "int",
    "created_at": "timestamp",
    "updated_at": "timestamp",
    "closed_at": "timestamp",
    "body": "string",
    "pull_request": "string",  # what tells a pull request; not loaded
}
# table -> (its endpoint under the repository, its columns)
_TABLES: dict[str, tuple[str, dict[str, str | RestColumn]]] = {
    "issues": ("issues", _ISSUE),
    "pull_requests": (
        "issues",
        {**_ISSUE, "merged_at": RestColumn(path="pull_request.merged_at", type="timestamp")},
    ),
    "comments": (
        "issues/comments",
        {
            "id": "bigint",
            "issue_url": "string",
            "author": RestColumn(path="user.login"),
            "body": "string",
            "created_at": "timestamp",
            "updated_at": "timestamp",
        },
    ),
}


def loaded_columns(table: str) -> list[tuple[str, str]]:
    """(name, Spark type) of the rows a table loads, in order."""
    _, columns = _TABLES[table]
    found = [
        (name, c if isinstance(c, str) else c.type)
        for name, c in columns.items()
        if name != "pull_request"
    ]
    if table == "comments":
        found.insert(2, ("issue_number", "int"))
    return [*found, ("repo", "string")]


def rest_config(config: GithubConfig, env: Mapping[str, str]) -> RestConfig:
    """The `rest` configuration that reads GitHub's tables."""
    token = config.token_secret
    return RestConfig(
        base_url=config.base_url,
        auth=BearerAuth(type="bearer", secret=token) if env.get(token) else None,
        headers=_HEADERS,
        paginator=LinkHeaderPages(type="link_header"),
        endpoints={table: _endpoint(table, config) for table in GITHUB_TABLES},
    )


def _endpoint(table: str, config: GithubConfig) -> RestEndpoint:
    path, columns = _TABLES[table]
    params = {"sort": "updated", "direction": "asc", "per_page": str(config.per_page)}
    if table != "comments":
        params["state"] = "all"
    return RestEndpoint(
        path=f"repos/{{repo}}/{path}",
        params={**params, "since": "{cursor}"},
        columns=columns,
        for_each=[{"repo": repo} for repo in config.repositories],
    )


class GithubTableSource(RestTableSource):
    connector = "github"
    start = _EPOCH
    sorted_by_cursor = True  # sort=updated, direction=asc

    @classmethod
    def from_spec(
        cls, root: Path, settings: ProjectFile, spec: PipelineSpec, env: Mapping[str, str]
    ) -> GithubTableSource:
        assert isinstance(spec.source.config, GithubConfig)
        rate = spec.backfill.rate_budget if spec.backfill else None
        config = rest_config(spec.source.config, env)
        return cls(root, spec, config, env, pipeline_budget(root, spec.id, rate))

    def observe(self, table: TableSpec, cursor: dict[str, Any] | None = None) -> SourceObservation:
        """The columns the table loads; nothing is requested (what changed since the cursor
        is only known by asking, which `apply` does)."""
        columns = tuple(SourceColumn(n, t) for n, t in loaded_columns(table.name))
        return SourceObservation(table.name, columns=columns)

    def _first_start(
        self, table: TableSpec, cursor: CursorColumn, state: dict[str, Any] | None, now: dt.datetime
    ) -> dt.datetime:
        backfill = self.spec.backfill
        first = state is None or state.get("planned_to") is None
        if not (first and backfill and backfill.window and backfill.start_from is None):
            return _EPOCH
        # Windows from 2008 would be mostly empty chunks: start at the oldest record, the
        # first of a page of one in each repository.
        endpoint = self._endpoint(table.name)
        params = {k: v for k, v in endpoint.params.items() if k != "since"} | {"per_page": "1"}
        found = []
        with self._client() as client:
            for path, _ in endpoint.paths():
                records = client.get(path, params).json()
                if isinstance(records, list) and records and records[0].get("updated_at"):
                    found.append(dt.datetime.fromisoformat(str(records[0]["updated_at"])))
        return min(found) if found else now

    def _shaped(self, table: str, frame: Any) -> Any:
        from pyspark.sql import functions as F

        if table == "issues":
            frame = frame.where(F.col("pull_request").isNull())
        elif table == "pull_requests":
            frame = frame.where(F.col("pull_request").isNotNull())
        else:
            number = F.element_at(F.split(F.col("issue_url"), "/"), -1).cast("int")
            frame = frame.withColumn("issue_number", number)
        return frame.select(*[name for name, _ in loaded_columns(table)])
