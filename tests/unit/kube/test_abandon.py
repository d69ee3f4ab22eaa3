"""`KubeApiClient.abandon_connections` (a leader's term ended, controller/kube/leader.py):
every connection to the API server, the generated client's (aiohttp) and the write pool's,
is reset at once, before any cancelled request could close its own gracefully; the
requests in flight fail, and the client opens new connections afterwards."""

from __future__ import annotations

import asyncio
import ssl
from pathlib import Path

import aiohttp
import pytest
import uvloop
from kubernetes.aio import client as aio_client

from controller.kube.client import KubeApiClient
from tests.unit.kube.test_http1 import _tls


@pytest.mark.parametrize("loop", ["asyncio", "uvloop"])
def test_every_connection_is_reset_and_new_ones_follow(loop: str, tmp_path: Path) -> None:
    ended: list[str] = []
    answered = 0

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        nonlocal answered
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            if b"/answer" in head:
                answered += 1
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n{}")
                await writer.drain()
            if b"/watch" in head:  # one event, then nothing: a quiet watch
                writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n3\r\n{}\n\r\n")
                await writer.drain()
            ended.append("eof" if not await reader.read() else "data")
        except ConnectionResetError:
            ended.append("reset")
        except (asyncio.IncompleteReadError, ssl.SSLError, OSError) as exc:
            ended.append(type(exc).__name__)

    async def main() -> None:
        server_tls, _ = _tls(tmp_path)
        server = await asyncio.start_server(serve, "127.0.0.1", 0, ssl=server_tls)
        port = server.sockets[0].getsockname()[1]
        configuration = aio_client.Configuration(host=f"https://127.0.0.1:{port}")
        configuration.ssl_ca_cert = str(tmp_path / "ca.crt")
        api = KubeApiClient(configuration)
        pool = api.write_pool()
        assert pool is not None
        watch = await api.rest_client.request("GET", configuration.host + "/watch")
        assert await watch.response.content.readline() == b"{}\n"
        reading = asyncio.ensure_future(watch.response.content.readline())
        hanging = [
            asyncio.ensure_future(api.rest_client.request("GET", configuration.host + "/hang")),
            asyncio.ensure_future(pool.request("PATCH", "/hang", {}, b"{}", 30)),
        ]
        await asyncio.sleep(0.3)  # both requests sent; the server never answers
        api.abandon_connections()
        for task in hanging:
            task.cancel()
        await asyncio.gather(*hanging, return_exceptions=True)
        # The watch, not cancelled, fails as on a broken connection instead of waiting.
        with pytest.raises(aiohttp.ClientError):
            await asyncio.wait_for(reading, 5)
        for _ in range(50):
            if len(ended) == 3:
                break
            await asyncio.sleep(0.02)
        assert ended == ["reset", "reset", "reset"]
        answer = await api.rest_client.request("GET", configuration.host + "/answer")
        assert answer.status == 200 and answered == 1
        await api.close()
        server.close()

    uvloop.run(main()) if loop == "uvloop" else asyncio.run(main())
