"""The suite's own HTTPS server for webhook tests: a thread on loopback, a trustme CA, a
certificate for "localhost" and "hook.test". `allow_loopback_for_tests(ca_file)` lets hakiri reach it."""

from __future__ import annotations

import socket
import ssl
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
import trustme

SECRET_BODY = "INTERNAL-STACKTRACE-do-not-leak"


@dataclass
class Received:
    path: str
    headers: dict[str, str]
    body: bytes


@dataclass
class HookServer:
    """What the server saw: TCP connections accepted, requests read."""

    answer: str = "ok"  # ok | redirect | error | silent
    connections: int = 0
    requests: list[Received] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    port: int = 0


def _first_localhost_address() -> tuple[socket.AddressFamily, str]:
    family, *_rest, sockaddr = socket.getaddrinfo("localhost", 0, type=socket.SOCK_STREAM)[0]
    return family, sockaddr[0]


def _serve(state: HookServer, tls: ssl.SSLContext, family: socket.AddressFamily, address: str):
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append(Received(self.path, dict(self.headers.items()), body))
            if state.answer == "silent":
                state.release.wait(10)
                return
            status, extra = {
                "ok": (200, {}),
                "redirect": (302, {"Location": "https://169.254.169.254/latest/meta-data"}),
                "error": (500, {}),
            }[state.answer]
            payload = SECRET_BODY.encode()
            self.send_response(status)
            for name, value in extra.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def log_message(self, format: str, *args: object) -> None:
            pass

    class Server(ThreadingHTTPServer):
        address_family = family
        daemon_threads = True

        def get_request(self):
            conn, peer = super().get_request()
            state.connections += 1
            return tls.wrap_socket(conn, server_side=True), peer

        def handle_error(self, request, client_address) -> None:
            pass  # the client hanging up early is part of several tests

    server = Server((address, 0), Handler)
    state.port = server.server_address[1]
    return server


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def ca_file(ca: trustme.CA, tmp_path: Path) -> str:
    path = tmp_path / "ca.pem"
    ca.cert_pem.write_to_path(str(path))
    return str(path)


def _start(ca: trustme.CA, family: socket.AddressFamily, address: str) -> Iterator[HookServer]:
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("localhost", "hook.test").configure_cert(tls)
    state = HookServer()
    server = _serve(state, tls, family, address)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()


@pytest.fixture
def hook_server(ca: trustme.CA) -> Iterator[HookServer]:
    """Listening on the address "localhost" resolves to first, as post_json will pick it."""
    yield from _start(ca, *_first_localhost_address())


@pytest.fixture
def v4_hook_server(ca: trustme.CA) -> Iterator[HookServer]:
    """Listening on 127.0.0.1 only."""
    yield from _start(ca, socket.AF_INET, "127.0.0.1")
