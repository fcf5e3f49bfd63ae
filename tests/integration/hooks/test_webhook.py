"""Webhooks against a real HTTPS server on loopback: delivery, no redirects, no leaks, no rebinding.

The server is the suite's own (a thread, a trustme CA, a certificate for
"localhost" and "hook.test"); `allow_loopback_for_tests` lets post_json reach it.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest
import trustme

import hakiri
from hakiri.errors import HookError, UnsafeHook
from hakiri.hooks import webhook
from hakiri.hooks.webhook import allow_loopback_for_tests, post_json
from tests.integration.hooks.conftest import SECRET_BODY, HookServer

PAYLOAD = {
    "pipeline_id": "orders",
    "run_id": "r-1",
    "status": "success",
    "rows_loaded": 1200,
    "rows_quarantined": 3,
    "started_at": "2025-01-01T00:00:00+00:00",
    "hook": "post",
}


@pytest.fixture
def connections(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, int]]:
    """Every address the client connects to."""
    seen: list[tuple[str, int]] = []
    real = socket.create_connection

    def spy(address, *args, **kwargs):
        seen.append(tuple(address[:2]))
        return real(address, *args, **kwargs)

    monkeypatch.setattr(socket, "create_connection", spy)
    return seen


def test_delivers_the_json_payload(hook_server: HookServer, ca_file: str, connections) -> None:
    with allow_loopback_for_tests(ca_file):
        status = post_json(f"https://localhost:{hook_server.port}/hook?source=hakiri", PAYLOAD)

    assert status == 200
    assert len(hook_server.requests) == 1
    received = hook_server.requests[0]
    assert received.path == "/hook?source=hakiri"
    assert json.loads(received.body) == PAYLOAD
    assert received.body == json.dumps(PAYLOAD).encode()
    assert received.headers["Content-Type"] == "application/json"
    assert received.headers["Host"] == f"localhost:{hook_server.port}"
    assert received.headers["Connection"] == "close"
    assert received.headers["User-Agent"] == f"hakiri/{hakiri.__version__}"
    assert len(connections) == 1


def test_a_redirect_is_never_followed(hook_server: HookServer, ca_file: str, connections) -> None:
    hook_server.answer = "redirect"

    with allow_loopback_for_tests(ca_file), pytest.raises(HookError) as failed:
        post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD)

    assert failed.value.reason == "webhook answered 302 redirect; redirects are not followed"
    assert len(hook_server.requests) == 1
    assert hook_server.connections == 1
    assert connections == [(connections[0][0], hook_server.port)]  # nothing to 169.254.169.254


def test_an_error_status_is_named_and_the_body_is_never_shown(
    hook_server: HookServer, ca_file: str
) -> None:
    hook_server.answer = "error"

    with allow_loopback_for_tests(ca_file), pytest.raises(HookError) as failed:
        post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD)

    assert "500" in failed.value.reason
    shown = f"{failed.value} {failed.value.reason} {failed.value.hint}"
    assert SECRET_BODY not in shown


def test_a_server_that_never_answers_times_out(
    hook_server: HookServer, ca_file: str, connections
) -> None:
    hook_server.answer = "silent"  # holds the request for 10 s, then hangs up without a status

    with allow_loopback_for_tests(ca_file), pytest.raises(HookError) as failed:
        post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD, timeout_seconds=0.5)

    # hakiri's own deadline ended the wait (a server that hung up first would read "closed the
    # connection without answering"), on the one connection it made.
    [(address, port)] = connections
    assert port == hook_server.port
    assert failed.value.reason == (
        f"webhook did not answer within 0.5s ({address} port {hook_server.port})"
    )
    assert failed.value.hint == (
        "check that the endpoint is up, or raise the hook's timeout_seconds (at most 60)"
    )


def test_loopback_is_refused_without_the_test_switch(hook_server: HookServer, connections) -> None:
    with pytest.raises(UnsafeHook, match="loopback"):
        post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD)

    assert connections == []
    assert hook_server.connections == 0
    assert hook_server.requests == []


def test_the_switch_ends_with_its_block(hook_server: HookServer, ca_file: str) -> None:
    with allow_loopback_for_tests(ca_file):
        assert post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD) == 200

    with pytest.raises(UnsafeHook):
        post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD)


def test_a_certificate_from_another_ca_is_refused(hook_server: HookServer, tmp_path: Path) -> None:
    other = tmp_path / "other-ca.pem"
    trustme.CA().cert_pem.write_to_path(str(other))

    with allow_loopback_for_tests(str(other)), pytest.raises(HookError, match="certificate"):
        post_json(f"https://localhost:{hook_server.port}/hook", PAYLOAD)

    assert hook_server.requests == []


def test_the_checked_address_is_the_one_connected_to(
    v4_hook_server: HookServer, ca_file: str, connections, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rebinding DNS server: the checked answer first, an internal address after.
    answers = iter(["127.0.0.1", "169.254.169.254", "10.0.0.1"])
    asked: list[str] = []

    def rebinding(host: str, port: int, *args: object, **kwargs: object):
        asked.append(host)
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (next(answers), port))]

    monkeypatch.setattr(webhook, "_resolver", rebinding)

    with allow_loopback_for_tests(ca_file):
        status = post_json(f"https://hook.test:{v4_hook_server.port}/hook", PAYLOAD)

    assert status == 200
    assert asked == ["hook.test"]  # one lookup, never a second
    assert connections == [("127.0.0.1", v4_hook_server.port)]
    assert v4_hook_server.requests[0].headers["Host"] == f"hook.test:{v4_hook_server.port}"


def test_a_name_resolving_to_an_internal_address_is_refused_before_connecting(
    v4_hook_server: HookServer, ca_file: str, connections, monkeypatch: pytest.MonkeyPatch
) -> None:
    def internal(host: str, port: int, *args: object, **kwargs: object):
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", ("10.0.0.1", port))]

    monkeypatch.setattr(webhook, "_resolver", internal)

    with allow_loopback_for_tests(ca_file), pytest.raises(UnsafeHook, match="private"):
        post_json(f"https://hook.test:{v4_hook_server.port}/hook", PAYLOAD)

    assert connections == []
    assert v4_hook_server.connections == 0
