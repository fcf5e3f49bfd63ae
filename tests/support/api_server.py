"""A GitHub-shaped HTTP API on loopback, serving a `GitHubDataset`, for the REST source's tests.

    with ApiServer(GitHubDataset.generate(issues=90, comments=270), token="t0ken") as api:
        api.url                               # http://127.0.0.1:PORT
        api.throttle(times=1, retry_after=2)  # next request: 429 with Retry-After: 2
        api.exhaust_rate_limit(reset_in=1)    # next request: 403, X-RateLimit-Remaining: 0
        api.fail(times=2, status=502)         # next two requests: 502
        api.slow(0.5, times=3)                # next three requests answer after 0.5 s
        api.update_issues(500)                # 500 issues get a new updated_at and title
        api.requests                          # every request: at, method, path, query, status

GitHub REST v3 endpoints, with GitHub's defaults (state=open, per_page=30 up to 100,
page=1), absolute `Link` headers (first/prev/next/last) and `X-RateLimit-*` headers:

    GET /repos/{owner}/{repo}/issues?state=&since=&sort=&direction=&per_page=&page=
        issues and pull requests (these carry a `pull_request` key)
    GET /repos/{owner}/{repo}/pulls?state=&sort=&direction=&per_page=&page=
    GET /repos/{owner}/{repo}/issues/comments?since=&sort=&direction=&per_page=&page=
    GET /repos/{owner}/{repo}/issues/{number}/comments?since=&per_page=&page=

Other APIs paginate in the body. The same issues (state=all, by number) are served in
those shapes too, so every paginator has a real API to walk:

    GET /shapes/{owner}/{repo}/cursor?limit=&cursor=     {"items": [..], "next_cursor": str|null}
    GET /shapes/{owner}/{repo}/next-url?limit=&after=    {"data": {"items": [..]},
                                                          "links": {"next": url|null}}
    GET /shapes/{owner}/{repo}/offset?offset=&limit=     {"total": n, "results": [..]}
    GET /shapes/{owner}/{repo}/pages?page=&size=         {"page": p, "total_pages": t,
                                                          "items": [..]}

With a token configured, every request must carry `Authorization: Bearer <token>` (or
GitHub's `token <token>`, or `?api_key=<token>` for the shapes); anything else is a 401
with GitHub's JSON error body. Faults apply to the next requests whose path contains
`path` (any request by default), in the order they were added.
"""

from __future__ import annotations

import base64
import contextlib
import json
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.support.github_dataset import (
    Comment,
    GitHubDataset,
    Issue,
    Repository,
    iso,
    label,
    parse_iso,
    user,
)

__all__ = ["ApiServer", "RecordedRequest"]

_DOCS = "https://docs.github.com/rest"


@dataclass(frozen=True)
class RecordedRequest:
    at: float  # time.time() when the request arrived
    method: str
    path: str
    query: dict[str, str]
    status: int


@dataclass
class _Fault:
    times: int
    path: str
    status: int = 0  # 0: no failure, only the delay
    headers: dict[str, str] = field(default_factory=dict)
    body: dict[str, Any] = field(default_factory=dict)
    delay: float = 0.0
    reset_in: float | None = None  # X-RateLimit-Reset, as seconds from the request


class _Answer(Exception):
    """Raised by an endpoint to answer with an error status."""

    def __init__(self, status: int, message: str, headers: dict[str, str] | None = None) -> None:
        super().__init__(message)
        self.status, self.message, self.headers = status, message, headers or {}


class ApiServer:
    """The dataset over HTTP/1.1 (keep-alive) on 127.0.0.1, a free port; see the module doc."""

    def __init__(
        self,
        dataset: GitHubDataset | None = None,
        *,
        token: str | None = None,
        rate_limit: int = 100_000,
        rate_window: float = 3600.0,
    ) -> None:
        self.dataset = dataset or GitHubDataset.generate()
        self.token = token
        self.rate_limit = rate_limit
        self.rate_window = rate_window
        self._lock = threading.Lock()
        self._faults: list[_Fault] = []
        self._requests: list[RecordedRequest] = []
        self._used = 0
        self._window_end = 0.0
        self._views: dict[tuple[Any, ...], Any] = {}
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- lifecycle -------------------------------------------------------------------------

    def start(self) -> ApiServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        server.daemon_threads = True
        self._server = server
        self._thread = threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    def __enter__(self) -> ApiServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    @property
    def port(self) -> int:
        assert self._server is not None, "the server is not started"
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    # -- controls --------------------------------------------------------------------------

    def throttle(self, *, times: int = 1, retry_after: int | str = 1, path: str = "") -> None:
        """The next `times` requests get 429 with `Retry-After` (seconds, or an HTTP date)."""
        self._add(
            _Fault(
                times,
                path,
                429,
                {"Retry-After": str(retry_after)},
                {"message": "You have exceeded a secondary rate limit."},
            )
        )

    def exhaust_rate_limit(self, *, times: int = 1, reset_in: float = 1.0, path: str = "") -> None:
        """The next `times` requests get GitHub's primary rate-limit answer: 403 with
        `X-RateLimit-Remaining: 0` and `X-RateLimit-Reset` `reset_in` seconds ahead."""
        message = "API rate limit exceeded for user ID 1001."
        self._add(_Fault(times, path, 403, {}, {"message": message}, reset_in=reset_in))

    def fail(self, *, times: int = 1, status: int = 502, path: str = "") -> None:
        """The next `times` requests get `status` (a 5xx, or any error status)."""
        self._add(_Fault(times, path, status, {}, {"message": "Server Error"}))

    def slow(self, seconds: float, *, times: int = 1, path: str = "") -> None:
        """The next `times` requests are answered only after `seconds`."""
        self._add(_Fault(times, path, delay=seconds))

    def update_issues(
        self, n: int, *, repo: str | None = None, at: int | None = None
    ) -> list[tuple[str, int]]:
        """`GitHubDataset.update_issues`, safe while requests are being served."""
        with self._lock:
            return self.dataset.update_issues(n, repo=repo, at=at)

    @property
    def requests(self) -> list[RecordedRequest]:
        """Every request so far, in the order they were answered."""
        with self._lock:
            return list(self._requests)

    def requests_to(self, path: str) -> list[RecordedRequest]:
        return [r for r in self.requests if r.path == path]

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    def _add(self, fault: _Fault) -> None:
        with self._lock:
            self._faults.append(fault)

    # -- answering -------------------------------------------------------------------------

    def answer(
        self, method: str, target: str, headers: Callable[[str], str | None]
    ) -> tuple[int, dict[str, str], bytes]:
        """Status, headers and body for one request (the handler only moves bytes)."""
        arrived = time.time()
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        fault, delay = self._take_faults(parts.path)
        if delay:
            time.sleep(delay)
        out: dict[str, str] = {"Content-Type": "application/json; charset=utf-8"}
        try:
            self._authorize(headers("Authorization"), query)
            out.update(self._count_rate(arrived))
            if fault is not None:
                raise self._fault_answer(fault, out)
            body, links = self._route(parts.path, query)
            if links:
                out["Link"] = links
            status, payload = 200, body
        except _Answer as answer:
            out.update(answer.headers)
            status = answer.status
            payload = {"message": answer.message, "documentation_url": _DOCS, "status": str(status)}
        with self._lock:
            self._requests.append(RecordedRequest(arrived, method, parts.path, query, status))
        return status, out, json.dumps(payload).encode()

    def _take_faults(self, path: str) -> tuple[_Fault | None, float]:
        failing, delay = None, 0.0
        with self._lock:
            for fault in self._faults:
                if fault.times <= 0 or fault.path not in path:
                    continue
                if fault.status == 0:
                    fault.times -= 1
                    delay += fault.delay
                elif failing is None:
                    fault.times -= 1
                    failing = fault
            self._faults = [f for f in self._faults if f.times > 0]
        return failing, delay

    def _fault_answer(self, fault: _Fault, out: dict[str, str]) -> _Answer:
        headers = dict(fault.headers)
        if fault.reset_in is not None:
            headers["X-RateLimit-Remaining"] = "0"
            headers["X-RateLimit-Reset"] = str(math.ceil(time.time() + fault.reset_in))
        return _Answer(fault.status, fault.body.get("message", "Error"), headers)

    def _authorize(self, header: str | None, query: dict[str, str]) -> None:
        if self.token is None:
            return
        given = query.get("api_key")
        if header:
            scheme, _, value = header.partition(" ")
            if scheme.lower() in ("bearer", "token"):
                given = value.strip()
        if given != self.token:
            raise _Answer(401, "Bad credentials")

    def _count_rate(self, now: float) -> dict[str, str]:
        with self._lock:
            if now >= self._window_end:
                self._window_end, self._used = now + self.rate_window, 0
            self._used += 1
            used, reset = self._used, math.ceil(self._window_end)
        headers = {
            "X-RateLimit-Limit": str(self.rate_limit),
            "X-RateLimit-Remaining": str(max(0, self.rate_limit - used)),
            "X-RateLimit-Reset": str(reset),
            "X-RateLimit-Used": str(min(used, self.rate_limit)),
            "X-RateLimit-Resource": "core",
        }
        if used > self.rate_limit:
            raise _Answer(403, "API rate limit exceeded for user ID 1001.", headers)
        return headers

    def _route(self, path: str, query: dict[str, str]) -> tuple[Any, str]:
        bits = path.strip("/").split("/")
        if len(bits) >= 4 and bits[0] == "repos":
            repo = self._repo(bits[1], bits[2])
            rest = bits[3:]
            if rest == ["issues"]:
                rows, render = self._issues(repo, query), self._issue_json
            elif rest == ["pulls"]:
                rows, render = self._pulls(repo, query), self._pull_json
            elif rest == ["issues", "comments"]:
                rows, render = self._repo_comments(repo, query), self._comment_json
            elif len(rest) == 3 and rest[0] == "issues" and rest[2] == "comments":
                rows, render = self._issue_comments(repo, rest[1], query), self._comment_json
            else:
                raise _Answer(404, "Not Found")
            page, links = self._paged(path, query, rows)
            return [render(repo, row) for row in page], links
        if len(bits) == 4 and bits[0] == "shapes":
            repo = self._repo(bits[1], bits[2])
            return self._shaped(bits[3], path, query, repo), ""
        raise _Answer(404, "Not Found")

    def _repo(self, owner: str, name: str) -> Repository:
        repo = self.dataset.repos.get(f"{owner}/{name}")
        if repo is None:
            raise _Answer(404, "Not Found")
        return repo

    # -- GitHub endpoints ------------------------------------------------------------------

    def _issues(self, repo: Repository, query: dict[str, str]) -> list[Issue]:
        sort = query.get("sort", "created")
        if sort not in ("created", "updated", "comments"):
            raise _Answer(422, "Validation Failed")
        rows = self._view(repo, "issues", query.get("state", "open"), sort, query)
        since = _since(query)
        if since is not None:
            rows = [i for i in rows if i.updated_at >= since]
        return rows

    def _pulls(self, repo: Repository, query: dict[str, str]) -> list[Issue]:
        sort = query.get("sort", "created")
        if sort not in ("created", "updated"):
            raise _Answer(422, "Validation Failed")
        return self._view(repo, "pulls", query.get("state", "open"), sort, query)

    def _view(
        self, repo: Repository, kind: str, state: str, sort: str, query: dict[str, str]
    ) -> list[Issue]:
        if state not in ("open", "closed", "all"):
            raise _Answer(422, "Validation Failed")
        default = "desc" if kind == "issues" or sort == "created" else "asc"
        direction = query.get("direction", default)
        key = (repo.full_name, kind, state, sort, direction, self.dataset.version)
        with self._lock:
            cached = self._views.get(key)
        if cached is not None:
            return cached
        rows = [
            i
            for i in repo.issues
            if (kind == "issues" or i.is_pull) and (state == "all" or i.state == state)
        ]
        by = {
            "created": lambda i: (i.created_at, i.number),
            "updated": lambda i: (i.updated_at, i.number),
            "comments": lambda i: (i.comments, i.number),
        }[sort]
        rows.sort(key=by, reverse=direction == "desc")
        with self._lock:
            self._views[key] = rows
        return rows

    def _repo_comments(self, repo: Repository, query: dict[str, str]) -> list[Comment]:
        rows = list(repo.comments)
        since = _since(query)
        if since is not None:
            rows = [c for c in rows if c.updated_at >= since]
        if "sort" in query:
            field_ = "updated_at" if query["sort"] == "updated" else "created_at"
            rows.sort(
                key=lambda c: (getattr(c, field_), c.id), reverse=query.get("direction") != "asc"
            )
        return rows

    def _issue_comments(
        self, repo: Repository, number: str, query: dict[str, str]
    ) -> list[Comment]:
        issue = repo.issue(int(number)) if number.isdigit() else None
        if issue is None:
            raise _Answer(404, "Not Found")
        since = _since(query)
        return [
            c
            for c in self._comments_of(repo).get(issue.number, [])
            if since is None or c.updated_at >= since
        ]

    def _comments_of(self, repo: Repository) -> dict[int, list[Comment]]:
        """A repository's comments by issue number (a child walk asks once per issue)."""
        key = (repo.full_name, "comments by issue")
        with self._lock:
            cached = self._views.get(key)
        if cached is None:
            by_issue: dict[int, list[Comment]] = {}
            for comment in repo.comments:
                by_issue.setdefault(comment.issue_number, []).append(comment)
            with self._lock:
                cached = self._views[key] = by_issue
        return cached

    def _paged(self, path: str, query: dict[str, str], rows: list[Any]) -> tuple[list[Any], str]:
        per_page = min(100, max(1, _int(query, "per_page", 30)))
        page = max(1, _int(query, "page", 1))
        last = max(1, math.ceil(len(rows) / per_page))
        links = []
        for rel, number in (
            ("prev", page - 1 if page > 1 else None),
            ("next", page + 1 if page < last else None),
            ("last", last if page < last else None),
            ("first", 1 if page > 1 else None),
        ):
            if number is not None:
                target = f"{self.url}{path}?{urlencode({**query, 'page': str(number)})}"
                links.append(f'<{target}>; rel="{rel}"')
        return rows[(page - 1) * per_page : page * per_page], ", ".join(links)

    # -- the other shapes ------------------------------------------------------------------

    def _shaped(self, shape: str, path: str, query: dict[str, str], repo: Repository) -> Any:
        def rows(start: int, stop: int) -> list[dict[str, Any]]:
            return [self._issue_json(repo, i) for i in repo.issues[start:stop]]

        count = len(repo.issues)
        if shape == "cursor":
            limit = _int(query, "limit", 25)
            start = _decode_cursor(query["cursor"]) if query.get("cursor") else 0
            after = start + limit
            token = _encode_cursor(after) if after < count else None
            return {"items": rows(start, after), "next_cursor": token}
        if shape == "next-url":
            limit = _int(query, "limit", 25)
            start = _int(query, "after", 0)
            after = start + limit
            following = {**query, "after": str(after)}
            link = f"{self.url}{path}?{urlencode(following)}" if after < count else None
            return {"data": {"items": rows(start, after)}, "links": {"next": link}}
        if shape == "offset":
            offset, limit = _int(query, "offset", 0), min(50, _int(query, "limit", 20))
            return {"total": count, "results": rows(offset, offset + limit)}
        if shape == "pages":
            page, size = _int(query, "page", 1), _int(query, "size", 20)
            total = max(1, math.ceil(count / size))
            items = rows((page - 1) * size, page * size)
            return {"page": page, "total_pages": total, "items": items}
        raise _Answer(404, "Not Found")

    # -- records ---------------------------------------------------------------------------

    def _issue_json(self, repo: Repository, issue: Issue) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        html = f"https://github.example/{repo.full_name}"
        record: dict[str, Any] = {
            "url": f"{api}/issues/{issue.number}",
            "repository_url": api,
            "comments_url": f"{api}/issues/{issue.number}/comments",
            "html_url": f"{html}/issues/{issue.number}",
            "id": issue.id,
            "node_id": f"I_{issue.id}",
            "number": issue.number,
            "title": issue.title,
            "user": user(issue.user),
            "labels": [label(k) for k in issue.labels],
            "state": issue.state,
            "locked": False,
            "assignee": None,
            "comments": issue.comments,
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": _iso_or_none(issue.closed_at),
            "author_association": "CONTRIBUTOR",
            "body": issue.body,
        }
        if issue.is_pull:
            record["pull_request"] = {
                "url": f"{api}/pulls/{issue.number}",
                "html_url": f"{html}/pull/{issue.number}",
                "merged_at": _iso_or_none(issue.closed_at if issue.merged else None),
            }
        return record

    def _pull_json(self, repo: Repository, issue: Issue) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "url": f"{api}/pulls/{issue.number}",
            "id": issue.pull_id,
            "node_id": f"PR_{issue.pull_id}",
            "number": issue.number,
            "state": issue.state,
            "title": issue.title,
            "user": user(issue.user),
            "body": issue.body,
            "labels": [label(k) for k in issue.labels],
            "created_at": iso(issue.created_at),
            "updated_at": iso(issue.updated_at),
            "closed_at": _iso_or_none(issue.closed_at),
            "merged_at": _iso_or_none(issue.closed_at if issue.merged else None),
            "draft": False,
            "head": {"ref": f"feature-{issue.number}", "sha": f"{issue.id:040x}"},
            "base": {"ref": "main", "repo": {"id": repo.id, "full_name": repo.full_name}},
        }

    def _comment_json(self, repo: Repository, comment: Comment) -> dict[str, Any]:
        api = f"{self.url}/repos/{repo.full_name}"
        return {
            "url": f"{api}/issues/comments/{comment.id}",
            "html_url": f"https://github.example/{repo.full_name}/issues/{comment.issue_number}#issuecomment-{comment.id}",
            "issue_url": f"{api}/issues/{comment.issue_number}",
            "id": comment.id,
            "node_id": f"IC_{comment.id}",
            "user": user(comment.user),
            "created_at": iso(comment.created_at),
            "updated_at": iso(comment.updated_at),
            "author_association": "CONTRIBUTOR",
            "body": comment.body,
        }


def _iso_or_none(epoch: int | None) -> str | None:
    return None if epoch is None else iso(epoch)


def _int(query: dict[str, str], name: str, default: int) -> int:
    try:
        return int(query.get(name, default))
    except ValueError:
        raise _Answer(422, f"Validation Failed: {name} must be an integer") from None


def _since(query: dict[str, str]) -> int | None:
    if not query.get("since"):
        return None
    try:
        return parse_iso(query["since"])
    except ValueError:
        raise _Answer(422, "Validation Failed: since must be an ISO 8601 timestamp") from None


def _encode_cursor(offset: int) -> str:
    # Opaque, as vendors' page tokens are: not a number a client could compute.
    return base64.urlsafe_b64encode(json.dumps({"o": offset, "v": 1}).encode()).decode()


def _decode_cursor(token: str) -> int:
    try:
        return int(json.loads(base64.urlsafe_b64decode(token.encode()))["o"])
    except (ValueError, KeyError, TypeError):
        raise _Answer(400, "Bad Request: invalid cursor") from None


def _handler_for(api: ApiServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"  # keep-alive, as real APIs and pooled clients use
        timeout = 10  # an idle kept-alive connection is closed after this
        # Headers and body leave in two writes: with Nagle on, the body of a small answer
        # waits for the client's delayed ACK (40 ms a page on Linux).
        disable_nagle_algorithm = True

        def do_GET(self) -> None:
            status, headers, body = api.answer("GET", self.path, self.headers.get)
            # A client that timed out has gone: nothing to answer.
            with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    return Handler
