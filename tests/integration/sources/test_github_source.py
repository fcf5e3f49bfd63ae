"""The specification's `github-issues` pipeline, against the suite's GitHub-shaped server:
it validates, plans and applies into PostgreSQL and into the context store, the targets
equal the server's records, and after the server changes issues the next apply asks only
for what changed since the last one (`since`) and upserts exactly those rows."""

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
from tests.support.project import Project

pytestmark = pytest.mark.integration

ENV = {"GITHUB_TOKEN": API_TOKEN}


def _project(
    tmp_path: Path,
    pg_url: str,
    schema: str,
    api,
    destination: str,
    *,
    tables: str = '["issues", "pull_requests", "comments"]',
    config: str = "",
    body: str = "",
) -> Project:
    repos = ", ".join(f'"{n}"' for n in sorted(api.dataset.repos))
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
        id = "github-issues"
        source = {{ connector = "github", config = {{ repos = [{repos}], base_url = "{api.url}"{config} }} }}
        tables = {tables}
        schedule = "every 15m"
        incremental = "updated_at"
        destination = {target}
        load = {{ mode = "upsert", upsert_key = ["id"] }}
        """)
        + textwrap.dedent(body),
    )
    return project


def _expected(api) -> dict[str, dict[int, str]]:
    """id -> title (issues, pull requests) or body (comments), from the server's dataset."""
    found: dict[str, dict[int, str]] = {"issues": {}, "pull_requests": {}, "comments": {}}
    for repo in api.dataset.repos.values():
        for issue in repo.issues:
            found["pull_requests" if issue.is_pull else "issues"][issue.id] = issue.title
        for comment in repo.comments:
            found["comments"][comment.id] = comment.body
    return found


def _loaded(project: Project, destination: str) -> dict[str, dict[int, str]]:
    found = {}
    for table, text in (("issues", "title"), ("pull_requests", "title"), ("comments", "body")):
        if destination == "postgres":
            rows = project.query(f'SELECT id, {text} FROM "{project.schema}".{table}')
        else:
            from deltalake import DeltaTable

            arrow = DeltaTable(str(project.root / ".hakiri" / "context" / table)).to_pyarrow_table()
            rows = list(zip(arrow["id"].to_pylist(), arrow[text].to_pylist(), strict=True))
        assert len(rows) == len({r[0] for r in rows}), f"{table}: an id loaded twice"
        found[table] = dict(rows)
    return found


@pytest.mark.parametrize("destination", ["postgres", "context"])
def test_the_github_pipeline_loads_every_record_then_only_what_changed(
    destination: str, tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, api_server, destination)
    valid = project.cli("validate")
    assert valid.exit_code == 0, valid.output
    plan = project.cli("plan", "--json", env=ENV)
    assert plan.exit_code == 0, plan.output
    assert api_server.requests == []  # plan asks the API nothing

    first = project.cli("apply", "--json", env=ENV)
    assert first.exit_code == 0, first.output
    assert _loaded(project, destination) == _expected(api_server)

    # GitHub stamps a change with the time it happened: now, after the last apply planned.
    changed = api_server.update_issues(12, at=int(time.time()))
    time.sleep(2)  # a plan reads up to the second before it (changes that second may follow)
    api_server.clear_requests()
    again = project.cli("apply", "--json", env=ENV)
    assert again.exit_code == 0, again.output
    # Every request asked from where the last apply planned to: nothing older was re-read.
    issue_requests = [r for r in api_server.requests if r.path.endswith("/issues")]
    assert issue_requests and all("since" in r.query for r in issue_requests)
    [outcome] = json.loads(again.stdout)
    assert outcome["rows"] == len(changed)
    assert _loaded(project, destination) == _expected(api_server)


def test_a_wrong_token_fails_in_one_line_with_the_token_masked(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, api_server, "postgres")
    wrong = "ghp_wrong_token_SECRET_123"
    done = project.cli("apply", env={"GITHUB_TOKEN": wrong})
    assert done.exit_code == 1
    assert wrong not in done.output and "Traceback" not in done.output
    assert "401" in done.output


def test_a_rate_budget_holds_over_every_task_of_the_run(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    """Three repositories read side by side, two issues a page: 45 requests, and never more
    than the budget's 20 in any second on the server's clock."""
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        api_server,
        "postgres",
        tables='["issues"]',
        config=", per_page = 2",
        body='[pipeline.backfill]\nrate_budget = "20/s"\n',
    )
    done = project.cli("apply", "--json", env=ENV)
    assert done.exit_code == 0, done.output
    times = sorted(r.at for r in api_server.requests)
    assert len(times) >= 45
    # at most 20 in any second (0.1 s for each request's trip from the grant to the server)
    busiest = max(sum(1 for t in times[i:] if t < start + 0.9) for i, start in enumerate(times))
    assert busiest <= 20
    assert times[-1] - times[0] >= (len(times) - 20) / 20 * 0.9


def test_a_429_with_retry_after_is_waited_out(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, api_server, "postgres", tables='["issues"]')
    api_server.throttle(times=1, retry_after=2)
    done = project.cli("apply", "--json", env=ENV)
    assert done.exit_code == 0, done.output
    throttled = [r for r in api_server.requests if r.status == 429]
    [first] = throttled
    after = min(r.at for r in api_server.requests if r.status == 200 and r.path == first.path)
    assert after - first.at >= 2.0
    loaded = dict(project.query(f'SELECT id, title FROM "{pg_schema}".issues'))
    assert loaded == _expected(api_server)["issues"]


def test_the_json_form_of_the_manifest_is_the_same_pipeline(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server
) -> None:
    project = _project(tmp_path, pg_url, pg_schema, api_server, "postgres")
    moved = project.cli("pipeline", "convert", "github-issues", "--to", "json")
    assert moved.exit_code == 0, moved.output
    document = json.loads((project.root / "pipelines" / "github-issues.json").read_text())
    assert document["source"]["connector"] == "github"
    assert document["incremental"] == "updated_at"
    assert project.cli("validate").exit_code == 0


def test_a_windowed_backfill_starts_at_the_oldest_record_and_resumes_after_a_kill(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    """window = "180d": the first chunk starts at the oldest issue (one request per
    repository asks for it), not in 2008. An apply killed while its second chunk commits
    leaves two chunks loaded; the next apply reads neither again and the target is exact."""
    project = _project(
        tmp_path,
        pg_url,
        pg_schema,
        api_server,
        "postgres",
        tables='["issues"]',
        body='[pipeline.backfill]\nwindow = "180d"\n',
    )
    oldest = min(i.updated_at for r in api_server.dataset.repos.values() for i in r.issues)
    first_since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(oldest))
    second_since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(oldest + 180 * 86_400))

    killed = subprocess.run(
        [sys.executable, "-m", "hakiri.cli.main", "apply", "--project", str(project.root)],
        env={**os.environ, **ENV, "HAKIRI_CRASH_AT": "after_dest_commit:2"},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert killed.returncode == CRASH_EXIT_CODE, killed.stderr
    read = {r.query.get("since") for r in api_server.requests if "since" in r.query}
    assert {first_since, second_since} <= read

    api_server.clear_requests()
    again = project.cli("apply", "--json", env=ENV)
    assert again.exit_code == 0, again.output
    resumed = {r.query.get("since") for r in api_server.requests if "since" in r.query}
    assert resumed and not resumed & {first_since, second_since}
    loaded = dict(project.query(f'SELECT id, title FROM "{pg_schema}".issues'))
    assert loaded == _expected(api_server)["issues"]


def test_after_500_issues_change_the_next_apply_asks_only_for_them(
    tmp_path: Path, pg_url: str, pg_schema: str, spark
) -> None:
    """1,500 issues and pull requests in 3 repositories; the server changes 500 of them.
    The next apply's requests all carry `since` (the end of the last plan), there are as
    many as the changed records fill pages of 100 in each repository (for each of the two
    tables that read the issues endpoint), and it upserts exactly the 500."""
    from tests.support.api_server import ApiServer
    from tests.support.github_dataset import GitHubDataset

    dataset = GitHubDataset.generate(repos=3, issues=1500, comments=30, seed=5)
    with ApiServer(dataset, token=API_TOKEN) as api:
        project = _project(
            tmp_path, pg_url, pg_schema, api, "postgres", tables='["issues", "pull_requests"]'
        )
        first = project.cli("apply", "--json", env=ENV)
        assert first.exit_code == 0, first.output
        changed = api.update_issues(500, at=int(time.time()))
        time.sleep(2)  # a plan reads up to the second before it
        api.clear_requests()
        again = project.cli("apply", "--json", env=ENV)
        assert again.exit_code == 0, again.output
        [outcome] = json.loads(again.stdout)
        assert outcome["rows"] == 500
        per_repo = {name: 0 for name in api.dataset.repos}
        for name, _ in changed:
            per_repo[name] += 1
        pages = sum(-(-n // 100) for n in per_repo.values())
        asked = [r for r in api.requests if r.path.endswith("/issues")]
        assert len(asked) == 2 * pages
        assert all("since" in r.query for r in asked)
        expected = _expected(api)
        for table in ("issues", "pull_requests"):
            loaded = dict(project.query(f'SELECT id, title FROM "{pg_schema}".{table}'))
            assert loaded == expected[table]
