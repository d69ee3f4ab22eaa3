"""Kueue's visibility API, `visibility.kueue.x-k8s.io/v1beta2`, served as Kueue serves it:
an aggregated API behind the APIService `v1beta2.visibility.kueue.x-k8s.io`, so
`kubectl get --raw /apis/visibility.kueue.x-k8s.io/v1beta2/clusterqueues/CQ/pendingworkloads`,
`kueuectl list workload` and Kueue's client-go work against quotagate unchanged.

Served on every replica (`visibility.port`, Kueue's 8082), each from its own engine state,
which the watches keep current (the leader's also carries its own decisions a moment
before their watch events): a standby answers from its view rather than forwarding to the
leader. The answer is computed when asked (controller/core/queue/visibility.py) on the event loop
the admission cycle runs on, between cycles: no cycle waits on the network for it. Each
ClusterQueue's sorted order is kept between requests (`visibility.PendingOrder`) until its
pending Workloads change, so a request costs the loop a page of it, or one sort after a
change (tests/bench/bench_visibility.py prints the figures).

Routes: discovery (`/apis`, `/apis/visibility.kueue.x-k8s.io`, `…/v1beta2`), then
`…/v1beta2/clusterqueues/{name}/pendingworkloads` and
`…/v1beta2/namespaces/{namespace}/localqueues/{name}/pendingworkloads`, with `limit`
(default 1,000, at most 100,000) and `offset`. Who may ask: controller/runtime/aggregation.py.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from aiohttp import web

from api.workload_status import rfc3339
from controller.core.queue import visibility
from controller.core.state import ClusterState
from controller.kube.client import API_ERRORS
from controller.runtime.aggregation import Authorizer, FrontProxy

__all__ = ["GROUP", "VERSION", "make_app", "pending_workloads_summary"]

log = logging.getLogger(__name__)

GROUP = "visibility.kueue.x-k8s.io"
VERSION = "v1beta2"
GROUP_VERSION = f"{GROUP}/{VERSION}"
_PREFIX = f"/apis/{GROUP}/{VERSION}"
_SUMMARY = "PendingWorkloadsSummary"


def _resources() -> list[dict[str, Any]]:
    """The APIResourceList Kueue's server publishes: the queues (no verbs of their own)
    and their `pendingworkloads` subresources."""
    out = []
    for plural, kind, namespaced in (
        ("clusterqueues", "ClusterQueue", False),
        ("localqueues", "LocalQueue", True),
    ):
        singular = kind.lower()
        out.append(
            {
                "name": plural,
                "singularName": singular,
                "namespaced": namespaced,
                "kind": kind,
                "verbs": [],
            }
        )
        out.append(
            {
                "name": f"{plural}/pendingworkloads",
                "singularName": "",
                "namespaced": namespaced,
                "kind": _SUMMARY,
                "verbs": ["get"],
            }
        )
    return out


def pending_workloads_summary(items: list[visibility.PendingWorkload]) -> dict[str, Any]:
    """A `PendingWorkloadsSummary` as Kueue's server encodes it."""
    return {
        "kind": _SUMMARY,
        "apiVersion": GROUP_VERSION,
        "metadata": {"creationTimestamp": None},
        "items": [_pending_workload(item) for item in items],
    }


def _pending_workload(item: visibility.PendingWorkload) -> dict[str, Any]:
    metadata: dict[str, Any] = {
        "name": item.name,
        "namespace": item.namespace,
        "creationTimestamp": rfc3339(item.creation_timestamp) if item.creation_timestamp else None,
    }
    if item.owner_references:
        metadata["ownerReferences"] = [
            {"apiVersion": o.api_version, "kind": o.kind, "name": o.name, "uid": o.uid}
            for o in item.owner_references
        ]
    return {
        "metadata": metadata,
        "priority": item.priority,
        "localQueueName": item.local_queue,
        "positionInClusterQueue": item.position_in_cluster_queue,
        "positionInLocalQueue": item.position_in_local_queue,
    }


def _status(
    code: int, reason: str, message: str, details: Mapping[str, Any] | None = None
) -> web.Response:
    body: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if details:
        body["details"] = dict(details)
    return web.json_response(body, status=code)


def _not_found(kind: str, name: str) -> web.Response:
    return _status(
        404,
        "NotFound",
        f'{kind}.{GROUP} "{name}" not found',
        {"name": name, "group": GROUP, "kind": kind},
    )


def _options(query: Mapping[str, str]) -> tuple[int, int]:
    """`limit` and `offset` as Kueue's PendingWorkloadOptions decode them: integers, limit 0
    or missing = 1,000 (its defaulting), then bounded (controller/core/queue/visibility.py)."""
    values = {}
    for name in ("limit", "offset"):
        text = query.get(name, "")
        try:
            values[name] = int(text) if text else 0
        except ValueError:
            raise ValueError(f"{name}: invalid value {text!r}: must be an integer") from None
    return values["limit"] or visibility.DEFAULT_LIMIT, values["offset"]


Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def make_app(
    state: Callable[[], ClusterState],
    front_proxy: FrontProxy | None,
    authorizer: Authorizer | None,
) -> web.Application:
    """The visibility API over `state()`. Without `front_proxy` every request is anonymous
    and allowed: for tests of the answers only, never served so."""
    orders = visibility.PendingOrder()

    @web.middleware
    async def authenticate(request: web.Request, handler: Handler) -> web.StreamResponse:
        if front_proxy is None:
            return await handler(request)
        peer = request.transport.get_extra_info("peercert") if request.transport else None
        try:
            request["caller"] = front_proxy.caller(peer, request.headers)
        except ValueError as exc:
            return _status(401, "Unauthorized", f"Unauthorized: {exc}")
        return await handler(request)

    async def authorize(request: web.Request, attributes: dict[str, str]) -> web.Response | None:
        if authorizer is None or "caller" not in request:
            return None
        caller = request["caller"]
        try:
            allowed, reason = await authorizer.allowed(caller, attributes)
        except API_ERRORS as exc:
            log.warning("SubjectAccessReview failed: %s", exc)
            return _status(500, "InternalError", f"authorization failed: {exc}")
        if allowed:
            return None
        where = (
            f' in the namespace "{attributes["namespace"]}"' if "namespace" in attributes else ""
        )
        return _status(
            403,
            "Forbidden",
            f'{attributes["resource"]}.{GROUP} "{attributes["name"]}" is forbidden: User '
            f'"{caller.user}" cannot get resource "{attributes["resource"]}/pendingworkloads" '
            f'in API group "{GROUP}"{where}' + (f": {reason}" if reason else ""),
        )

    async def group_list(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroupList", "apiVersion": "v1", "groups": [_group()]})

    async def group(_: web.Request) -> web.Response:
        return web.json_response({"kind": "APIGroup", "apiVersion": "v1", **_group()})

    async def resource_list(_: web.Request) -> web.Response:
        return web.json_response(
            {
                "kind": "APIResourceList",
                "apiVersion": "v1",
                "groupVersion": GROUP_VERSION,
                "resources": _resources(),
            }
        )

    async def pending(
        request: web.Request,
        kind: str,
        namespace: str | None,
        answer: Callable[[int, int], list[visibility.PendingWorkload] | None],
    ) -> web.Response:
        """Authorize, read the options, answer: one queue's `pendingworkloads`."""
        name = request.match_info["name"]
        attributes = {
            "group": GROUP,
            "version": VERSION,
            "resource": f"{kind}s",
            "subresource": "pendingworkloads",
            "name": name,
            "verb": "get",
        }
        if namespace is not None:
            attributes["namespace"] = namespace
        refused = await authorize(request, attributes)
        if refused is not None:
            return refused
        try:
            limit, offset = _options(request.query)
        except ValueError as exc:
            return _status(400, "BadRequest", str(exc))
        items = answer(limit, offset)
        if items is None:
            return _not_found(kind, name)
        return web.json_response(pending_workloads_summary(items))

    async def in_cluster_queue(request: web.Request) -> web.Response:
        name = request.match_info["name"]
        return await pending(
            request,
            "clusterqueue",
            None,
            lambda limit, offset: visibility.pending_in_cluster_queue(
                state(), name, limit, offset, orders
            ),
        )

    async def in_local_queue(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        return await pending(
            request,
            "localqueue",
            namespace,
            lambda limit, offset: visibility.pending_in_local_queue(
                state(), namespace, name, limit, offset, orders
            ),
        )

    app = web.Application(middlewares=[authenticate])
    app.router.add_get("/apis", group_list)
    app.router.add_get(f"/apis/{GROUP}", group)
    app.router.add_get(_PREFIX, resource_list)
    app.router.add_get(f"{_PREFIX}/clusterqueues/{{name}}/pendingworkloads", in_cluster_queue)
    app.router.add_get(
        f"{_PREFIX}/namespaces/{{namespace}}/localqueues/{{name}}/pendingworkloads",
        in_local_queue,
    )
    return app


def _group() -> dict[str, Any]:
    version = {"groupVersion": GROUP_VERSION, "version": VERSION}
    return {"name": GROUP, "versions": [version], "preferredVersion": version}
