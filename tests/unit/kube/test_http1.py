"""`controller.kube.http1.ConnectionPool` against a real TCP server written here, so each
test decides exactly what the server sends: keep-alive reuse, chunked bodies, a server
that closes, one that breaks mid-response, one that answers too late, and the pool's bound.
The exchanges run plain and over TLS, on asyncio's loop and on uvloop's (the controller's,
whose TLS transport is not an asyncio.Transport)."""

from __future__ import annotations

import asyncio
import datetime
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

import pytest
import uvloop

from controller.kube.http1 import ConnectionPool
from controller.runtime.certs import issue, write_files

T = TypeVar("T")
VARIANTS = ["asyncio", "asyncio-tls", "uvloop-tls"]

# (connection number, request head, request body) → raw response bytes, or None to hang up
Answer = Callable[[int, bytes, bytes], Awaitable[bytes | None]]


def _response(body: bytes, *, status: str = "200 OK", extra: str = "") -> bytes:
    head = f"HTTP/1.1 {status}\r\nContent-Type: application/json\r\n{extra}"
    return f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body


class Server(NamedTuple):
    url: str
    seen: list[int]  # the connection number of every request read, in order
    ssl: ssl.SSLContext | None  # what a client verifies the server with

    def pool(self, size: int, prefix: str = "") -> ConnectionPool:
        return ConnectionPool(self.url + prefix, self.ssl, size)


def _tls(directory: Path) -> tuple[ssl.SSLContext, ssl.SSLContext]:
    """A server context with a certificate for 127.0.0.1, and a client context trusting it."""
    now = datetime.datetime.now(datetime.UTC)
    write_files(directory, issue(["127.0.0.1"], now, datetime.timedelta(hours=1)))
    server = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server.load_cert_chain(directory / "tls.crt", directory / "tls.key")
    return server, ssl.create_default_context(cafile=str(directory / "ca.crt"))


def _run(variant: str, main: Callable[[], Coroutine[Any, Any, T]]) -> T:
    return uvloop.run(main()) if variant.startswith("uvloop") else asyncio.run(main())


@asynccontextmanager
async def _server(answer: Answer, variant: str, tmp_path: Path) -> AsyncIterator[Server]:
    """An HTTP/1.1 server on a free port, over TLS for the -tls variants."""
    seen: list[int] = []
    count = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal count
        count += 1
        number = count
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                length = 0
                for line in head.split(b"\r\n"):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":", 1)[1])
                body = await reader.readexactly(length)
                seen.append(number)
                reply = await answer(number, head, body)
                if reply is None:
                    break
                writer.write(reply)
                await writer.drain()
                if b"\r\nX-Test-Hang-Up: after\r\n" in reply:
                    break  # close while the client thinks the connection is kept alive
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    server_tls, client_tls = _tls(tmp_path) if variant.endswith("-tls") else (None, None)
    server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_tls)
    port = server.sockets[0].getsockname()[1]
    scheme = "https" if server_tls else "http"
    try:
        yield Server(f"{scheme}://127.0.0.1:{port}", seen, client_tls)
    finally:
        server.close()


def _echo() -> Answer:
    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        return _response(b'{"n": %d, "body": %d}' % (number, len(body)))

    return answer


@pytest.mark.parametrize("variant", VARIANTS)
def test_requests_reuse_one_connection_and_carry_method_target_headers_and_body(
    variant: str, tmp_path: Path
) -> None:
    heads: list[bytes] = []

    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        heads.append(head + body)
        return _response(b"{}")

    async def main() -> list[int]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(4, "/prefix/")
            for _ in range(3):
                reply = await pool.request(
                    "PATCH",
                    "/apis/x/v1/things/a/status?force=true",
                    {"Authorization": "Bearer t", "Content-Type": "application/json"},
                    b'{"a":1}',
                    5,
                )
                assert (reply.status, reply.reason, reply.body) == (200, "OK", b"{}")
            pool.close()
            return server.seen

    seen = _run(variant, main)
    assert seen == [1, 1, 1]
    first = heads[0].decode()
    assert first.startswith("PATCH /prefix/apis/x/v1/things/a/status?force=true HTTP/1.1\r\n")
    assert "\r\nHost: 127.0.0.1:" in first
    assert "\r\nAuthorization: Bearer t\r\n" in first
    assert "\r\nContent-Length: 7\r\n\r\n" in first
    assert first.endswith('{"a":1}')


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_chunked_body_is_read_whole_and_an_error_status_is_returned_with_its_reason(
    variant: str, tmp_path: Path
) -> None:
    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        if head.startswith(b"POST"):
            return _response(b'{"kind":"Status"}', status="409 Conflict")
        return (
            b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            b'4\r\n{"a"\r\n3\r\n:12\r\n1\r\n}\r\n0\r\n\r\n'
        )

    async def main() -> tuple[object, object, list[int]]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(1)
            chunked = await pool.request("PATCH", "/x", {}, None, 5)
            refused = await pool.request("POST", "/x", {}, b"{}", 5)
            pool.close()
            return chunked, refused, server.seen

    chunked, refused, seen = _run(variant, main)
    assert chunked == (200, "OK", b'{"a":12}')
    assert refused == (409, "Conflict", b'{"kind":"Status"}')
    assert seen == [1, 1]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_connection_the_server_closes_is_not_reused(variant: str, tmp_path: Path) -> None:
    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        return _response(b"{}", extra="Connection: close\r\n")

    async def main() -> list[int]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(2)
            for _ in range(3):
                assert (await pool.request("PATCH", "/x", {}, b"{}", 5)).status == 200
            return server.seen

    assert _run(variant, main) == [1, 2, 3]


@pytest.mark.parametrize("variant", VARIANTS)
def test_an_idle_connection_the_server_dropped_is_replaced_before_use(
    variant: str, tmp_path: Path
) -> None:
    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        return _response(b"{}", extra="X-Test-Hang-Up: after\r\n" if number == 1 else "")

    async def main() -> list[int]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(1)
            await pool.request("PATCH", "/x", {}, b"{}", 5)
            await asyncio.sleep(0.05)  # the server hangs up the idle connection
            assert [connection.open for connection in pool._idle] == [False]
            await pool.request("PATCH", "/x", {}, b"{}", 5)
            return server.seen

    assert _run(variant, main) == [1, 2]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_connection_broken_before_the_response_raises_a_connection_error(
    variant: str, tmp_path: Path
) -> None:
    async def answer(number: int, head: bytes, body: bytes) -> bytes | None:
        return None if number == 1 else _response(b"{}")

    async def main() -> list[int]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(1)
            with pytest.raises(ConnectionResetError):
                await pool.request("POST", "/x", {}, b"{}", 5)
            # nothing was resent; the next request opens a new connection
            assert (await pool.request("POST", "/x", {}, b"{}", 5)).status == 200
            return server.seen

    assert _run(variant, main) == [1, 2]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_malformed_response_raises_a_connection_error(variant: str, tmp_path: Path) -> None:
    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        return b"NOT HTTP AT ALL\r\n\r\n"

    async def main() -> None:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(1)
            with pytest.raises(ConnectionError, match="malformed HTTP response"):
                await pool.request("GET", "/x", {}, None, 5)
            assert pool._idle == []

    _run(variant, main)


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_late_answer_times_out_and_its_connection_is_not_reused(
    variant: str, tmp_path: Path
) -> None:
    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        if number == 1:
            await asyncio.sleep(1)
        return _response(b"{}")

    async def main() -> list[int]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(1)
            with pytest.raises(TimeoutError):
                await pool.request("PATCH", "/x", {}, b"{}", 0.1)
            assert (await pool.request("PATCH", "/x", {}, b"{}", 5)).status == 200
            return server.seen

    assert _run(variant, main) == [1, 2]


@pytest.mark.parametrize("variant", VARIANTS)
def test_the_pool_never_opens_more_connections_than_its_size(variant: str, tmp_path: Path) -> None:
    busy = 0
    most = 0

    async def answer(number: int, head: bytes, body: bytes) -> bytes:
        nonlocal busy, most
        busy += 1
        most = max(most, busy)
        await asyncio.sleep(0.01)
        busy -= 1
        return _response(b"{}")

    async def main() -> list[int]:
        async with _server(answer, variant, tmp_path) as server:
            pool = server.pool(3)
            replies = await asyncio.gather(
                *(pool.request("PATCH", "/x", {}, b"{}", 5) for _ in range(30))
            )
            assert all(reply.status == 200 for reply in replies)
            pool.close()
            return server.seen

    seen = _run(variant, main)
    assert most == 3
    assert sorted(set(seen)) == [1, 2, 3]


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_header_value_with_a_line_break_is_refused_before_anything_is_sent(
    variant: str, tmp_path: Path
) -> None:
    async def main() -> list[int]:
        async with _server(_echo(), variant, tmp_path) as server:
            pool = server.pool(1)
            with pytest.raises(ValueError, match="Authorization has a line break"):
                await pool.request("GET", "/x", {"Authorization": "a\r\nX-Evil: 1"}, None, 5)
            return server.seen

    assert _run(variant, main) == []


@pytest.mark.parametrize("variant", VARIANTS)
def test_a_closed_pool_refuses_requests_and_a_bad_url_is_refused(
    variant: str, tmp_path: Path
) -> None:
    async def main() -> None:
        async with _server(_echo(), variant, tmp_path) as server:
            pool = server.pool(1)
            pool.close()
            with pytest.raises(ConnectionResetError, match="closed"):
                await pool.request("GET", "/x", {}, None, 5)

    _run(variant, main)
    with pytest.raises(ValueError, match="not an http"):
        ConnectionPool("unix:///var/run/x.sock", None, 1)


@pytest.mark.parametrize("variant", VARIANTS)
@pytest.mark.parametrize("how", ["cancelled", "abort_all"])
def test_a_request_given_up_resets_its_connection(variant: str, how: str, tmp_path: Path) -> None:
    """A request cancelled half-way (or every connection abandoned: `abort_all`) resets its
    connection instead of closing it: the server sees a reset, not a goodbye, and nothing
    the kernel still held is delivered later (a leader's term ended; see leader.py)."""
    ended: list[str] = []

    async def main() -> None:
        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            try:
                await reader.readuntil(b"\r\n\r\n")
                ended.append("eof" if not await reader.read() else "data")
            except ConnectionResetError:
                ended.append("reset")
            except (asyncio.IncompleteReadError, ssl.SSLError, OSError) as exc:
                ended.append(type(exc).__name__)

        server_tls, client_tls = _tls(tmp_path) if variant.endswith("-tls") else (None, None)
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_tls)
        port = server.sockets[0].getsockname()[1]
        scheme = "https" if server_tls else "http"
        pool = ConnectionPool(f"{scheme}://127.0.0.1:{port}", client_tls, 1)
        request = asyncio.ensure_future(pool.request("PATCH", "/x", {}, b"{}", 30))
        await asyncio.sleep(0.2)  # sent; the server never answers
        if how == "cancelled":
            request.cancel()
        else:
            pool.abort_all()
        with pytest.raises((asyncio.CancelledError, ConnectionResetError)):
            await request
        for _ in range(50):
            if ended:
                break
            await asyncio.sleep(0.02)
        server.close()

    _run(variant, main)
    assert ended == ["reset"]
