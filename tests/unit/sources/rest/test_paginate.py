"""Every paginator walks a real API's pages exactly once, and resumes where it was left."""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from hakiri.errors import SourceDataError
from hakiri.sources.rest.client import ApiKey, BearerToken, RestClient
from hakiri.sources.rest.paginate import (
    PAGINATORS,
    LinkHeader,
    NextToken,
    NextUrl,
    Offset,
    PageNumber,
    PagePosition,
    Paginator,
    parse_link_header,
    walk_pages,
)
from hakiri.sources.rest.select import JsonPath
from tests.conftest import API_TOKEN
from tests.support.api_server import ApiServer

REPO = "octo/repo-0"  # 30 issues in the api_server fixture's dataset


@dataclass(frozen=True)
class Endpoint:
    """One endpoint of the server, and how to walk it 7 records a page."""

    name: str
    path: str
    params: dict[str, str | int]
    paginator: Paginator
    records: str


ENDPOINTS = [
    Endpoint(
        "link_header",
        f"/repos/{REPO}/issues",
        {"state": "all", "per_page": 7, "sort": "created", "direction": "asc"},
        LinkHeader(),
        "$",
    ),
    Endpoint(
        "next_url",
        f"/shapes/{REPO}/next-url",
        {"limit": 7},
        NextUrl(JsonPath.parse("links.next")),
        "data.items",
    ),
    Endpoint(
        "next_token",
        f"/shapes/{REPO}/cursor",
        {"limit": 7},
        NextToken(JsonPath.parse("$.next_cursor"), param="cursor"),
        "items",
    ),
    Endpoint(
        "offset_until_total",
        f"/shapes/{REPO}/offset",
        {},
        Offset(limit=7, total=JsonPath.parse("total")),
        "$.results[*]",
    ),
    Endpoint("offset_until_empty", f"/shapes/{REPO}/offset", {}, Offset(limit=7), "results"),
    Endpoint(
        "page_number_until_total",
        f"/shapes/{REPO}/pages",
        {},
        PageNumber(size=7, size_param="size", total_pages=JsonPath.parse("total_pages")),
        "items",
    ),
    Endpoint(
        "page_number_until_empty",
        f"/repos/{REPO}/issues",
        {"state": "all", "sort": "created", "direction": "asc"},
        PageNumber(size=7),
        "$",
    ),
]
# Pages of 7 over 30 issues: 5 pages, and one empty page more where that is the only end.
REQUESTS = {"offset_until_empty": 6, "page_number_until_empty": 6}


@pytest.fixture
def client(api_server: ApiServer) -> Iterator[RestClient]:
    auth = BearerToken("GITHUB_TOKEN")
    with RestClient(api_server.url, auth=auth, secrets={"GITHUB_TOKEN": API_TOKEN}) as client:
        yield client


def walk(client: RestClient, endpoint: Endpoint, start: PagePosition | None = None) -> list:
    return list(
        walk_pages(
            client,
            endpoint.path,
            endpoint.params,
            endpoint.paginator,
            JsonPath.parse(endpoint.records),
            start=start,
        )
    )


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_a_walk_yields_every_record_once_in_order(
    api_server: ApiServer, client: RestClient, endpoint: Endpoint
) -> None:
    pages = walk(client, endpoint)

    numbers = [record["number"] for page in pages for record in page.records]
    assert numbers == list(range(1, 31))
    assert len(api_server.requests) == REQUESTS.get(endpoint.name, 5)
    assert pages[-1].following is None
    assert all(page.following is not None for page in pages[:-1])


@pytest.mark.parametrize("endpoint", ENDPOINTS, ids=lambda e: e.name)
def test_a_walk_resumed_at_a_recorded_position_asks_for_no_earlier_page(
    api_server: ApiServer, client: RestClient, endpoint: Endpoint
) -> None:
    first_two = walk(client, endpoint)[:2]
    committed = [r["number"] for page in first_two for r in page.records]
    recorded = json.dumps(first_two[-1].following.to_json())  # as a catalog would keep it
    api_server.clear_requests()

    rest = walk(client, endpoint, start=PagePosition.from_json(json.loads(recorded)))

    resumed = [r["number"] for page in rest for r in page.records]
    assert committed + resumed == list(range(1, 31))
    assert len(api_server.requests) == REQUESTS.get(endpoint.name, 5) - 2
    assert rest[0].position == first_two[-1].following


def test_a_resumed_link_walk_starts_at_the_recorded_page(
    api_server: ApiServer, client: RestClient
) -> None:
    (endpoint,) = [e for e in ENDPOINTS if e.name == "link_header"]
    position = walk(client, endpoint)[2].position
    api_server.clear_requests()

    walk(client, endpoint, start=position)

    assert [r.query["page"] for r in api_server.requests] == ["3", "4", "5"]


def test_an_api_key_echoed_into_next_links_is_not_kept_in_positions(
    api_server: ApiServer,
) -> None:
    auth = ApiKey("KEY", name="api_key", location="query")
    with RestClient(api_server.url, auth=auth, secrets={"KEY": API_TOKEN}) as client:
        pages = list(
            walk_pages(
                client, f"/repos/{REPO}/issues", {"per_page": 10}, LinkHeader(), JsonPath.parse("$")
            )
        )

    assert "api_key" in api_server.requests[1].query  # the link carried it
    positions = json.dumps([p.following.to_json() for p in pages if p.following])
    assert "page=2" in positions
    assert API_TOKEN not in positions


def test_a_paginator_resumes_only_at_its_own_kind_of_position(client: RestClient) -> None:
    with pytest.raises(ValueError, match="a token paginator cannot resume at a page position"):
        NextToken().request("/x", {}, PagePosition("page", 3))


def test_a_token_that_does_not_move_is_refused_rather_than_walked_forever(
    api_server: ApiServer, client: RestClient
) -> None:
    # The first record's number as the "token": page 2 answers the same token again.
    stuck = NextToken(JsonPath.parse("items[0].number"), param="unused")

    with pytest.raises(SourceDataError, match="points at the same page again"):
        list(walk_pages(client, f"/shapes/{REPO}/cursor", {}, stuck, JsonPath.parse("items")))

    assert len(api_server.requests) == 2


def test_paginators_are_known_by_their_manifest_names() -> None:
    from typing import get_args

    from hakiri.spec.rest import RestPaginator

    union, _ = get_args(RestPaginator)
    in_manifest = {get_args(m.model_fields["type"].annotation)[0] for m in get_args(union)}
    assert set(PAGINATORS) == in_manifest
    assert in_manifest == {
        "link_header",
        "next_url",
        "next_token",
        "offset",
        "page_number",
        "single_page",
    }


def test_link_headers_are_read_as_rfc_8288_writes_them() -> None:
    header = (
        '<https://api.example/x?page=2>; rel="next", '
        "<https://api.example/x?page=9>;rel=last, "
        '<https://api.example/x?a=1,2>; title="a, b"; rel="prev first"'
    )

    assert parse_link_header(header) == {
        "next": "https://api.example/x?page=2",
        "last": "https://api.example/x?page=9",
        "prev": "https://api.example/x?a=1,2",
        "first": "https://api.example/x?a=1,2",
    }
    assert parse_link_header("") == {}
