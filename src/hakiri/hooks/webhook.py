"""POST a JSON run summary to a webhook, through the SSRF guard.

The URL is checked and its host resolved once (`hakiri.guards.urls`); the TCP
connection goes to that checked address and never to a second lookup of the
name, so DNS rebinding cannot switch the target after the check. TLS verifies
the certificate against the URL's host name (sent as SNI too). One HTTP/1.1
POST with `Connection: close`; only the status line is read (at most 1 KiB).
Redirects are never followed, and the response body is never read, logged,
returned or put in an error message. Connecting, the TLS handshake, sending and
reading share one deadline of `timeout_seconds`.

Tests only: `allow_loopback_for_tests(ca_file)` lets webhooks reach loopback
addresses (127/8, ::1), trusting only the certificates of `ca_file`, for the
length of a `with` block, so the suite can run its own HTTPS server on
127.0.0.1. It is a Python-only switch: no manifest key and no environment
variable can turn it on.
"""

from __future__ import annotations

import json
import socket
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import date, datetime
from typing import Any

from hakiri import __version__
from hakiri.errors import HookError
from hakiri.guards import urls
from hakiri.guards.urls import Resolver, WebhookTarget, resolve_webhook_url

__all__ = ["allow_loopback_for_tests", "post_json"]

USER_AGENT = f"hakiri/{__version__}"
_STATUS_LINE_LIMIT = 1024  # bytes read from the response, at most

# The one name lookup of a webhook; tests swap it to play a rebinding DNS server.
_resolver: Resolver = socket.getaddrinfo


@dataclass(frozen=True)
class _LoopbackPolicy:
    tls: ssl.SSLContext  # trusts only the test CA


_loopback_policy: _LoopbackPolicy | None = None


@contextmanager
def allow_loopback_for_tests(ca_file: str) -> Iterator[None]:
    """For the test suite only: allow loopback webhooks, trusting only `ca_file`, inside the block."""
    global _loopback_policy
    previous = _loopback_policy, urls._loopback_for_tests
    _loopback_policy = _LoopbackPolicy(ssl.create_default_context(cafile=ca_file))
    urls._loopback_for_tests = True  # manifests naming https://localhost:<port> validate too
    try:
        yield
    finally:
        _loopback_policy, urls._loopback_for_tests = previous


def post_json(url: str, payload: Mapping[str, Any], *, timeout_seconds: float = 5.0) -> int:
    """POST `payload` as JSON; return the 2xx status, or raise HookError (UnsafeHook if refused)."""
    policy = _loopback_policy
    target = resolve_webhook_url(url, resolver=_resolver, allow_loopback=policy is not None)
    tls = policy.tls if policy is not None else ssl.create_default_context()
    status = _exchange(target, _request(target, _encode(payload)), tls, timeout_seconds)
    if 200 <= status < 300:
        return status
    if 300 <= status < 400:
        raise HookError(
            f"webhook answered {status} redirect; redirects are not followed",
            "point the hook at the final URL of the endpoint",
        )
    raise HookError(
        f"webhook answered HTTP {status}",
        "check the endpoint's own logs; hakiri does not read or keep the response body",
    )


def _encode(payload: Mapping[str, Any]) -> bytes:
    def plain(value: object) -> str:
        if isinstance(value, datetime | date):
            return value.isoformat()
        raise TypeError(f"{type(value).__name__} is not JSON serializable")

    try:
        return json.dumps(payload, default=plain, allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise HookError(
            f"the webhook payload cannot be sent as JSON: {exc}",
            "this is a bug in hakiri; please report it",
        ) from exc


def _request(target: WebhookTarget, body: bytes) -> bytes:
    host = f"[{target.host}]" if ":" in target.host else target.host
    if target.port != 443:
        host = f"{host}:{target.port}"
    head = (
        f"POST {target.path_and_query} HTTP/1.1\r\n"
        f"Host: {host}\r\n"
        f"User-Agent: {USER_AGENT}\r\n"
        "Content-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\n"
        "Connection: close\r\n"
        "\r\n"
    )
    return head.encode("ascii") + body


def _exchange(
    target: WebhookTarget, request: bytes, tls: ssl.SSLContext, timeout_seconds: float
) -> int:
    """Send `request` to the checked address over TLS; the response's status code."""
    deadline = time.monotonic() + timeout_seconds

    def remaining() -> float:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError
        return left

    where = f"{target.address} port {target.port}"
    try:
        with socket.create_connection((target.address, target.port), timeout=remaining()) as raw:
            raw.settimeout(remaining())
            with tls.wrap_socket(raw, server_hostname=target.host) as conn:
                conn.settimeout(remaining())
                conn.sendall(request)
                return _status(_status_line(conn, remaining))
    except TimeoutError:
        raise HookError(
            f"webhook did not answer within {timeout_seconds:g}s ({where})",
            "check that the endpoint is up, or raise the hook's timeout_seconds (at most 60)",
        ) from None
    except ssl.SSLCertVerificationError as exc:
        raise HookError(
            f"webhook's TLS certificate was refused: {exc.verify_message}",
            f"the endpoint must present a certificate valid for {target.host}",
        ) from None
    except ssl.SSLError as exc:
        raise HookError(
            f"TLS with the webhook failed: {exc.reason or type(exc).__name__} ({where})",
            "the endpoint must speak HTTPS (TLS 1.2 or later) on that port",
        ) from None
    except OSError as exc:
        raise HookError(
            f"cannot reach the webhook: {exc.strerror or type(exc).__name__} ({where})",
            "check that the endpoint is up and reachable from where hakiri runs",
        ) from None


def _status_line(conn: ssl.SSLSocket, remaining: Callable[[], float]) -> bytes:
    data = b""
    while b"\r\n" not in data:
        if len(data) >= _STATUS_LINE_LIMIT:
            raise HookError(
                "webhook answered without an HTTP status line", "the endpoint must speak HTTP/1.1"
            )
        conn.settimeout(remaining())
        chunk = conn.recv(_STATUS_LINE_LIMIT - len(data))
        if not chunk:
            raise HookError(
                "webhook closed the connection without answering",
                "check the endpoint's own logs",
            )
        data += chunk
    return data.split(b"\r\n", 1)[0]


def _status(line: bytes) -> int:
    parts = line.split(b" ", 2)
    if (
        len(parts) < 2
        or not parts[0].startswith(b"HTTP/1.")
        or len(parts[1]) != 3
        or not parts[1].isdigit()
    ):
        raise HookError(
            "webhook answered without an HTTP status line", "the endpoint must speak HTTP/1.1"
        )
    return int(parts[1])
