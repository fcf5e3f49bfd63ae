"""Paginators, and the walk over an endpoint's pages.

    for page in walk_pages(client, "/repos/o/r/issues", {"state": "all"}, LinkHeader(),
                           JsonPath.parse("$")):
        load(page.records)
        remember(page.following)       # where to resume once this page is committed

A paginator is stateless: where a page is lives in a `PagePosition` (a next-page URL,
an opaque token, an offset or a page number), which is plain JSON. A backfill records
the position that follows its last committed page; `walk_pages(..., start=position)`
resumes there, asking for no page before it.

    link_header  the Link header's rel="next" URL (GitHub)         position: url
    next_url     a URL in the body (`links.next`)                  position: url
    next_token   a token in the body, sent back as a query param   position: token
    offset       offset/limit params, until an empty page or total position: offset
    page_number  page params, until an empty page or total pages   position: page
    single_page  one response holds every record
"""

from __future__ import annotations

import re
from abc import ABC, abstractmethod
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal
from urllib.parse import urljoin

from hakiri.errors import SourceDataError
from hakiri.sources.rest.client import Params, RestClient, RestResponse
from hakiri.sources.rest.select import JsonPath, select_records

__all__ = [
    "PAGINATORS",
    "LinkHeader",
    "NextToken",
    "NextUrl",
    "Offset",
    "Page",
    "PageNumber",
    "PagePosition",
    "PageRequest",
    "Paginator",
    "SinglePage",
    "parse_link_header",
    "walk_pages",
]

PositionKind = Literal["url", "token", "offset", "page"]


@dataclass(frozen=True)
class PagePosition:
    """Where one page is, in the paginator's own terms; `{kind: value}` as JSON."""

    kind: PositionKind
    value: str | int

    def to_json(self) -> dict[str, str | int]:
        return {self.kind: self.value}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> PagePosition:
        ((kind, value),) = data.items()
        if kind not in ("url", "token", "offset", "page"):
            raise ValueError(f"not a page position: {dict(data)!r}")
        return cls(kind, value)


@dataclass(frozen=True)
class PageRequest:
    """What to GET for one page: a path under base_url or an absolute URL, and params."""

    target: str
    params: Mapping[str, str | int] = field(default_factory=dict)


class Paginator(ABC):
    """Turns a position into a request, and a page's answer into the next position."""

    kind: ClassVar[str]

    @abstractmethod
    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        """The request for the page at `position` (None: the first page)."""

    @abstractmethod
    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        """The position of the page after this one; None when this one was the last."""


@dataclass(frozen=True)
class LinkHeader(Paginator):
    """The Link header's `rel` URL (GitHub's pagination); the walk ends when there is none."""

    kind: ClassVar[str] = "link_header"
    rel: str = "next"

    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        if position is None:
            return PageRequest(path, dict(params))
        return PageRequest(str(_expect(position, "url").value))  # the link has every param

    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        link = parse_link_header(response.headers.get("Link", "")).get(self.rel)
        return PagePosition("url", urljoin(response.url, link)) if link else None


@dataclass(frozen=True)
class NextUrl(Paginator):
    """A next-page URL in the body at `path` (relative ones resolve against the page's URL);
    the walk ends when it is missing, null or empty."""

    kind: ClassVar[str] = "next_url"
    path: JsonPath = field(default_factory=lambda: JsonPath.parse("next"))

    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        if position is None:
            return PageRequest(path, dict(params))
        return PageRequest(str(_expect(position, "url").value))

    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        link = self.path.first(body)
        if not link:
            return None
        if not isinstance(link, str):
            raise _not_a(self.path, "URL", link, response)
        return PagePosition("url", urljoin(response.url, link))


@dataclass(frozen=True)
class NextToken(Paginator):
    """An opaque cursor: the body's token, sent back as `param`. Pages come in order only."""

    kind: ClassVar[str] = "next_token"
    path: JsonPath = field(default_factory=lambda: JsonPath.parse("next_cursor"))
    param: str = "cursor"

    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        if position is None:
            return PageRequest(path, dict(params))
        return PageRequest(path, {**params, self.param: _expect(position, "token").value})

    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        token = self.path.first(body)
        if token is None or token == "":
            return None
        if not isinstance(token, str | int) or isinstance(token, bool):
            raise _not_a(self.path, "token", token, response)
        return PagePosition("token", str(token))


@dataclass(frozen=True)
class Offset(Paginator):
    """`offset` and `limit` params. The offset moves by the records received (an API may
    send fewer than `limit`); the walk ends on an empty page or at `total`."""

    kind: ClassVar[str] = "offset"
    limit: int = 100
    offset_param: str = "offset"
    limit_param: str = "limit"
    start: int = 0
    total: JsonPath | None = None  # where the body says how many records there are

    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        offset = self.start if position is None else _expect(position, "offset").value
        return PageRequest(
            path, {**params, self.offset_param: offset, self.limit_param: self.limit}
        )

    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        if not records:
            return None
        offset = (self.start if position is None else int(position.value)) + len(records)
        total = _count(self.total, body, response)
        if total is not None and offset >= total:
            return None
        return PagePosition("offset", offset)


@dataclass(frozen=True)
class PageNumber(Paginator):
    """A page number param (and a page size, if `size` is set); the walk ends on an empty
    page or at the body's `total_pages`."""

    kind: ClassVar[str] = "page_number"
    param: str = "page"
    first: int = 1
    size: int | None = None
    size_param: str = "per_page"
    total_pages: JsonPath | None = None

    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        page = self.first if position is None else _expect(position, "page").value
        sized = {self.size_param: self.size} if self.size is not None else {}
        return PageRequest(path, {**params, **sized, self.param: page})

    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        if not records:
            return None
        page = self.first if position is None else int(position.value)
        total = _count(self.total_pages, body, response)
        if total is not None and page - self.first + 1 >= total:
            return None
        return PagePosition("page", page + 1)


@dataclass(frozen=True)
class SinglePage(Paginator):
    """The endpoint answers every record in one response."""

    kind: ClassVar[str] = "single_page"

    def request(self, path: str, params: Params, position: PagePosition | None) -> PageRequest:
        return PageRequest(path, dict(params))

    def following(
        self,
        position: PagePosition | None,
        response: RestResponse,
        body: Any,
        records: list[dict[str, Any]],
    ) -> PagePosition | None:
        return None


PAGINATORS: dict[str, type[Paginator]] = {
    p.kind: p for p in (LinkHeader, NextUrl, NextToken, Offset, PageNumber, SinglePage)
}


@dataclass(frozen=True)
class Page:
    """One page of records; `following` is where the next page is (None: this was the last)."""

    position: PagePosition | None
    following: PagePosition | None
    records: list[dict[str, Any]]


def walk_pages(
    client: RestClient,
    path: str,
    params: Params,
    paginator: Paginator,
    records: JsonPath,
    *,
    start: PagePosition | None = None,
) -> Iterator[Page]:
    """Every page of an endpoint in order, from `start` (None: the first page) on.

    The positions yielded carry no credentials, even when the API echoes an API key
    into its next links, so they can be stored."""
    position = start
    while True:
        request = paginator.request(path, params, position)
        response = client.get(request.target, request.params)
        body = response.json()
        found = select_records(body, records, where=f"GET {response.shown}")
        following = paginator.following(position, response, body, found)
        if following is not None and following.kind == "url":
            following = PagePosition("url", client.without_credentials(str(following.value)))
        yield Page(position, following, found)
        if following is None:
            return
        if following == position:
            raise SourceDataError(
                f"GET {response.shown}: the API points at the same page again "
                f"({paginator.kind} {following.kind} {client.mask(str(following.value))})",
                "check the paginator: another kind may fit the API (see docs/sources.md)",
            )
        position = following


# <url> then its params (`; rel="next"`, `;rel=last`, `; title="a, b"`: quoted may hold ,;)
_LINK = re.compile(r'<([^>]*)>((?:\s*;\s*[\w*.-]+\s*(?:=\s*(?:"[^"]*"|[^;,\s]*))?)*)')
_REL = re.compile(r"""rel\s*=\s*(?:"([^"]*)"|([^\s;,"]+))""", re.IGNORECASE)


def parse_link_header(header: str) -> dict[str, str]:
    """rel -> URL of an RFC 8288 Link header (`<url>; rel="next", <url>; rel="last"`)."""
    links: dict[str, str] = {}
    for match in _LINK.finditer(header):
        rel = _REL.search(match.group(2))
        if rel:
            for name in (rel.group(1) or rel.group(2)).split():
                links.setdefault(name.lower(), match.group(1).strip())
    return links


def _expect(position: PagePosition, kind: PositionKind) -> PagePosition:
    if position.kind != kind:
        raise ValueError(f"a {kind} paginator cannot resume at a {position.kind} position")
    return position


def _count(path: JsonPath | None, body: Any, response: RestResponse) -> int | None:
    if path is None:
        return None
    value = path.first(body)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | str) or not str(value).isdigit():
        raise _not_a(path, "count", value, response)
    return int(value)


def _not_a(path: JsonPath, what: str, value: Any, response: RestResponse) -> SourceDataError:
    return SourceDataError(
        f"GET {response.shown}: {path.text!r} holds {type(value).__name__} {str(value)[:40]!r}, "
        f"not a {what}",
        f"point the paginator's path at the response's {what}",
    )
