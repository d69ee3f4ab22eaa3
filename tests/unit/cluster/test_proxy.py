"""tests/cluster/proxy.py: a partition holds bytes as TCP would, delivers them when it heals,
and drops what a client sent before it reset its connection (the fencing of a leader's
writes in tests/faults relies on it)."""

from __future__ import annotations

import socket
import socketserver
import struct
import threading
import time
from collections.abc import Iterator

import pytest

from tests.cluster.proxy import TcpProxy


class _Recorder(socketserver.BaseRequestHandler):
    received: list[bytes]

    def handle(self) -> None:
        while data := self.request.recv(65536):
            self.server.received.append(data)  # type: ignore[attr-defined]
            self.request.sendall(b"ok:" + data)


@pytest.fixture
def server() -> Iterator[socketserver.ThreadingTCPServer]:
    srv = socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Recorder)
    srv.daemon_threads = True
    srv.received = []  # type: ignore[attr-defined]
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    yield srv
    srv.shutdown()
    srv.server_close()


@pytest.fixture
def proxy(server: socketserver.ThreadingTCPServer) -> Iterator[TcpProxy]:
    proxy = TcpProxy([("127.0.0.1", server.server_address[1])]).start()
    yield proxy
    proxy.stop()


def _connect(proxy: TcpProxy) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    return sock


def _received(server: socketserver.ThreadingTCPServer) -> bytes:
    return b"".join(server.received)  # type: ignore[attr-defined]


def _settle() -> None:
    time.sleep(0.3)


def test_forwards_both_ways(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"hello")
        assert sock.recv(100) == b"ok:hello"


def test_a_partition_holds_the_bytes_and_delivers_them_when_it_heals(
    proxy: TcpProxy, server: socketserver.ThreadingTCPServer
) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"a")
        assert sock.recv(100) == b"ok:a"
        proxy.partition()
        sock.sendall(b"b")
        _settle()
        assert _received(server) == b"a"
        proxy.heal()
        assert sock.recv(100) == b"ok:b"
    assert _received(server) == b"ab"


@pytest.mark.parametrize("reset", [False, True])
def test_what_a_client_sent_before_it_closed_arrives_unless_it_reset(
    reset: bool, proxy: TcpProxy, server: socketserver.ThreadingTCPServer
) -> None:
    """A graceful close (FIN): the kernel still delivers what it held once the partition
    heals. A reset (SO_LINGER 0): what it held is dropped."""
    sock = _connect(proxy)
    sock.sendall(b"a")
    assert sock.recv(100) == b"ok:a"
    proxy.partition()
    sock.sendall(b"late")
    _settle()
    if reset:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()
    _settle()
    proxy.heal()
    _settle()
    assert _received(server) == (b"a" if reset else b"alate")


def test_a_connection_made_during_a_partition_goes_through_when_it_heals(
    proxy: TcpProxy, server: socketserver.ThreadingTCPServer
) -> None:
    proxy.partition()
    with _connect(proxy) as sock:
        sock.sendall(b"x")
        _settle()
        assert _received(server) == b""
        proxy.heal()
        assert sock.recv(100) == b"ok:x"


def test_refused_then_accepted_again(proxy: TcpProxy) -> None:
    with _connect(proxy) as sock:
        sock.sendall(b"x")
        assert sock.recv(100) == b"ok:x"
        proxy.refuse()
        with pytest.raises(ConnectionResetError):
            sock.recv(100)
    with pytest.raises(OSError):
        _connect(proxy)
    proxy.accept()
    with _connect(proxy) as sock:
        sock.sendall(b"y")
        assert sock.recv(100) == b"ok:y"
