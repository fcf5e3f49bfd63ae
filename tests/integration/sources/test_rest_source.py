"""The declarative `rest` connector against the suite's API server: an opaque-token table
walked in batches of pages that resumes after a kill at the next page, a table past a
cursor with a child table per record, every paginator, and its errors."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest

from hakiri.engine.crash import CRASH_EXIT_CODE
from tests.conftest import API_TOKEN
from tests.support.context_store import read_context_table
from tests.support.project import Project

pytestmark = pytest.mark.integration

ENV = {"API_TOKEN": API_TOKEN}


def _project(tmp_path: Path, pg_url: str, schema: str, api, body: str, destination: str) -> Project:
    target = (
        '{ connector = "context" }'
        if destination == "context"
        else f'{{ connector = "postgres", config = {{ connection = "wh", schema = "{schema}" }} }}'
    )
    project = Project(tmp_path, pg_url, schema)
    project.write(
        "hakiri.toml",
        textwrap.dedent(f"""
        [project]
        name = "api"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "api"
        secrets = ["API_TOKEN"]
        destination = {target}
        """)
        + textwrap.dedent(body).replace("BASE_URL", api.url),
    )
    return project


def _repo(api) -> str:
    return sorted(api.dataset.repos)[0]


def _loaded(project: Project, destination: str, table: str, text: str) -> dict[int, str]:
    if destination == "postgres":
        rows = project.query(f'SELECT id, {text} FROM "{project.schema}".{table}')
    else:
        read = read_context_table(project.root / ".hakiri" / "context" / table)
        rows = [(row["id"], row[text]) for row in read]
    assert len(rows) == len({r[0] for r in rows}), f"{table}: an id loaded twice"
    return dict(rows)


_OPAQUE = """
tables = ["issues"]
load = { mode = "upsert", upsert_key = ["id"] }

[pipeline.source]
connector = "rest"

[pipeline.source.config]
base_url = "BASE_URL"
auth = { type = "api_key", secret = "API_TOKEN", name = "api_key", in = "query" }
paginator = { type = "next_token", token = "next_cursor", param = "cursor" }

[pipeline.source.config.endpoints.issues]
path = "shapes/REPO/cursor"
params = { limit = "4" }
records = "items"
primary_key = ["id"]
pages_per_batch = 2
columns = { id = "bigint", number = "int", title = "string", author = { path = "user.login" } }
"""


def test_an_opaque_token_table_resumes_at_the_next_page_after_a_kill(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    """Pages of 4 issues behind an opaque token, 2 pages a batch. An apply killed as its
    second batch commits has loaded 4 pages; the next apply's first request is the fifth
    page's token, it asks for no committed page again, and the target is exact. `plan`
    warns that parallelism does not apply to such a table."""
    repo = _repo(api_server)
    body = _OPAQUE.replace("REPO", repo) + "\n[pipeline.backfill]\nparallelism = 4\n"
    project = _project(tmp_path, pg_url, pg_schema, api_server, body, "postgres")
    plan = project.cli("plan", env=ENV)
    assert plan.exit_code == 2 or plan.exit_code == 0, plan.output
    assert "walked in order" in plan.output and "parallelism = 4" in plan.output
    assert api_server.requests == []  # plan asks the API nothing

    killed = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(project.root)],
        env={**os.environ, **ENV, "HAKIRI_CRASH_AT": "after_dest_commit:2"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == CRASH_EXIT_CODE, killed.stderr
    path = f"/shapes/{repo}/cursor"
    committed = [r.query.get("cursor") for r in api_server.requests_to(path)]
    assert len(committed) == 4, committed  # two batches of two pages, then the kill
    api_server.clear_requests()

    again = project.cli("apply", "--json", env=ENV)
    assert again.exit_code == 0, again.output
    resumed = [r.query.get("cursor") for r in api_server.requests_to(path)]
    assert resumed[0] is not None and resumed[0] not in committed
    assert not set(resumed) & set(committed), "a committed page was fetched again"
    issues = api_server.dataset.repos[repo].issues
    assert len(committed) + len(resumed) == -(-len(issues) // 4)  # every page once
    assert _loaded(project, "postgres", "issues", "title") == {i.id: i.title for i in issues}
    # the next apply walks the endpoint again, from its first page
    api_server.clear_requests()
    assert project.cli("apply", env=ENV).exit_code == 0
    assert api_server.requests_to(path)[0].query.get("cursor") is None


_GITHUB_AS_REST = """
tables = ["issues", "comments"]
incremental = "updated_at"
load = { mode = "upsert", upsert_key = ["id"] }

[pipeline.source]
connector = "rest"

[pipeline.source.config]
base_url = "BASE_URL"
auth = { type = "bearer", secret = "API_TOKEN" }
paginator = { type = "link_header" }

[pipeline.source.config.endpoints.issues]
path = "repos/REPO/issues"
params = { state = "all", sort = "updated", direction = "asc", per_page = "20", since = "{cursor}" }

[pipeline.source.config.endpoints.comments]
parent = "issues"
path = "repos/REPO/issues/{number}/comments"
params = { per_page = "100" }
parent_columns = { issue_number = "number" }
"""


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_a_table_past_a_cursor_and_its_child_table(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    """GitHub's issues through `rest` (columns inferred from the first page), and each
    issue's comments fetched per issue with its number; after the server changes issues
    the next apply asks `since` the last plan and upserts exactly the changed ones."""
    repo = _repo(api_server)
    body = _GITHUB_AS_REST.replace("REPO", repo)
    if destination == "postgres":  # PostgreSQL takes no struct: the columns are declared
        body = body.replace(
            'since = "{cursor}" }\n',
            'since = "{cursor}" }\n'
            'columns = { id = "bigint", number = "int", title = "string", '
            'updated_at = "timestamp", author = { path = "user.login" } }\n',
        ).replace(
            'parent_columns = { issue_number = "number" }\n',
            'parent_columns = { issue_number = "number" }\n'
            'columns = { id = "bigint", body = "string", author = { path = "user.login" } }\n',
        )
    project = _project(tmp_path, pg_url, pg_schema, api_server, body, destination)
    assert project.cli("validate").exit_code == 0
    first = project.cli("apply", "--json", env=ENV)
    assert first.exit_code == 0, first.output
    data = api_server.dataset.repos[repo]
    assert _loaded(project, destination, "issues", "title") == {i.id: i.title for i in data.issues}
    assert _loaded(project, destination, "comments", "body") == {
        c.id: c.body for c in data.comments
    }
    if destination == "postgres":
        numbers = dict(project.query(f'SELECT id, issue_number FROM "{pg_schema}".comments'))
        assert numbers == {c.id: c.issue_number for c in data.comments}
        types = dict(
            project.query(
                "SELECT column_name, data_type FROM information_schema.columns "
                "WHERE table_schema = %s AND table_name = 'issues'",
                pg_schema,
            )
        )
        assert types["id"] == "bigint" and types["updated_at"].startswith("timestamp")
    else:  # inferred from the first page: nested objects are structs, times timestamps
        from deltalake import DeltaTable

        schema = DeltaTable(str(project.root / ".hakiri" / "context" / "issues")).schema()
        kinds = {f.name: str(f.type) for f in schema.fields}
        assert "login" in kinds["user"] and "timestamp" in kinds["updated_at"]

    changed = api_server.update_issues(5, repo=repo, at=int(time.time()))
    time.sleep(2)
    api_server.clear_requests()
    again = project.cli("apply", "--json", env=ENV)
    assert again.exit_code == 0, again.output
    listed = api_server.requests_to(f"/repos/{repo}/issues")
    assert listed and all("since" in r.query for r in listed)
    [outcome] = json.loads(again.stdout)
    numbers = {number for _, number in changed}
    comments_of_changed = sum(1 for c in data.comments if c.issue_number in numbers)
    assert outcome["rows"] == len(changed) + comments_of_changed
    assert _loaded(project, destination, "issues", "title") == {i.id: i.title for i in data.issues}


_SHAPES = """
tables = ["by_offset", "by_page", "by_url"]
load = { mode = "truncate" }
transforms = [
  { op = "flatten", column = "user" },
  { op = "select", columns = ["id", "number", "title", "user_login", "updated_at"] },
]

[pipeline.source]
connector = "rest"

[pipeline.source.config]
base_url = "BASE_URL"
auth = { type = "bearer", secret = "API_TOKEN" }

[pipeline.source.config.endpoints.by_offset]
path = "shapes/REPO/offset"
records = "results"
paginator = { type = "offset", limit = 7, total = "total" }

[pipeline.source.config.endpoints.by_page]
path = "shapes/REPO/pages"
records = "items"
paginator = { type = "page_number", size = 9, size_param = "size", total_pages = "total_pages" }

[pipeline.source.config.endpoints.by_url]
path = "shapes/REPO/next-url"
params = { limit = "11" }
records = "data.items"
paginator = { type = "next_url", path = "links.next" }
"""


def test_every_paginator_reads_every_record_once(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    repo = _repo(api_server)
    body = _SHAPES.replace("REPO", repo)
    project = _project(tmp_path, pg_url, pg_schema, api_server, body, "postgres")
    done = project.cli("apply", "--json", env=ENV)
    assert done.exit_code == 0, done.output
    expected = {i.id: i.title for i in api_server.dataset.repos[repo].issues}
    authors = {i.id: f"user-{i.user}" for i in api_server.dataset.repos[repo].issues}
    for table in ("by_offset", "by_page", "by_url"):
        assert _loaded(project, "postgres", table, "title") == expected, table
        assert _loaded(project, "postgres", table, "user_login") == authors, table


def test_a_wrong_key_fails_in_one_line_with_the_key_masked(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    body = _OPAQUE.replace("REPO", _repo(api_server))
    project = _project(tmp_path, pg_url, pg_schema, api_server, body, "postgres")
    wrong = "key_wrong_SECRET_987"
    done = project.cli("apply", env={"API_TOKEN": wrong})
    assert done.exit_code == 1
    assert wrong not in done.output and "Traceback" not in done.output
    assert "401" in done.output and "shapes/" in done.output


def test_manifest_mistakes_are_one_line_each(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server
) -> None:
    body = _OPAQUE.replace("REPO", "o/r")
    unlisted = body.replace('tables = ["issues"]', 'tables = ["issues", "orders"]')
    project = _project(tmp_path, pg_url, pg_schema, api_server, unlisted, "postgres")
    done = project.cli("validate")
    assert done.exit_code == 1 and "no endpoint `orders`" in done.output
    assert "Traceback" not in done.output

    secretless = _project(tmp_path, pg_url, pg_schema, api_server, body, "postgres")
    text = (secretless.root / "hakiri.toml").read_text().replace('secrets = ["API_TOKEN"]\n', "")
    (secretless.root / "hakiri.toml").write_text(text)
    done = secretless.cli("validate")
    assert done.exit_code == 1 and "API_TOKEN" in done.output and "secrets" in done.output


def test_a_walk_killed_with_sigkill_resumes_after_its_last_committed_batch(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    """A real SIGKILL at a moment the test does not choose precisely: once the server has
    answered a fifth page, two batches of two pages have committed (a walk asks for a page
    only after the batch before it committed). The next apply starts past them, fetches at
    most the killed batch's pages a second time, and the target is exact."""
    repo = _repo(api_server)
    project = _project(
        tmp_path, pg_url, pg_schema, api_server, _OPAQUE.replace("REPO", repo), "postgres"
    )
    path = f"/shapes/{repo}/cursor"
    api_server.slow(0.3, times=1000, path=path)
    process = subprocess.Popen(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(project.root)],
        env={**os.environ, **ENV},
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 240
        while len(api_server.requests_to(path)) < 5:
            assert process.poll() is None, "the apply ended before it could be killed"
            assert time.monotonic() < deadline, "the walk never reached its fifth page"
            time.sleep(0.05)
        process.kill()
    finally:
        process.wait(timeout=60)
    assert process.returncode == -9
    first = [r.query.get("cursor") for r in api_server.requests_to(path)]
    api_server.clear_requests()

    again = project.cli("apply", "--json", env=ENV)
    assert again.exit_code == 0, again.output
    resumed = [r.query.get("cursor") for r in api_server.requests_to(path)]
    assert resumed[0] is not None and resumed[0] not in first[:4]
    assert len(set(first) & set(resumed)) <= 2  # the pages of the batch the kill stopped
    issues = api_server.dataset.repos[repo].issues
    assert len(set(first) | set(resumed)) == -(-len(issues) // 4)  # every page read
    assert _loaded(project, "postgres", "issues", "title") == {i.id: i.title for i in issues}
