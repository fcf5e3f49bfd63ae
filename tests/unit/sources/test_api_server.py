"""The suite's GitHub-shaped API server (tests/support/api_server.py) behaves as GitHub does
where the REST source's tests rely on it: pages, `since`, auth, rate-limit headers, faults."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterator

import httpx
import pytest

from tests.conftest import API_TOKEN
from tests.support.api_server import ApiServer
from tests.support.github_dataset import GitHubDataset, iso

AUTH = {"Authorization": f"Bearer {API_TOKEN}"}


@pytest.fixture
def http() -> Iterator[httpx.Client]:
    with httpx.Client(headers=AUTH, timeout=10) as client:
        yield client


def walk(http: httpx.Client, url: str, **params: str | int) -> tuple[list[dict], int]:
    """Every record behind `url`, following rel="next"; and the number of pages."""
    records, pages = [], 0
    response = http.get(url, params=params)
    while True:
        assert response.status_code == 200, response.text
        records.extend(response.json())
        pages += 1
        following = response.links.get("next")
        if following is None:
            return records, pages
        response = http.get(following["url"])


def test_the_default_dataset_is_as_large_as_the_issue_asks_and_the_same_for_a_seed() -> None:
    first, second = GitHubDataset.generate(), GitHubDataset.generate()

    assert len(first.repos) >= 3
    assert first.issue_count >= 10_000
    assert first.comment_count >= 30_000
    assert first.repos == second.repos
    assert GitHubDataset.generate(issues=30, comments=90, seed=1) != GitHubDataset.generate(
        issues=30, comments=90, seed=2
    )


def test_following_next_links_walks_every_issue_once(
    api_server: ApiServer, http: httpx.Client
) -> None:
    repo = api_server.dataset.repos["octo/repo-1"]
    url = f"{api_server.url}/repos/octo/repo-1/issues"

    records, pages = walk(http, url, state="all", per_page=7, sort="updated", direction="asc")

    assert [r["number"] for r in records] == [
        i.number for i in sorted(repo.issues, key=lambda i: (i.updated_at, i.number))
    ]
    assert pages == -(-len(repo.issues) // 7)
    assert [r.query.get("page", "1") for r in api_server.requests] == [
        str(p) for p in range(1, pages + 1)
    ]
    assert any("pull_request" in r for r in records)
    assert any("pull_request" not in r for r in records)
    assert {"id", "number", "title", "state", "user", "labels", "created_at", "updated_at"} <= set(
        records[0]
    )


def test_link_headers_are_absolute_and_name_the_last_page(
    api_server: ApiServer, http: httpx.Client
) -> None:
    response = http.get(
        f"{api_server.url}/repos/octo/repo-0/issues", params={"state": "all", "per_page": 10}
    )

    assert response.links["next"]["url"].startswith(f"{api_server.url}/repos/octo/repo-0/issues?")
    assert "page=2" in response.links["next"]["url"]
    assert "page=3" in response.links["last"]["url"]  # 30 issues in repo-0
    assert "prev" not in response.links
    last = http.get(response.links["last"]["url"])
    assert "next" not in last.links
    assert "prev" in last.links


def test_state_defaults_to_open_as_on_github(api_server: ApiServer, http: httpx.Client) -> None:
    records, _ = walk(http, f"{api_server.url}/repos/octo/repo-0/issues", per_page=100)
    repo = api_server.dataset.repos["octo/repo-0"]

    assert {r["state"] for r in records} == {"open"}
    assert len(records) == sum(i.state == "open" for i in repo.issues)


def test_since_returns_the_issues_updated_at_or_after_it_and_then_only_the_updated_ones(
    api_server: ApiServer, http: httpx.Client
) -> None:
    repo = api_server.dataset.repos["octo/repo-2"]
    url = f"{api_server.url}/repos/octo/repo-2/issues"
    middle = sorted(i.updated_at for i in repo.issues)[len(repo.issues) // 2]

    records, _ = walk(http, url, state="all", since=iso(middle), per_page=100)

    assert sorted(r["number"] for r in records) == sorted(
        i.number for i in repo.issues if i.updated_at >= middle
    )

    newest = max(i.updated_at for r in api_server.dataset.repos.values() for i in r.issues)
    changed = api_server.update_issues(4, repo="octo/repo-2")
    records, _ = walk(http, url, state="all", since=iso(newest + 1), per_page=100)

    assert sorted(r["number"] for r in records) == sorted(n for _, n in changed)
    assert all("(edited at" in r["title"] for r in records)


def test_pulls_are_the_issues_marked_as_pull_requests(
    api_server: ApiServer, http: httpx.Client
) -> None:
    base = f"{api_server.url}/repos/octo/repo-0"
    issues, _ = walk(http, f"{base}/issues", state="all", per_page=100)
    pulls, _ = walk(http, f"{base}/pulls", state="all", per_page=100)

    assert sorted(p["number"] for p in pulls) == sorted(
        i["number"] for i in issues if "pull_request" in i
    )
    assert len({p["id"] for p in pulls} & {i["id"] for i in issues}) == 0  # ids of their own


def test_comments_of_a_repository_and_of_an_issue_add_up(
    api_server: ApiServer, http: httpx.Client
) -> None:
    base = f"{api_server.url}/repos/octo/repo-0"
    comments, _ = walk(http, f"{base}/issues/comments", per_page=50)
    issues, _ = walk(http, f"{base}/issues", state="all", per_page=100)

    assert len(comments) == len({c["id"] for c in comments}) == 90  # 270 over 3 repos
    per_issue = Counter(c["issue_url"].rsplit("/", 1)[1] for c in comments)
    busiest = max(issues, key=lambda i: i["comments"])
    own, _ = walk(http, f"{base}/issues/{busiest['number']}/comments")
    assert len(own) == busiest["comments"] == per_issue[str(busiest["number"])]
    assert {"id", "issue_url", "user", "body", "created_at", "updated_at"} <= set(own[0])


def test_a_wrong_or_missing_token_is_a_401_with_githubs_error_body(api_server: ApiServer) -> None:
    url = f"{api_server.url}/repos/octo/repo-0/issues"

    missing = httpx.get(url)
    wrong = httpx.get(url, headers={"Authorization": "Bearer nope"})
    right = httpx.get(url, headers={"Authorization": f"token {API_TOKEN}"})

    assert (missing.status_code, wrong.status_code, right.status_code) == (401, 401, 200)
    assert wrong.json()["message"] == "Bad credentials"
    assert "documentation_url" in wrong.json()
    assert [r.status for r in api_server.requests] == [401, 401, 200]


def test_unknown_repositories_are_404(api_server: ApiServer, http: httpx.Client) -> None:
    assert http.get(f"{api_server.url}/repos/octo/nope/issues").status_code == 404
    assert http.get(f"{api_server.url}/repos/octo/repo-0/issues/9999/comments").status_code == 404


def test_rate_limit_headers_count_down(api_server: ApiServer, http: httpx.Client) -> None:
    url = f"{api_server.url}/repos/octo/repo-0/issues"

    first, second = http.get(url), http.get(url)

    assert first.headers["X-RateLimit-Limit"] == "100000"
    remaining = int(first.headers["X-RateLimit-Remaining"])
    assert int(second.headers["X-RateLimit-Remaining"]) == remaining - 1
    assert int(first.headers["X-RateLimit-Reset"]) > time.time()


def test_an_exhausted_limit_is_a_403_until_the_window_resets() -> None:
    with ApiServer(GitHubDataset.generate(issues=6, comments=6), rate_limit=2) as api:
        url = f"{api.url}/repos/octo/repo-0/issues"
        statuses = [httpx.get(url).status_code for _ in range(3)]
        refused = httpx.get(url)

    assert statuses == [200, 200, 403]
    assert refused.headers["X-RateLimit-Remaining"] == "0"
    assert "rate limit exceeded" in refused.json()["message"]


def test_injected_faults_answer_the_next_requests_then_stop(
    api_server: ApiServer, http: httpx.Client
) -> None:
    url = f"{api_server.url}/repos/octo/repo-0/issues"
    api_server.throttle(times=2, retry_after=3)
    api_server.exhaust_rate_limit(reset_in=5)
    api_server.fail(status=502)

    answers = [http.get(url) for _ in range(5)]

    assert [a.status_code for a in answers] == [429, 429, 403, 502, 200]
    assert answers[0].headers["Retry-After"] == "3"
    assert answers[2].headers["X-RateLimit-Remaining"] == "0"
    assert 4 <= int(answers[2].headers["X-RateLimit-Reset"]) - time.time() <= 6
    assert [r.status for r in api_server.requests] == [429, 429, 403, 502, 200]


def test_faults_can_aim_at_one_path(api_server: ApiServer, http: httpx.Client) -> None:
    api_server.fail(status=503, path="/pulls")

    assert http.get(f"{api_server.url}/repos/octo/repo-0/issues").status_code == 200
    assert http.get(f"{api_server.url}/repos/octo/repo-0/pulls").status_code == 503
    assert http.get(f"{api_server.url}/repos/octo/repo-0/pulls").status_code == 200


def test_slow_responses_take_their_delay(api_server: ApiServer, http: httpx.Client) -> None:
    api_server.slow(0.3)
    url = f"{api_server.url}/repos/octo/repo-0/issues"

    started = time.monotonic()
    http.get(url)
    slow = time.monotonic() - started
    started = time.monotonic()
    http.get(url)
    fast = time.monotonic() - started

    assert slow >= 0.3 > fast


def test_the_request_log_has_time_path_query_and_status(
    api_server: ApiServer, http: httpx.Client
) -> None:
    before = time.time()
    http.get(f"{api_server.url}/repos/octo/repo-0/issues", params={"page": 2, "per_page": 5})

    (request,) = api_server.requests_to("/repos/octo/repo-0/issues")
    assert before <= request.at <= time.time()
    assert request.query == {"page": "2", "per_page": "5"}
    assert (request.method, request.status) == ("GET", 200)


@pytest.mark.parametrize(
    ("shape", "params", "records", "following"),
    [
        ("cursor", {"limit": 4}, "items", "next_cursor"),
        ("next-url", {"limit": 4}, "data", "links"),
        ("offset", {"limit": 4}, "results", "total"),
        ("pages", {"size": 4}, "items", "total_pages"),
    ],
)
def test_the_other_shapes_serve_the_issues_with_their_own_pagination(
    api_server: ApiServer,
    http: httpx.Client,
    shape: str,
    params: dict,
    records: str,
    following: str,
) -> None:
    body = http.get(f"{api_server.url}/shapes/octo/repo-0/{shape}", params=params).json()

    assert set(body) >= {records, following}
    page = body[records]["items"] if shape == "next-url" else body[records]
    assert [r["number"] for r in page] == [1, 2, 3, 4]
