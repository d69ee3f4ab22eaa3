"""A TCP proxy that can cut a client off from its server, as a network would: what tests put
between a controller replica and the API server (a partition), or in front of webhook
replicas (a Service whose endpoints can all be down).

    proxy = TcpProxy([("127.0.0.1", api_port)]).start()   # clients connect to proxy.port
    proxy.partition()   # nothing gets through either way; it is held, not lost
    proxy.heal()        # what was held is delivered
    proxy.refuse()      # connections refused, those open reset (endpoints gone)
    proxy.accept()      # back

A partition holds the bytes in flight as TCP does while a link is down: a connection that
the client closes with a FIN during the partition still delivers what it sent once the
partition heals (the kernel retransmits it), while one it closes with a reset (SO_LINGER
0, `controller.kube.http1.make_abortive`) loses them, as the kernel drops them then. New
connections made during a partition reach the server only when it heals. TLS passes
through untouched (the API server's certificate names 127.0.0.1, so a client verifies it
through the proxy as well). The proxy runs its own event loop in a background thread.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import Any

from controller.kube.http1 import make_abortive

__all__ = ["TcpProxy"]


class _Link:
    """One client connection and its upstream connection."""

    def __init__(self, proxy: TcpProxy, client: asyncio.Transport) -> None:
        self.proxy = proxy
        self.client = client
        self.upstream: asyncio.Transport | None = None
        self.up_held = bytearray()  # client → server, while partitioned or connecting
        self.down_held = bytearray()  # server → client, while partitioned
        self.client_eof = False  # the client sent a FIN
        self.eof_sent = False
        self.client_reset = False  # the client reset the connection: what it sent is lost
        self.upstream_closed = False
        self.upstream_reset = False
        self.closed = False

    # -- what happens on either side ---------------------------------------------------------

    def from_client(self, data: bytes) -> None:
        if self.upstream is None or self.proxy.partitioned:
            self.up_held += data
        else:
            self.upstream.write(data)

    def from_upstream(self, data: bytes) -> None:
        if self.proxy.partitioned:
            self.down_held += data
        elif not self.closed:
            self.client.write(data)

    def client_ended(self, reset: bool) -> None:
        """The client sent a FIN (`reset` False) or a reset."""
        if self.closed:
            return
        if reset:
            self.client_reset = True
            self.up_held.clear()  # the kernel dropped what it had not delivered
        else:
            self.client_eof = True
        if not self.proxy.partitioned:
            self.flush()

    def upstream_ended(self, reset: bool) -> None:
        self.upstream_closed = True
        self.upstream_reset = reset
        if not self.proxy.partitioned:
            self.flush()

    # -- the proxy's part ---------------------------------------------------------------------

    async def connect(self) -> None:
        """Open the upstream connection to the first target that accepts (round robin);
        none: the client's connection is reset."""
        if self.closed or self.client_reset:
            self.abort()
            return
        proxy = self.proxy
        targets = proxy.targets()
        for i in range(len(targets)):
            host, port = targets[(proxy.next_target + i) % len(targets)]
            try:
                transport, _ = await asyncio.get_running_loop().create_connection(
                    lambda: _UpstreamSide(self), host, port
                )
            except OSError:
                continue
            proxy.next_target = (proxy.next_target + i + 1) % len(targets)
            make_abortive(transport.get_extra_info("socket"))
            self.upstream = transport  # type: ignore[assignment]
            if not proxy.partitioned:
                self.flush()
            return
        self.abort()

    def flush(self) -> None:
        """Deliver what was held, then the ends that were held with it."""
        if self.closed:
            return
        upstream = self.upstream
        if upstream is not None and not self.upstream_closed:
            if self.client_reset:
                self.abort()
                return
            if self.up_held:
                upstream.write(bytes(self.up_held))
                self.up_held.clear()
            if self.client_eof and not self.eof_sent and upstream.can_write_eof():
                upstream.write_eof()
                self.eof_sent = True
        if self.down_held and not self.client_reset:
            self.client.write(bytes(self.down_held))
            self.down_held.clear()
        if self.upstream_closed:
            if self.upstream_reset:
                self.abort()
            else:
                self.client.close()
                self._finish()
        elif self.client_reset:
            self.abort()

    def abort(self) -> None:
        self.client.abort()
        if self.upstream is not None:
            self.upstream.abort()
        self._finish()

    def _finish(self) -> None:
        self.closed = True
        self.proxy.links.discard(self)


class _ClientSide(asyncio.Protocol):
    def __init__(self, proxy: TcpProxy) -> None:
        self.proxy = proxy
        self.link: _Link | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        make_abortive(transport.get_extra_info("socket"))
        self.link = _Link(self.proxy, transport)  # type: ignore[arg-type]
        self.proxy.links.add(self.link)
        if not self.proxy.partitioned:  # else connected upstream when the partition heals
            self.proxy.loop.create_task(self.link.connect())

    def data_received(self, data: bytes) -> None:
        assert self.link is not None
        self.link.from_client(data)

    def eof_received(self) -> bool:
        assert self.link is not None
        self.link.client_ended(reset=False)
        return True  # half-closed: the server's answer may still come

    def connection_lost(self, exc: Exception | None) -> None:
        if self.link is not None and exc is not None:
            self.link.client_ended(reset=True)


class _UpstreamSide(asyncio.Protocol):
    def __init__(self, link: _Link) -> None:
        self.link = link

    def data_received(self, data: bytes) -> None:
        self.link.from_upstream(data)

    def eof_received(self) -> bool:
        return False

    def connection_lost(self, exc: Exception | None) -> None:
        self.link.upstream_ended(reset=exc is not None)


class TcpProxy:
    """Listens on 127.0.0.1:`port` (0: a free one) and forwards each connection to one of
    `targets` ((host, port) pairs, or a function that returns them), round robin."""

    def __init__(
        self,
        targets: list[tuple[str, int]] | Callable[[], list[tuple[str, int]]],
        port: int = 0,
    ) -> None:
        self.targets = targets if callable(targets) else (lambda: list(targets))
        self.port = port
        self.partitioned = False
        self.next_target = 0
        self.links: set[_Link] = set()
        self.loop = asyncio.new_event_loop()
        self._server: asyncio.AbstractServer | None = None
        self._thread = threading.Thread(target=self.loop.run_forever, daemon=True, name="proxy")

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.port}"

    def start(self) -> TcpProxy:
        self._thread.start()
        self._call(self._listen())
        return self

    def stop(self) -> None:
        """Reset every connection and stop (again: nothing)."""
        if not self._thread.is_alive():
            return
        with contextlib.suppress(RuntimeError):
            self._call(self._close(reset=True))
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(5)

    def partition(self) -> None:
        """From now on nothing gets through, either way, until `heal`."""
        self._call(self._set_partitioned(True))

    def heal(self) -> None:
        """Deliver what the partition held and forward again."""
        self._call(self._set_partitioned(False))

    def refuse(self) -> None:
        """Refuse new connections and reset the open ones (no endpoint left)."""
        self._call(self._close(reset=True))

    def accept(self) -> None:
        """Accept connections again (on the same port)."""
        self._call(self._listen())

    def cut(self) -> None:
        """Reset every open connection (a network blip); new ones still go through."""
        self._call(self._reset_links())

    # -- on the proxy's loop -----------------------------------------------------------------

    def _call(self, coro: Any) -> Any:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(30)

    async def _listen(self) -> None:
        if self._server is not None:
            return
        self._server = await self.loop.create_server(
            lambda: _ClientSide(self), "127.0.0.1", self.port, reuse_address=True
        )
        self.port = self._server.sockets[0].getsockname()[1]

    async def _close(self, reset: bool) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()
            self._server = None
        if reset:
            await self._reset_links()

    async def _reset_links(self) -> None:
        for link in list(self.links):
            link.abort()
        self.links.clear()

    async def _set_partitioned(self, partitioned: bool) -> None:
        self.partitioned = partitioned
        if partitioned:
            return
        for link in list(self.links):
            if link.upstream is None:
                self.loop.create_task(link.connect())
            else:
                link.flush()
