"""One HTTP GET against a REST API, made well: credentials, retries, waits, one-line errors.

    client = RestClient("https://api.github.com", auth=BearerToken("GITHUB_TOKEN"),
                        secrets=os.environ, budget=budget)
    response = client.get("/repos/octo/repo/issues", {"state": "all", "per_page": 100})

What is retried, and how long it waits (never more than `RetryPolicy.max_wait` in all):

    429, 408, 5xx               Retry-After (seconds or an HTTP date) when given, else
                                exponential backoff with jitter
    403 + rate-limit headers    until X-RateLimit-Reset (X-RateLimit-Remaining: 0), or
                                Retry-After (GitHub's secondary limits)
    timeouts, connection errors exponential backoff with jitter

With a `LeakyBucket`, an answer that says the API's bucket is nearly full makes the next
request wait until it has leaked enough (Shopify's X-Shopify-Shop-Api-Call-Limit).

Every other 4xx (401, 403, 404, …) raises SourceRefused at once; retries that run out
raise SourceUnreachable. Either names the endpoint in one line, every secret masked.

The network is touched in `_send` only. httpx is the HTTP library: it pools
keep-alive connections (a backfill asks one host for thousands of pages), splits
connect and read timeouts, and drops credentials on redirects to another host.
"""

from __future__ import annotations

import base64
import email.utils
import json
import random
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Literal, Protocol
from urllib.parse import parse_qsl, quote, quote_plus, urlencode, urlsplit, urlunsplit

import httpx

from hakiri.errors import SecretMissing, SourceDataError, SourceRefused, SourceUnreachable
from hakiri.sources.rest.budget import LeakyBucket, RateBudget

__all__ = [
    "ApiKey",
    "Auth",
    "BasicAuth",
    "BearerToken",
    "Credentials",
    "RestClient",
    "RestResponse",
    "RetryPolicy",
]

Params = Mapping[str, str | int | float]

_MASK = "***"
_MESSAGE_CHARS = 200
# A X-RateLimit-Reset this small is seconds from now, not an epoch (some APIs send that).
_EPOCH_FLOOR = 1_000_000_000


@dataclass(frozen=True)
class Credentials:
    """What a request carries to authenticate, and the values no message may show."""

    headers: Mapping[str, str] = field(default_factory=dict, repr=False)
    params: Mapping[str, str] = field(default_factory=dict, repr=False)
    secrets: tuple[str, ...] = field(default=(), repr=False)

    def mask(self, text: str) -> str:
        """`text` with every secret (as is, or URL-encoded) replaced by ***."""
        for secret in sorted(self.secrets, key=len, reverse=True):
            for form in {secret, quote(secret, safe=""), quote_plus(secret)}:
                text = text.replace(form, _MASK)
        return text


class Auth(Protocol):
    """How an API authenticates: the names of the secrets, resolved per client."""

    @property
    def secret_names(self) -> tuple[str, ...]: ...

    def credentials(self, secrets: Mapping[str, str]) -> Credentials: ...


def _secret(secrets: Mapping[str, str], name: str) -> str:
    value = secrets.get(name)
    if not value:
        raise SecretMissing(
            f"the secret {name} is not set",
            f"export {name} (or add it to the environment hakiri runs in)",
        )
    return value


@dataclass(frozen=True)
class BearerToken:
    """`Authorization: Bearer <secret>`."""

    secret: str  # the secret's name, e.g. "GITHUB_TOKEN"

    @property
    def secret_names(self) -> tuple[str, ...]:
        return (self.secret,)

    def credentials(self, secrets: Mapping[str, str]) -> Credentials:
        token = _secret(secrets, self.secret)
        return Credentials(headers={"Authorization": f"Bearer {token}"}, secrets=(token,))


@dataclass(frozen=True)
class ApiKey:
    """An API key in a header (`X-API-Key: <secret>`) or a query parameter (`?api_key=`)."""

    secret: str
    name: str = "X-API-Key"
    location: Literal["header", "query"] = "header"

    @property
    def secret_names(self) -> tuple[str, ...]:
        return (self.secret,)

    def credentials(self, secrets: Mapping[str, str]) -> Credentials:
        key = _secret(secrets, self.secret)
        if self.location == "query":
            return Credentials(params={self.name: key}, secrets=(key,))
        return Credentials(headers={self.name: key}, secrets=(key,))


@dataclass(frozen=True)
class BasicAuth:
    """HTTP basic auth: a user name (plain) and a password (a secret)."""

    username: str
    password_secret: str

    @property
    def secret_names(self) -> tuple[str, ...]:
        return (self.password_secret,)

    def credentials(self, secrets: Mapping[str, str]) -> Credentials:
        password = _secret(secrets, self.password_secret)
        pair = base64.b64encode(f"{self.username}:{password}".encode()).decode()
        return Credentials(headers={"Authorization": f"Basic {pair}"}, secrets=(password, pair))


@dataclass(frozen=True)
class RetryPolicy:
    attempts: int = 8  # requests made for one page at most, the first included
    backoff: float = 0.5  # seconds before the first retry; doubles each retry
    backoff_max: float = 30.0
    max_wait: float = 600.0  # seconds one page may spend waiting between attempts, in all


@dataclass(frozen=True)
class RestResponse:
    """A successful answer to a GET of `url` (without the credentials hakiri adds)."""

    url: str
    status: int
    headers: Mapping[str, str]  # case-insensitive names
    content: bytes
    shown: str  # `url` fit for messages: every secret masked (APIs echo keys into links)

    def json(self) -> Any:
        try:
            return json.loads(self.content)
        except ValueError as exc:
            raise SourceDataError(
                f"GET {self.shown} answered {self.status} with a body that is not JSON ({exc})",
                "check the endpoint: it must answer JSON",
            ) from None


class RestClient:
    """GETs against one API (`base_url`); see the module doc. Close it, or use `with`."""

    def __init__(
        self,
        base_url: str,
        *,
        auth: Auth | None = None,
        secrets: Mapping[str, str] | None = None,
        headers: Mapping[str, str] | None = None,
        timeout: float = 30.0,
        retry: RetryPolicy | None = None,
        budget: RateBudget | None = None,
        bucket: LeakyBucket | None = None,
        sleep: Callable[[float], None] = time.sleep,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.base_url = base_url.rstrip("/")
        self.auth = auth
        self.retry = retry or RetryPolicy()
        self.budget = budget
        self.bucket = bucket
        self._clock = clock
        self._go_at = 0.0  # when the API's bucket has room again (its last answer said)
        self._credentials = auth.credentials(secrets or {}) if auth else Credentials()
        self._origin = _origin(self.base_url)
        self._sleep = sleep
        self._jitter = random.Random()
        self._http = httpx.Client(
            headers={"Accept": "application/json", **(headers or {}), **self._credentials.headers},
            timeout=httpx.Timeout(timeout, connect=min(timeout, 10.0)),
            follow_redirects=True,
        )
        self.requests = 0  # attempts made, retries included
        self.waited = 0.0  # seconds slept between attempts (rate budget waits excluded)
        self.paced = 0.0  # seconds slept for the API's bucket to leak

    def __repr__(self) -> str:
        return f"RestClient({self.base_url!r})"

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> RestClient:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def mask(self, text: str) -> str:
        return self._credentials.mask(text)

    def url_for(self, target: str, params: Params | None = None) -> str:
        """The absolute URL of a path (under base_url) or of a URL an answer gave, with
        `params` merged into its query (they win). Credentials are not in it."""
        if "://" in target:
            if _origin(target) != self._origin:
                raise SourceDataError(
                    f"the API sent hakiri to {self.mask(_origin(target))}, outside base_url "
                    f"{self.mask(self.base_url)}: credentials go to base_url's host only",
                    "set base_url to the host the API's pages live on",
                )
            url = target
        else:
            url = f"{self.base_url}/{target.lstrip('/')}"
        if not params:
            return url
        parts = urlsplit(url)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        query.update({k: str(v) for k, v in params.items()})
        return urlunsplit(parts._replace(query=urlencode(query)))

    def without_credentials(self, url: str) -> str:
        """`url` less the query params hakiri sends credentials in (APIs echo them into
        their next links; a stored page position must not keep them)."""
        if not self._credentials.params:
            return url
        parts = urlsplit(url)
        query = [
            (k, v)
            for k, v in parse_qsl(parts.query, keep_blank_values=True)
            if k not in self._credentials.params
        ]
        return urlunsplit(parts._replace(query=urlencode(query)))

    def get(self, target: str, params: Params | None = None) -> RestResponse:
        """GET a path under base_url, or an absolute URL on its host (a next-page link)."""
        url = self.url_for(target, params)
        shown = self.mask(url)
        request = self._http.build_request(
            "GET", self.url_for(url, self._credentials.params) if self._credentials.params else url
        )
        waited = 0.0
        problem = ""
        for attempt in range(1, self.retry.attempts + 1):
            self._wait_for_bucket()
            if self.budget is not None:
                self.budget.take()
            self.requests += 1
            try:
                response = self._send(request)
                if self.bucket is not None:
                    self._go_at = self._clock() + self.bucket.pause(response.headers)
            except (httpx.UnsupportedProtocol, httpx.TooManyRedirects) as exc:
                raise SourceUnreachable(
                    f"GET {shown}: {type(exc).__name__}: {self.mask(str(exc))}",
                    "check base_url: an http:// or https:// URL of the API",
                ) from None
            except httpx.TransportError as exc:  # timeouts, refused and dropped connections
                problem = f"{type(exc).__name__}: {self.mask(str(exc)) or 'no detail'}"
                wait = self._backoff(attempt)
            else:
                if response.is_success:
                    return RestResponse(
                        url, response.status_code, response.headers, response.content, shown
                    )
                if not _retryable(response):
                    raise self._refused(shown, response)
                problem = _status_line(response, self.mask)
                asked = _asked_wait(response)
                wait = asked if asked is not None else self._backoff(attempt)
            if attempt == self.retry.attempts:
                break
            if waited + wait > self.retry.max_wait:
                raise SourceUnreachable(
                    f"GET {shown}: {problem}; waiting {wait:.0f} s more would pass the "
                    f"{self.retry.max_wait:.0f} s a page may wait",
                    "try again later, or raise the retry wait if the API's limit resets slowly",
                )
            self._sleep(wait)
            waited += wait
            self.waited += wait
        raise SourceUnreachable(
            f"GET {shown} failed {self.retry.attempts} times in {waited:.1f} s: {problem}",
            "check that the API is up and reachable from every engine worker",
        )

    def _send(self, request: httpx.Request) -> httpx.Response:
        return self._http.send(request)

    def _wait_for_bucket(self) -> None:
        wait = self._go_at - self._clock()
        if wait > 0:
            self._sleep(wait)
            self.paced += wait

    def _backoff(self, attempt: int) -> float:
        ceiling = min(self.retry.backoff_max, self.retry.backoff * 2 ** (attempt - 1))
        return ceiling / 2 + self._jitter.uniform(0, ceiling / 2)

    def _refused(self, shown: str, response: httpx.Response) -> SourceRefused:
        status = response.status_code
        names = " or ".join(self.auth.secret_names) if self.auth else ""
        if status == 401:
            hint = (
                f"the API refused the credentials: check the secret {names}"
                if names
                else "the API wants credentials: declare `auth` with a secret"
            )
        elif status == 403:
            hint = f"the credentials ({names or 'none'}) may not read this endpoint: check their scopes"
        elif status == 404:
            hint = "check base_url and the endpoint's path (GitHub answers 404 for a repository the token cannot see)"
        else:
            hint = "check the endpoint's parameters"
        return SourceRefused(
            f"GET {shown} was refused: {_status_line(response, self.mask)}", hint, status=status
        )


def _origin(url: str) -> str:
    parts = urlsplit(url)
    return f"{parts.scheme.lower()}://{parts.netloc.lower()}"


def _retryable(response: httpx.Response) -> bool:
    """429, 408 and 5xx; a 403 too when it is a rate limit (GitHub's are 403s)."""
    status, headers = response.status_code, response.headers
    if status == 403:
        return "Retry-After" in headers or headers.get("X-RateLimit-Remaining") == "0"
    return status in (408, 429) or status >= 500


def _asked_wait(response: httpx.Response) -> float | None:
    """Seconds the API asks us to wait before asking again, if it says so: Retry-After (on
    any status), or a rate limit's reset (429, or 403 with no requests remaining)."""
    after = response.headers.get("Retry-After")
    if after is not None:
        seconds = _seconds_until(after)
        if seconds is not None:
            return seconds
    status = response.status_code
    if status in (403, 429) and response.headers.get("X-RateLimit-Remaining") == "0":
        reset = response.headers.get("X-RateLimit-Reset", "")
        try:
            value = float(reset)
        except ValueError:
            return None
        return max(0.0, value - time.time() if value >= _EPOCH_FLOOR else value)
    return None


def _seconds_until(retry_after: str) -> float | None:
    """Retry-After as seconds: a number of seconds, or an HTTP date."""
    text = retry_after.strip()
    try:
        return max(0.0, float(text))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(text)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def _status_line(response: httpx.Response, mask: Callable[[str], str]) -> str:
    """'401 Unauthorized: Bad credentials': the status and the API's own message, if any."""
    line = f"{response.status_code} {response.reason_phrase}".strip()
    message = ""
    try:
        body = response.json()
    except ValueError:
        body = None
    if isinstance(body, dict):
        for key in ("message", "error_description", "error", "detail", "title"):
            if isinstance(body.get(key), str):
                message = body[key]
                break
    elif response.text.strip():
        message = response.text.strip().splitlines()[0]
    message = " ".join(message.split())[:_MESSAGE_CHARS]
    return mask(f"{line}: {message}" if message else line)
