"""`Api.request` against a real HTTP server (aiohttp's): on a `KubeApiClient`, writes go to
its lean connection pool (`controller.kube.http1`) with orjson-encoded bodies, reads through
the generated client's wrapper, and a refusal is an ApiException either way; a client
without the pool (a plain ApiClient, or one with retries or a TLS server name) sends
everything through the wrapper."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
from aiohttp import web
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller.kube.client import APPLY_PATCH, Api, KubeApiClient
from controller.kube.http1 import ConnectionPool

Seen = list[tuple[str, str, str, str, bytes]]


@asynccontextmanager
async def _server(seen: Seen, status: int = 200) -> AsyncIterator[str]:
    async def handle(request: web.Request) -> web.Response:
        seen.append(
            (
                request.method,
                request.path_qs,
                request.headers.get("Content-Type", ""),
                request.headers.get("Authorization", ""),
                await request.read(),
            )
        )
        return web.json_response(
            {"kind": "Status", "message": "said no"} if status >= 300 else {"echo": request.method},
            status=status,
        )

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handle)
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        await runner.cleanup()


def _with_api(
    host: str, body: Callable[[Api], Awaitable[Any]], plain: bool, **settings: Any
) -> Callable[[], Awaitable[Any]]:
    async def run() -> Any:
        configuration = aio_client.Configuration(host=host)
        configuration.api_key = {"BearerToken": "Bearer t0k"}
        for name, value in settings.items():
            setattr(configuration, name, value)
        api_client = (aio_client.ApiClient if plain else KubeApiClient)(configuration)
        try:
            return await body(Api(api_client))
        finally:
            await api_client.close()

    return run


def _run(
    body: Callable[[Api], Awaitable[Any]], status: int = 200, plain: bool = False, **settings: Any
) -> Seen:
    seen: Seen = []

    async def main() -> None:
        async with _server(seen, status) as host:
            await _with_api(host, body, plain, **settings)()

    asyncio.run(main())
    return seen


@pytest.mark.parametrize("plain", [False, True], ids=["lean-pool", "plain-client"])
def test_a_write_is_sent_with_the_same_request_on_either_path(plain: bool) -> None:
    answers: list[Any] = []

    async def calls(api: Api) -> None:
        answers.append(await api.request("GET", "/api/v1/namespaces"))
        assert isinstance(api._write_pool("POST"), ConnectionPool) is not plain
        assert api._write_pool("GET") is None
        answers.append(
            await api.request(
                "PATCH",
                "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w/status",
                {"status": {"message": "héllo"}},
                content_type=APPLY_PATCH,
                params={"fieldManager": "kueue-admission", "force": "true"},
            )
        )

    seen = _run(calls, plain=plain)
    assert answers == [{"echo": "GET"}, {"echo": "PATCH"}]
    method, path, content_type, auth, body = seen[1]
    assert method == "PATCH"
    assert path == (
        "/apis/kueue.x-k8s.io/v1beta2/namespaces/ns/workloads/w/status"
        "?fieldManager=kueue-admission&force=true"
    )
    assert content_type == APPLY_PATCH
    assert auth == "Bearer t0k"
    assert json.loads(body) == {"status": {"message": "héllo"}}


def test_a_refused_request_raises_the_status_and_body() -> None:
    errors: list[ApiException] = []

    async def calls(api: Api) -> None:
        with pytest.raises(ApiException) as refused_write:  # the lean pool
            await api.request("POST", "/api/v1/namespaces/ns/events", {"a": 1})
        with pytest.raises(ApiException) as refused_read:  # the wrapper
            await api.request("GET", "/api/v1/namespaces/ns/events")
        errors.extend((refused_write.value, refused_read.value))

    seen = _run(calls, status=409)
    assert [(e.status, e.reason) for e in errors] == [(409, "Conflict"), (409, "Conflict")]
    assert all("said no" in str(e.body) for e in errors)
    assert json.loads(seen[0][4]) == {"a": 1}


@pytest.mark.parametrize(
    "settings",
    [{"retries": 3}, {"tls_server_name": "api.example"}],
    ids=["retries", "tls-server-name"],
)
def test_a_write_goes_through_the_wrapper_where_it_adds_something(
    settings: dict[str, Any],
) -> None:
    async def calls(api: Api) -> None:
        await api.request("GET", "/api/v1/namespaces")
        assert api._write_pool("POST") is None
        assert await api.request("POST", "/api/v1/namespaces", {"b": 2}) == {"echo": "POST"}

    seen = _run(calls, **settings)
    assert json.loads(seen[1][4]) == {"b": 2}
