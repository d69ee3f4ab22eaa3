"""The connections to the API server: the asyncio client's (aiohttp), plus a lean pool for
writes (`controller.kube.http1`), both on abortive sockets, and the means to reset all of
them at once when a leader's term ends (`KubeApiClient.abandon_connections`)."""

from __future__ import annotations

import ssl

import aiohttp
from kubernetes.aio import client as aio_client
from kubernetes.aio.client import rest

from controller.kube.http1 import ConnectionPool, abortive_socket

__all__ = ["AbortiveConnector", "KubeApiClient"]


class AbortiveConnector(aiohttp.TCPConnector):
    """aiohttp's connector on abortive sockets (`http1.make_abortive`), that can reset every
    connection at once: `abort_all`, before any cancelled request could close its own
    gracefully (a TLS `close` first waits for the server's goodbye, the request still
    queued behind it)."""

    def __init__(self, limit: int, ssl_context: ssl.SSLContext) -> None:
        super().__init__(limit=limit, ssl=ssl_context, socket_factory=abortive_socket)

    def abort_all(self) -> None:
        """Reset every connection, idle or in use, now. Their transports are aborted, not
        their protocols: a response being read (a watch) then fails as on any broken
        connection (aiohttp's own `abort` would leave its reader waiting for ever), and
        the connector goes on with new connections."""
        protocols = [*self._acquired, *(p for held in self._conns.values() for p, _ in held)]
        for protocol in protocols:
            if protocol.transport is not None:
                protocol.transport.abort()


class _AbortiveRestClient(rest.RESTClientObject):
    """The generated client's transport on an `AbortiveConnector`."""

    def _create_connector(self) -> aiohttp.TCPConnector:
        return AbortiveConnector(self.maxsize, self.ssl_context)


class KubeApiClient(aio_client.ApiClient):
    """The asyncio client, plus a lean connection pool (`controller.kube.http1`) that
    `Api` sends its writes on: the same server, credentials and TLS context, at about half
    of aiohttp's CPU per request. The pool exists only where it has all the client would
    use: no proxy, no TLS server name override, no configured retries. Both close their
    connections abortively (`http1.make_abortive`)."""

    _write_pool: ConnectionPool | None = None
    _write_pool_checked = False

    def __init__(self, configuration: aio_client.Configuration) -> None:
        super().__init__(configuration)
        self.rest_client = _AbortiveRestClient(configuration)

    def write_pool(self) -> ConnectionPool | None:
        if not self._write_pool_checked:
            self._write_pool_checked = True
            configuration = self.configuration
            rest = self.rest_client
            if not (
                rest.proxy or configuration.tls_server_name or configuration.retries is not None
            ):
                self._write_pool = ConnectionPool(
                    configuration.host,
                    rest.ssl_context,
                    configuration.connection_pool_maxsize or _POOL_SIZE,
                )
        return self._write_pool

    def abandon_connections(self) -> None:
        """Reset every connection to the API server now, in use or idle: the requests in
        flight fail, and nothing they carried can reach the API server later (a leader
        whose term ended; `controller.kube.leader`). New requests open new connections."""
        if self._write_pool is not None:
            self._write_pool.abort_all()
        session = self.rest_client.pool_manager
        if session is not None and isinstance(session.connector, AbortiveConnector):
            session.connector.abort_all()

    async def close(self) -> None:
        if self._write_pool is not None:
            self._write_pool.close()
        await super().close()


_POOL_SIZE = 100  # aiohttp's default connection limit, when the configuration gives none
