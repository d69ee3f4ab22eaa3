"""A lean HTTP/1.1 keep-alive connection pool for the API server writes.

Every admission, eviction, pending reason, queue status and Event is one request, and the
bench makes two more per Workload. aiohttp spends about 0.4–0.5 ms of CPU on each such
request on the benchmark host (its request and response objects, cookie jar, tracing
hooks, header multidicts and stream reader); this pool spends about 0.2 ms for the same
request, body encoding and decoding included (`tests/bench/bench_http_client.py` measures both
on one API server). It does only what the API server's writes need: one request at a time
per connection on a bounded pool of persistent TLS connections, a response parsed by
httptools (the C parser uvicorn uses), with a Content-Length or chunked body, read whole.

A connection that the server closed while idle is dropped before use. A request whose
connection breaks raises `ConnectionResetError`, an OSError, which the callers treat like
any broken connection (`controller.kube.client.CONNECTION_ERRORS`); nothing is retried
here, so a non-idempotent POST is never sent twice behind the caller's back.

Every connection is abortive (`make_abortive`): closing it resets it, and what the kernel
had not sent yet is dropped. A request given up half-way (cancelled when the leader's term
ends, or timed out) can then never reach the API server later, as it would once a network
partition heals if the kernel still held it.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
import struct
from collections.abc import Mapping
from typing import Any, NamedTuple, cast
from urllib.parse import urlsplit

import httptools

_LINGER_RESET = struct.pack("ii", 1, 0)  # SO_LINGER on, 0 s: close() resets the connection


def make_abortive(sock: Any) -> None:
    """Make closing `sock` reset its connection, dropping what was not sent yet."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)


def abortive_socket(addr_info: tuple[Any, ...]) -> socket.socket:
    """A socket for `addr_info` (aiohttp's `socket_factory`) that `make_abortive` made."""
    family, type_, proto = addr_info[:3]
    sock = socket.socket(family, type_, proto)
    make_abortive(sock)
    return sock


class HttpResponse(NamedTuple):
    status: int
    reason: str
    body: bytes


class _Connection(asyncio.Protocol):
    """One persistent connection; one exchange at a time."""

    def __init__(self) -> None:
        self.parser = httptools.HttpResponseParser(self)
        # asyncio's or uvloop's (whose TLS transport is not an asyncio.Transport)
        self.transport: asyncio.WriteTransport | None = None
        self.waiter: asyncio.Future[HttpResponse] | None = None
        self.chunks: list[bytes] = []
        self.reason = ""
        self.open = True

    # -- asyncio.Protocol --------------------------------------------------------------------

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = cast(asyncio.WriteTransport, transport)

    def connection_lost(self, exc: Exception | None) -> None:
        self.open = False
        self._fail(ConnectionResetError(f"the API server closed the connection: {exc or 'EOF'}"))

    def data_received(self, data: bytes) -> None:
        try:
            self.parser.feed_data(data)
        except httptools.HttpParserError as exc:
            self._fail(ConnectionError(f"malformed HTTP response from the API server: {exc}"))
            self.close()

    def eof_received(self) -> bool:
        return False  # close the transport; connection_lost fails a pending exchange

    # -- httptools callbacks -----------------------------------------------------------------

    def on_status(self, reason: bytes) -> None:
        self.reason = reason.decode("latin-1")

    def on_body(self, chunk: bytes) -> None:
        self.chunks.append(chunk)

    def on_message_complete(self) -> None:
        response = HttpResponse(self.parser.get_status_code(), self.reason, b"".join(self.chunks))
        self.chunks = []
        if not self.parser.should_keep_alive():
            self.close()
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_result(response)

    # -- use ---------------------------------------------------------------------------------

    def exchange(self, request: bytes) -> asyncio.Future[HttpResponse]:
        assert self.transport is not None and self.waiter is None
        self.waiter = asyncio.get_running_loop().create_future()
        self.transport.write(request)
        return self.waiter

    def close(self) -> None:
        self.open = False
        if self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Reset the connection now, dropping what was not sent: a TLS transport's `close`
        would first wait for the server to answer its goodbye, holding the request."""
        self.open = False
        if self.transport is not None:
            self.transport.abort()

    def _fail(self, exc: Exception) -> None:
        waiter, self.waiter = self.waiter, None
        if waiter is not None and not waiter.done():
            waiter.set_exception(exc)


class ConnectionPool:
    """At most `size` persistent connections to the server of `url` (`https://host:port`,
    optionally with a path prefix), over TLS with `ssl_context` for https."""

    def __init__(self, url: str, ssl_context: ssl.SSLContext | None, size: int) -> None:
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ValueError(f"not an http(s) server URL: {url!r}")
        self.host = parts.hostname
        self.port = parts.port or (443 if parts.scheme == "https" else 80)
        self.ssl = ssl_context if parts.scheme == "https" else None
        self.prefix = parts.path.rstrip("/")
        self._host_line = f"Host: {parts.netloc}\r\n"
        self._idle: list[_Connection] = []
        self._busy: set[_Connection] = set()
        self._slots = asyncio.Semaphore(size)
        self._closed = False

    async def request(
        self,
        method: str,
        target: str,
        headers: Mapping[str, str],
        body: bytes | None,
        timeout: float,
    ) -> HttpResponse:
        """Send one request (`target`: the path and query) and read its whole response
        within `timeout` seconds; raises OSError (ConnectionResetError, ConnectionError)
        when the connection breaks and TimeoutError when the time runs out."""
        request = self._encode(method, target, headers, body)
        async with self._slots:
            if self._closed:
                raise ConnectionResetError("the connection pool is closed")
            async with asyncio.timeout(timeout):
                connection = await self._connection()
                self._busy.add(connection)
                try:
                    response = await connection.exchange(request)
                except BaseException:
                    connection.abort()  # given up half-way: it must never arrive later
                    raise
                finally:
                    self._busy.discard(connection)
            if connection.open and not self._closed:
                self._idle.append(connection)
            else:
                connection.close()
            return response

    def close(self) -> None:
        """Close the idle connections; those in use close when their exchange ends."""
        self._closed = True
        while self._idle:
            self._idle.pop().close()

    def abort_all(self) -> None:
        """Reset every connection now, idle or in use (their requests fail); the pool
        opens new ones for the next requests."""
        while self._idle:
            self._idle.pop().abort()
        for connection in list(self._busy):
            connection.abort()

    async def _connection(self) -> _Connection:
        while self._idle:
            connection = self._idle.pop()
            if connection.open:
                return connection
        transport, connection = await asyncio.get_running_loop().create_connection(
            _Connection, self.host, self.port, ssl=self.ssl
        )
        make_abortive(transport.get_extra_info("socket"))
        return connection

    def _encode(
        self, method: str, target: str, headers: Mapping[str, str], body: bytes | None
    ) -> bytes:
        lines = [f"{method} {self.prefix}{target} HTTP/1.1\r\n", self._host_line]
        for name, value in headers.items():
            if "\r" in value or "\n" in value:
                raise ValueError(f"the HTTP header {name} has a line break in its value")
            lines.append(f"{name}: {value}\r\n")
        lines.append(f"Content-Length: {len(body) if body else 0}\r\n\r\n")
        head = "".join(lines).encode("latin-1")
        return head + body if body else head
