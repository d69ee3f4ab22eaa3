"""CPU per API write: aiohttp's session (quotagate's write path until stop 37) against the
lean pool (`controller.kube.http1`), alternating on one API server.

    .venv/bin/python -m tests.bench.bench_http_client [--requests 3000] [--rounds 6]

Starts a local control plane (etcd + kube-apiserver, tests/cluster), creates `--requests`
ConfigMaps, then merge-patches each of them once per round, 16 at a time, through each path
in turn (the order alternates between rounds). Both paths send the same request with the
same orjson-encoded body and decode the answer with orjson. Prints, per round and path, the
wall time, this process's CPU per request and kube-apiserver's; then the mean of each.
Figures, not assertions; the pytest function runs both paths against a local aiohttp
server and checks only that they return the same answers.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp
import orjson
import uvloop
from aiohttp import web

from controller.kube.client import Api, KubeApiClient, make_api_client
from controller.kube.http1 import ConnectionPool

CONCURRENCY = 16
Send = Callable[[str, bytes], Awaitable[Any]]


def _process_cpu(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as stat:
        fields = stat.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _senders(
    host: str, headers: dict[str, str], session: aiohttp.ClientSession, pool: ConnectionPool
) -> dict[str, Send]:
    patch_headers = {**headers, "Content-Type": "application/merge-patch+json"}

    async def via_aiohttp(path: str, body: bytes) -> Any:
        async with session.request("PATCH", host + path, headers=patch_headers, data=body) as r:
            data = await r.read()
            assert r.status == 200, (r.status, data[:200])
            return orjson.loads(data)

    async def via_pool(path: str, body: bytes) -> Any:
        reply = await pool.request("PATCH", path, patch_headers, body, 60)
        assert reply.status == 200, (reply.status, reply.body[:200])
        return orjson.loads(reply.body)

    return {"aiohttp": via_aiohttp, "lean pool": via_pool}


async def _each(paths: list[str], call: Callable[[str], Awaitable[Any]]) -> list[Any]:
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(path: str) -> Any:
        async with slots:
            return await call(path)

    return await asyncio.gather(*(one(path) for path in paths))


async def measure(kubeconfig: str, apiserver_pid: int, requests: int, rounds: int) -> None:
    client = await make_api_client(kubeconfig, pool_size=CONCURRENCY * 2)
    assert isinstance(client, KubeApiClient)
    pool = client.write_pool()
    assert pool is not None, "the kubeconfig's client has no lean pool (a proxy?)"
    api = Api(client)  # its writes go on the pool; its headers are the client's credentials
    host = client.configuration.host
    headers = await api._headers("application/json")
    connector = aiohttp.TCPConnector(ssl=client.rest_client.ssl_context, limit=CONCURRENCY * 2)
    session = aiohttp.ClientSession(connector=connector, trust_env=False)
    senders = _senders(host, headers, session, pool)
    namespace = f"http-bench-{os.getpid()}"
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}}
    await api.request("POST", "/api/v1/namespaces", body)
    names = [f"cm-{i}" for i in range(requests)]

    async def create_map(name: str) -> None:
        config_map = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}}
        await api.request("POST", f"/api/v1/namespaces/{namespace}/configmaps", config_map)

    await _each(names, create_map)
    print(f"{requests} ConfigMaps created; {rounds} rounds of one merge patch each", flush=True)
    figures: dict[str, list[tuple[float, float]]] = {name: [] for name in senders}
    try:
        for round_ in range(rounds):
            order = list(senders) if round_ % 2 == 0 else list(reversed(senders))
            for name in order:
                send = senders[name]
                patch = orjson.dumps({"data": {"round": f"{name} {round_}"}})
                cpu, apiserver = time.process_time(), _process_cpu(apiserver_pid)
                started = time.monotonic()
                await _each(
                    [f"/api/v1/namespaces/{namespace}/configmaps/{n}" for n in names],
                    lambda path, send=send, patch=patch: send(path, patch),  # type: ignore[misc]
                )
                wall = time.monotonic() - started
                cpu = (time.process_time() - cpu) * 1000 / requests
                apiserver = (_process_cpu(apiserver_pid) - apiserver) * 1000 / requests
                figures[name].append((cpu, apiserver))
                print(
                    f"round {round_ + 1}  {name:9s}  wall {wall:5.2f} s  "
                    f"client {cpu:5.3f} ms/request  kube-apiserver {apiserver:5.2f} ms/request",
                    flush=True,
                )
    finally:
        await session.close()
        await client.close()
    for name, values in figures.items():
        print(
            f"mean  {name:9s}  client {statistics.fmean(c for c, _ in values):5.3f} ms/request  "
            f"kube-apiserver {statistics.fmean(a for _, a in values):5.2f} ms/request"
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=6)
    args = parser.parse_args(argv)
    from tests.cluster.controlplane import ControlPlane

    plane = ControlPlane().start()
    try:
        pid = plane.components["kube-apiserver"].process.pid
        uvloop.run(measure(str(plane.kubeconfig), pid, args.requests, args.rounds))
    finally:
        plane.stop()
    return 0


def test_both_paths_return_the_same_answers() -> None:
    async def run() -> list[Any]:
        async def echo(request: web.Request) -> web.Response:
            return web.json_response({"path": request.path, "body": await request.json()})

        app = web.Application()
        app.router.add_route("PATCH", "/{tail:.*}", echo)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        host = f"http://127.0.0.1:{port}"
        session = aiohttp.ClientSession(trust_env=False)
        pool = ConnectionPool(host, None, 4)
        try:
            senders = _senders(host, {}, session, pool)
            paths = [f"/x/{i}" for i in range(20)]
            return [
                await _each(paths, lambda p, s=send: s(p, b'{"a": 1}'))  # type: ignore[misc]
                for send in senders.values()
            ]
        finally:
            pool.close()
            await session.close()
            await runner.cleanup()

    via_aiohttp, via_pool = asyncio.run(run())
    assert via_aiohttp == via_pool
    assert via_pool[3] == {"path": "/x/3", "body": {"a": 1}}


if __name__ == "__main__":
    sys.exit(main())
