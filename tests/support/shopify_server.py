"""A Shopify-shaped Admin REST API on loopback, serving a `ShopDataset`, for the shopify
connector's tests (never the real service).

    with ShopifyServer(ShopDataset.generate(), token="shpat_…") as shop:
        shop.url                          # http://127.0.0.1:PORT (a shop's base_url)
        shop.fill_bucket(38)              # another app of the shop used 38 of the 40
        shop.throttle(times=1)            # the next request: 429 with Retry-After
        shop.edit_orders(50, at=now)      # 50 orders get a new updated_at
        shop.requests                     # every request: at, path, query, status, used

    GET /admin/api/{version}/{orders,customers,products}.json
        ?limit=(50, at most 250)&updated_at_min=&updated_at_max=&order=&status= (orders)
        {"orders": [...]}, Link: <…?limit=&page_info=…>; rel="next", <…>; rel="previous"

What it holds clients to, as Shopify does:
- `X-Shopify-Access-Token` must be the token (401 otherwise); the version must be this one.
- A request with `page_info` may carry `limit` beside it and nothing else (400).
- orders lists open orders unless `status=any` (or closed, cancelled).
- Its leaky bucket: `bucket` requests, leaking `leak` a second. Every answer says the level
  in `X-Shopify-Shop-Api-Call-Limit: used/bucket`; a request that finds it full is a 429
  with `Retry-After` (seconds) and does not count.
Pages are keyset pages over (sort key, id): a record edited during a walk moves, as on
Shopify, and its page_info token carries the first page's filters.
"""

from __future__ import annotations

import base64
import json
import math
import threading
import time
from dataclasses import dataclass
from http.server import ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qsl, urlencode, urlsplit

from tests.support.api_server import _handler_for
from tests.support.github_dataset import parse_iso
from tests.support.shopify_dataset import ShopDataset

__all__ = ["SHOP_VERSION", "ShopRequest", "ShopifyServer"]

SHOP_VERSION = "2024-10"
_PAGED = ("page_info", "limit")


@dataclass(frozen=True)
class ShopRequest:
    at: float
    path: str
    query: dict[str, str]
    status: int
    used: float  # the bucket's level after the request


class _Answer(Exception):
    def __init__(self, status: int, errors: Any, headers: dict[str, str] | None = None) -> None:
        super().__init__(str(errors))
        self.status, self.errors, self.headers = status, errors, headers or {}


class ShopifyServer:
    def __init__(
        self,
        dataset: ShopDataset | None = None,
        *,
        token: str,
        version: str = SHOP_VERSION,
        bucket: int = 40,
        leak: float = 2.0,
    ) -> None:
        self.dataset = dataset or ShopDataset.generate()
        self.token, self.version, self.bucket, self.leak = token, version, bucket, leak
        self._lock = threading.Lock()
        self._level, self._leaked_at = 0.0, time.monotonic()
        self._throttles = 0
        self._requests: list[ShopRequest] = []
        self._server: ThreadingHTTPServer | None = None

    def __enter__(self) -> ShopifyServer:
        server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))  # type: ignore[arg-type]
        server.daemon_threads = True
        self._server = server
        threading.Thread(
            target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        ).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None

    @property
    def url(self) -> str:
        assert self._server is not None, "the server is not started"
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    # -- controls --------------------------------------------------------------------------

    def fill_bucket(self, used: float) -> None:
        with self._lock:
            self._level, self._leaked_at = used, time.monotonic()

    def throttle(self, *, times: int = 1) -> None:
        with self._lock:
            self._throttles += times

    def edit_orders(self, n: int, *, at: int) -> list[int]:
        with self._lock:
            return self.dataset.edit_orders(n, at=at)

    @property
    def requests(self) -> list[ShopRequest]:
        with self._lock:
            return list(self._requests)

    def clear_requests(self) -> None:
        with self._lock:
            self._requests.clear()

    # -- answering -------------------------------------------------------------------------

    def answer(self, method: str, target: str, headers: Any) -> tuple[int, dict[str, str], bytes]:
        arrived = time.time()
        parts = urlsplit(target)
        query = dict(parse_qsl(parts.query, keep_blank_values=True))
        out = {"Content-Type": "application/json; charset=utf-8"}
        try:
            if headers("X-Shopify-Access-Token") != self.token:
                raise _Answer(401, "[API] Invalid API key or access token")
            out.update(self._take_from_bucket())
            body, link = self._list(parts.path, query)
            if link:
                out["Link"] = link
            status, payload = 200, body
        except _Answer as answer:
            out.update(answer.headers)
            status, payload = answer.status, {"errors": answer.errors}
        with self._lock:
            used = self._level
            self._requests.append(ShopRequest(arrived, parts.path, query, status, used))
        return status, out, json.dumps(payload).encode()

    def _take_from_bucket(self) -> dict[str, str]:
        with self._lock:
            now = time.monotonic()
            self._level = max(0.0, self._level - (now - self._leaked_at) * self.leak)
            self._leaked_at = now
            if self._throttles or self._level + 1 > self.bucket:
                forced, self._throttles = bool(self._throttles), max(0, self._throttles - 1)
                wait = 1.0 if forced else (self._level + 1 - self.bucket) / self.leak
                raise _Answer(
                    429,
                    "Exceeded 2 calls per second for api client. Reduce request "
                    "rates to resume uninterrupted service.",
                    {"Retry-After": f"{max(wait, 0.1):.1f}"},
                )
            self._level += 1
            return {"X-Shopify-Shop-Api-Call-Limit": f"{math.ceil(self._level)}/{self.bucket}"}

    def _list(self, path: str, query: dict[str, str]) -> tuple[dict[str, Any], str]:
        prefix = f"/admin/api/{self.version}/"
        resource = path.removeprefix(prefix).removesuffix(".json")
        if not path.startswith(prefix) or resource not in ("orders", "customers", "products"):
            raise _Answer(404, "Not Found")
        limit = int(query.get("limit", "50"))
        if not 1 <= limit <= 250:
            raise _Answer(400, {"limit": "must be between 1 and 250"})
        if "page_info" in query:
            extra = sorted(set(query) - set(_PAGED))
            if extra:
                raise _Answer(400, {"page_info": f"only limit may be sent beside it, not {extra}"})
            filters, after = _decode(query["page_info"])
        else:
            filters, after = {k: v for k, v in query.items() if k != "limit"}, None
        with self._lock:
            rows = self._rows(resource, filters)
        key = _sort_key(filters.get("order", "id asc"))
        if after is not None:
            rows = [r for r in rows if key(r) > tuple(after)]
        page, more = rows[:limit], len(rows) > limit
        links = []
        if after is not None:  # Shopify links back too; hakiri never follows it
            links.append(f'<{self._link(path, limit, filters, None)}>; rel="previous"')
        if more:
            links.append(f'<{self._link(path, limit, filters, key(page[-1]))}>; rel="next"')
        return {resource: [r.json() for r in page]}, ", ".join(links)

    def _rows(self, resource: str, filters: dict[str, str]) -> list[Any]:
        rows: list[Any] = list(getattr(self.dataset, resource))
        if resource == "orders":
            status = filters.get("status", "open")
            rows = [o for o in rows if status == "any" or o.status == status]
        low, high = filters.get("updated_at_min"), filters.get("updated_at_max")
        if low:
            rows = [r for r in rows if r.updated_at >= parse_iso(low)]
        if high:
            rows = [r for r in rows if r.updated_at <= parse_iso(high)]
        return sorted(rows, key=_sort_key(filters.get("order", "id asc")))

    def _link(self, path: str, limit: int, filters: dict[str, str], after: Any) -> str:
        token = base64.urlsafe_b64encode(json.dumps([filters, after]).encode()).decode()
        return f"{self.url}{path}?{urlencode({'limit': limit, 'page_info': token})}"


def _sort_key(order: str) -> Any:
    field, _, direction = order.partition(" ")
    if field not in ("id", "updated_at", "created_at") or direction not in ("", "asc"):
        raise _Answer(400, {"order": f"cannot sort by {order!r} here"})
    if field == "id":
        return lambda r: (r.id,)
    return lambda r: (getattr(r, field), r.id)


def _decode(token: str) -> tuple[dict[str, str], Any]:
    try:
        filters, after = json.loads(base64.urlsafe_b64decode(token.encode()))
    except (ValueError, TypeError):
        raise _Answer(400, {"page_info": "Invalid value."}) from None
    return filters, after
