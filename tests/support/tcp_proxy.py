"""A TCP proxy in front of PostgreSQL that can refuse new connections and cut open ones.

    proxy = TcpProxy("127.0.0.1", pg_port).start()
    url = f"postgresql://postgres@127.0.0.1:{proxy.port}/hakiri_test"
    proxy.refuse()        # new connections get ECONNREFUSED (the listening socket is closed)
    proxy.accept()        # listen again, on the same port
    proxy.cut()           # reset every open connection (both sides), now; returns how many
    proxy.stop()

Connections are pumped by threads (two per connection); a cut closes both sockets
with SO_LINGER 0, so each side sees a reset, as when a network path or a server
process dies. The server side of a connection is closed as soon as the client side
is, so a killed client's open transaction is rolled back at once by PostgreSQL.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time

__all__ = ["TcpProxy"]

_BUFFER = 1 << 16


def _reset(sock: socket.socket) -> None:
    """Close with an RST rather than a FIN, now.

    A close() alone is not enough: while a pump thread is blocked in recv() on the socket,
    the kernel keeps it open until that call returns, and the peer hears nothing (a
    silent half-open connection, not a cut). shutdown(SHUT_RD) sends nothing but wakes
    the reader; once it lets go, the close with SO_LINGER 0 resets the connection."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RD)
    with contextlib.suppress(OSError):
        sock.close()


class _Pair:
    def __init__(self, client: socket.socket, server: socket.socket) -> None:
        self.client, self.server = client, server
        self.closed = threading.Event()
        self.bytes = 0

    def close(self, *, reset: bool = False) -> None:
        if self.closed.is_set():
            return
        self.closed.set()
        for sock in (self.client, self.server):
            if reset:
                _reset(sock)
            else:
                with contextlib.suppress(OSError):
                    sock.shutdown(socket.SHUT_RDWR)
                with contextlib.suppress(OSError):
                    sock.close()


class TcpProxy:
    """Forwards 127.0.0.1:`port` to `target_host`:`target_port`."""

    def __init__(self, target_host: str, target_port: int, listen_host: str = "127.0.0.1") -> None:
        self.target = (target_host, target_port)
        self.listen_host = listen_host
        self.port = 0
        self._listener: socket.socket | None = None
        self._accepting: threading.Thread | None = None
        self._pairs: set[_Pair] = set()
        self._lock = threading.Lock()
        self._opened = threading.Condition(self._lock)
        self.accepted = 0  # connections accepted since start
        self.cut_total = 0  # connections reset by cut()

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> TcpProxy:
        self._listen()
        return self

    def stop(self) -> None:
        self.refuse()
        self.cut()

    def __enter__(self) -> TcpProxy:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ------------------------------------------------------------------ faults

    def refuse(self) -> None:
        """Stop listening: a connect() gets ECONNREFUSED until `accept()`. Open connections stay."""
        listener, self._listener = self._listener, None
        if listener is not None:
            with contextlib.suppress(OSError):
                listener.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                listener.close()
        if self._accepting is not None:
            self._accepting.join(timeout=5)
            self._accepting = None

    def accept(self) -> None:
        """Listen again on the same port."""
        if self._listener is None:
            self._listen()

    @property
    def refusing(self) -> bool:
        return self._listener is None

    def cut(self) -> int:
        """Reset every open connection; returns how many there were."""
        with self._lock:
            pairs = list(self._pairs)
            self._pairs.clear()
        for pair in pairs:
            pair.close(reset=True)
        self.cut_total += len(pairs)
        return len(pairs)

    def open_connections(self) -> int:
        with self._lock:
            return len(self._pairs)

    def wait_for_accepted(self, count: int, timeout: float) -> bool:
        """Block until `count` connections were accepted since start (True) or `timeout` passes."""
        deadline = time.monotonic() + timeout
        with self._opened:
            while self.accepted < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._opened.wait(left)
            return True

    def wait_for_connection(self, timeout: float) -> bool:
        """Block until at least one connection is open (True) or `timeout` passes (False)."""
        deadline = time.monotonic() + timeout
        with self._opened:
            while not self._pairs:
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self._opened.wait(left)
            return True

    # ------------------------------------------------------------------ plumbing

    def _listen(self) -> None:
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        for attempt in range(50):
            try:
                listener.bind((self.listen_host, self.port))
                break
            except OSError:
                if attempt == 49:
                    raise
                time.sleep(0.1)
        listener.listen(128)
        self.port = listener.getsockname()[1]
        self._listener = listener
        self._accepting = threading.Thread(
            target=self._accept_loop, args=(listener,), name="tcp-proxy-accept", daemon=True
        )
        self._accepting.start()

    def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return  # refuse() closed the listener
            try:
                server = socket.create_connection(self.target, timeout=10)
                server.settimeout(None)
            except OSError:
                _reset(client)
                continue
            for sock in (client, server):
                sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            pair = _Pair(client, server)
            with self._opened:
                self._pairs.add(pair)
                self.accepted += 1
                self._opened.notify_all()
            for source, sink in ((client, server), (server, client)):
                threading.Thread(
                    target=self._pump, args=(pair, source, sink), name="tcp-proxy-pump", daemon=True
                ).start()

    def _pump(self, pair: _Pair, source: socket.socket, sink: socket.socket) -> None:
        try:
            while not pair.closed.is_set():
                data = source.recv(_BUFFER)
                if not data:
                    break
                sink.sendall(data)
                pair.bytes += len(data)
        except OSError:
            pass
        # Either side ended: end both, so the server notices a dead client at once.
        with self._lock:
            self._pairs.discard(pair)
        pair.close()
