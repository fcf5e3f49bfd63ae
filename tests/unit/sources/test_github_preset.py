"""The `github` connector as a preset of `rest`: the RestConfig it builds from its keys, and
the walks a range of it reads."""

from __future__ import annotations

from pathlib import Path

from hakiri.sources.cursors.ranges import CursorRange
from hakiri.sources.rest.github import GithubTableSource, loaded_columns, rest_config
from hakiri.sources.rest.source import _params
from hakiri.spec.pipeline import GithubConfig, PipelineSpec


def _chunk(lo: str, hi: str | None) -> CursorRange:
    return CursorRange("updated_at", "timestamp", "timestamp with time zone", lo, hi, True, False)


def test_the_github_preset_is_a_rest_config() -> None:
    github = GithubConfig(repos=["o/a", "o/b"], per_page=50)
    config = rest_config(github, {"GITHUB_TOKEN": "t"})
    assert config.base_url == "https://api.github.com"
    assert config.auth is not None and config.auth.secret == "GITHUB_TOKEN"
    assert config.headers == {"X-GitHub-Api-Version": "2022-11-28"}
    assert config.paginator.type == "link_header"
    issues = config.endpoints["issues"]
    assert [p for p, _ in issues.paths()] == ["repos/o/a/issues", "repos/o/b/issues"]
    assert issues.params == {
        "sort": "updated",
        "direction": "asc",
        "per_page": "50",
        "state": "all",
        "since": "{cursor}",
    }
    assert "state" not in config.endpoints["comments"].params
    assert config.endpoints["comments"].path == "repos/{repo}/issues/comments"
    # without the token's variable, GitHub is asked without one (60 requests an hour)
    assert rest_config(github, {}).auth is None


def test_a_github_range_asks_from_its_start_and_stops_past_its_end(tmp_path: Path) -> None:
    spec = PipelineSpec.model_validate(
        {
            "id": "gh",
            "source": {"connector": "github", "config": {"repos": ["o/a", "o/b"]}},
            "tables": ["comments"],
            "incremental": "updated_at",
            "destination": {"connector": "context"},
            "load": {"mode": "upsert", "upsert_key": ["id"]},
        }
    )
    source = GithubTableSource.from_spec(tmp_path, None, spec, {})  # type: ignore[arg-type]
    endpoint = source.config.endpoints["comments"]
    # the first range starts in 2008, and asks from there (a rest table's 1970 asks for all)
    chunk = _chunk("2008-01-01T00:00:00+00:00", "2024-02-01T00:00:00+00:00")
    [first, _] = source._walks(endpoint, None, chunk, "updated_at")  # type: ignore[arg-type]
    assert first.path == "repos/o/a/issues/comments"
    assert dict(first.params)["since"] == "2008-01-01T00:00:00Z"
    assert first.values == {"repo": "o/a"}
    assert first.until == ("updated_at", "2024-02-01T00:00:00Z")
    # even a start_from before 1970 is asked for (a rest table's asks for everything)
    early = _chunk("1960-01-01T00:00:00+00:00", None)
    assert _params(endpoint, early, open_start=False)["since"] == "1960-01-01T00:00:00Z"
    assert "since" not in _params(endpoint, early)
    assert [n for n, _ in loaded_columns("comments")][:3] == ["id", "issue_url", "issue_number"]
