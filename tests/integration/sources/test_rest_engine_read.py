"""An API read inside the engine (`sources.rest.engine_read`): one task per walk, every page
of a walk in order in its task, rows typed on the engine. Runs on the engine under test
(Apache Spark, or Sail with HAKIRI_TEST_ENGINE=sail) against the suite's GitHub-shaped
server on loopback."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from hakiri.errors import SourceRefused
from hakiri.sources.rest.client import BearerToken, RetryPolicy
from hakiri.sources.rest.engine_read import ApiColumn, Endpoint, Walk, read_walks
from hakiri.sources.rest.paginate import LinkHeader
from hakiri.sources.task_errors import task_error
from tests.conftest import API_TOKEN

pytestmark = pytest.mark.integration

COLUMNS = (
    ApiColumn("id", "id", "bigint"),
    ApiColumn("number", "number", "int"),
    ApiColumn("title", "title"),
    ApiColumn("author", "user.login"),
    ApiColumn("labels", "labels"),
    ApiColumn("updated_at", "updated_at", "timestamp"),
    ApiColumn("is_pull", "pull_request", "string"),
)


def _endpoint(api, token: str = API_TOKEN) -> Endpoint:
    return Endpoint(
        base_url=api.url,
        paginator=LinkHeader(),
        records="$",
        columns=COLUMNS,
        auth=BearerToken("GITHUB_TOKEN"),
        secrets={"GITHUB_TOKEN": token},
        retry=RetryPolicy(attempts=3, backoff=0.05),
    )


def _walks(api) -> list[Walk]:
    return [
        Walk(
            f"/repos/{name}/issues",
            {"state": "all", "per_page": "7", "sort": "updated", "direction": "asc"},
            values={"repo": name},
        )
        for name in sorted(api.dataset.repos)
    ]


def test_every_issue_of_every_repository_once_typed_one_task_per_walk(api_server, spark) -> None:
    frame = read_walks(spark, _endpoint(api_server), _walks(api_server))

    assert dict(frame.dtypes)["id"] == "bigint"
    assert dict(frame.dtypes)["updated_at"] == "timestamp"
    rows = frame.groupBy("repo").count().orderBy("repo").collect()  # 3 small rows
    expected = {n: len(r.issues) for n, r in api_server.dataset.repos.items()}
    assert {r["repo"]: r["count"] for r in rows} == expected
    assert frame.select("id").distinct().count() == sum(expected.values())
    first = sorted(api_server.dataset.repos)[0]
    issue = api_server.dataset.repos[first].issues[0]
    [row] = frame.where(f"repo = '{first}' AND number = 1").collect()
    assert row["id"] == issue.id and row["title"] == issue.title
    assert row["updated_at"] == datetime.fromtimestamp(issue.updated_at, UTC).replace(tzinfo=None)
    # One pass over the frame fetches each page once: per repository ceil(issues / 7)
    # requests, every page number once.
    api_server.clear_requests()
    assert frame.count() == sum(expected.values())
    pages = [(r.path, r.query.get("page", "1")) for r in api_server.requests]
    assert len(pages) == len(set(pages)) == sum(-(-n // 7) for n in expected.values())


def test_a_refused_token_fails_the_read_in_one_line_with_the_token_masked(
    api_server, spark
) -> None:
    wrong = "ghp_wrong0123456789SECRET"
    frame = read_walks(spark, _endpoint(api_server, token=wrong), _walks(api_server)[:1])
    with pytest.raises(Exception) as caught:
        frame.count()
    assert wrong not in str(caught.value)
    error = task_error(caught.value)  # the client's own error, rebuilt from the engine's report
    assert isinstance(error, SourceRefused) and error.status == 401
    assert error.reason.startswith("GET ") and "401 Unauthorized" in error.reason
    assert wrong not in error.reason and "\n" not in error.reason
