"""A `rest` endpoint read once per `for_each` entry (what the `github` preset is built on):
every repository's issues, side by side, each row tagged with its repository."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from tests.conftest import API_TOKEN
from tests.support.project import Project

pytestmark = pytest.mark.integration


def test_every_entry_is_read_and_its_value_is_a_column(
    tmp_path: Path, pg_url: str, pg_schema: str, api_server, spark
) -> None:
    repos = sorted(api_server.dataset.repos)
    each = ", ".join(f'{{ repo = "{name}" }}' for name in repos)
    project = Project(tmp_path, pg_url, pg_schema)
    project.write(
        "hakiri.toml",
        textwrap.dedent(f"""
        [project]
        name = "api"

        [connections.wh]
        type = "postgres"
        url = "{pg_url}"

        [[pipeline]]
        id = "repos"
        tables = ["issues"]
        incremental = "updated_at"
        secrets = ["API_TOKEN"]
        destination = {{ connector = "postgres", config = {{ connection = "wh", schema = "{pg_schema}" }} }}
        load = {{ mode = "upsert", upsert_key = ["id"] }}

        [pipeline.source]
        connector = "rest"

        [pipeline.source.config]
        base_url = "{api_server.url}"
        auth = {{ type = "bearer", secret = "API_TOKEN" }}
        paginator = {{ type = "link_header" }}

        [pipeline.source.config.endpoints.issues]
        path = "repos/{{repo}}/issues"
        params = {{ state = "all", per_page = "7", since = "{{cursor}}" }}
        columns = {{ id = "bigint", title = "string", updated_at = "timestamp" }}
        for_each = [{each}]
        """),
    )
    assert project.cli("validate").exit_code == 0
    done = project.cli("apply", "--json", env={"API_TOKEN": API_TOKEN})
    assert done.exit_code == 0, done.output
    loaded = project.query(f'SELECT id, title, repo FROM "{pg_schema}".issues')
    assert sorted(loaded) == sorted(
        (issue.id, issue.title, name)
        for name, repo in api_server.dataset.repos.items()
        for issue in repo.issues
    )
    for name in repos:
        assert api_server.requests_to(f"/repos/{name}/issues")
