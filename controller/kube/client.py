"""The thin I/O edge: the resources quotagate watches and writes, and retried API calls.

Everything here talks to the API server through the asyncio client (`kubernetes.aio`),
so a write never blocks the event loop or needs a thread.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import random
from collections.abc import AsyncIterator, Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast
from urllib.parse import quote, urlencode

import aiohttp
import orjson
from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config
from kubernetes.aio.client.exceptions import ApiException

from api.constants import GROUP, VERSION
from api.workload_status import ADMISSION_FIELD_MANAGER
from controller.kube.connections import KubeApiClient
from controller.kube.fatal import FatalError
from controller.kube.http1 import ConnectionPool

log = logging.getLogger(__name__)

KUEUE_GROUP = GROUP
KUEUE_VERSION = VERSION
FIELD_MANAGER = "quotagate"
MERGE_PATCH = "application/merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"
JSON_PATCH = "application/json-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"

T = TypeVar("T")

_DEFAULT_TIMEOUT = 300.0  # seconds, as the generated client's default request timeout


@dataclass(frozen=True, slots=True)
class Resource:
    """One watched resource: where it lives in the API."""

    kind: str
    group: str
    version: str
    plural: str
    namespaced: bool

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


RESOURCE_FLAVORS = Resource("ResourceFlavor", KUEUE_GROUP, KUEUE_VERSION, "resourceflavors", False)
COHORTS = Resource("Cohort", KUEUE_GROUP, KUEUE_VERSION, "cohorts", False)
ADMISSION_CHECKS = Resource("AdmissionCheck", KUEUE_GROUP, KUEUE_VERSION, "admissionchecks", False)
CLUSTER_QUEUES = Resource("ClusterQueue", KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", False)
LOCAL_QUEUES = Resource("LocalQueue", KUEUE_GROUP, KUEUE_VERSION, "localqueues", True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    "WorkloadPriorityClass", KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", False
)
WORKLOADS = Resource("Workload", KUEUE_GROUP, KUEUE_VERSION, "workloads", True)
TOPOLOGIES = Resource("Topology", KUEUE_GROUP, KUEUE_VERSION, "topologies", False)
NODES = Resource("Node", "", "v1", "nodes", False)
SCHEDULED_PODS = "spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed"
"""The field selector of the pods bound to a node and not finished: what takes node
capacity in the topology-aware scheduling view."""
PRIORITY_CLASSES = Resource("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False)
NAMESPACES = Resource("Namespace", "", "v1", "namespaces", False)
EVENTS = Resource("Event", "", "v1", "events", True)  # written, never watched
# The objects the integrations manage (watched with a label selector, not in WATCHED).
JOBS = Resource("Job", "batch", "v1", "jobs", True)
PODS = Resource("Pod", "", "v1", "pods", True)

# Order matters for the initial load: definitions before the Workloads that use them.
WATCHED = (
    NAMESPACES,
    PRIORITY_CLASSES,
    WORKLOAD_PRIORITY_CLASSES,
    TOPOLOGIES,
    RESOURCE_FLAVORS,
    COHORTS,
    ADMISSION_CHECKS,
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    WORKLOADS,
)


async def make_api_client(
    kubeconfig: str | None = None, pool_size: int | None = None
) -> aio_client.ApiClient:
    """An asyncio API client from `kubeconfig` (or $KUBECONFIG / ~/.kube/config), or the
    in-cluster ServiceAccount when no kubeconfig is found; `pool_size` bounds its
    concurrent connections (the client's default otherwise)."""
    if kubeconfig and not os.path.isfile(kubeconfig):
        raise FatalError(f"the kubeconfig {kubeconfig} does not exist (--kubeconfig)")
    configuration = aio_client.Configuration()
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    try:
        await aio_config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    except (aio_config.ConfigException, OSError) as exc:
        if kubeconfig:
            raise FatalError(f"cannot load the kubeconfig {kubeconfig}: {exc}") from None
        try:
            aio_config.load_incluster_config(client_configuration=configuration)
        except aio_config.ConfigException:
            raise FatalError(
                "no credentials: no kubeconfig (--kubeconfig, $KUBECONFIG, ~/.kube/config) "
                "and no in-cluster service account"
            ) from None
    if not any(os.environ.get(v) for v in _PROXY_VARIABLES):
        # aiohttp re-reads the proxy variables and ~/.netrc on every request when told to
        # trust the environment (a measurable share of the controller's CPU); with no
        # proxy configured there is nothing to read.
        configuration.client_session_kwargs = {"trust_env": False}
    return KubeApiClient(configuration)


_PROXY_VARIABLES = (
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "ALL_PROXY",
    "http_proxy",
    "https_proxy",
    "all_proxy",
)


# What a broken or refused connection raises from the asyncio client (aiohttp's
# ServerDisconnectedError, for one, is neither an OSError nor an ApiException).
CONNECTION_ERRORS: tuple[type[BaseException], ...] = (OSError, TimeoutError, aiohttp.ClientError)
# What a failed API call raises: a refusal from the server or a broken connection.
API_ERRORS: tuple[type[BaseException], ...] = (ApiException, *CONNECTION_ERRORS)


def status_of(body: Any) -> dict[str, Any]:
    """The API `Status` object in an error response body ({} when it is not one)."""
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not isinstance(body, str):
        return {}
    try:
        parsed = json.loads(body)
    except ValueError:
        return {}
    return parsed if isinstance(parsed, dict) and parsed.get("kind") == "Status" else {}


def describe(exc: ApiException) -> str:
    """`403 Forbidden: pods "p" is forbidden: User ... cannot patch ...`: the status and the
    API server's own message, so a log line tells an RBAC refusal from a webhook's or a
    terminating namespace's."""
    message = status_of(exc.body).get("message")
    head = f"{exc.status} {exc.reason}"
    return f"{head}: {message}" if message else head


def is_retryable(exc: BaseException) -> bool:
    """Conflicts, throttling, server-side hiccups and dropped connections are worth another
    try; 4xx are not."""
    if isinstance(exc, ApiException):
        return exc.status in (409, 429, 500, 502, 503, 504) or exc.status == 0
    return isinstance(exc, CONNECTION_ERRORS)


class WriteInDoubt(ApiException):
    """A write refused (its last answer's status and reason) after an earlier attempt of it
    failed with its outcome unknown: that attempt may have been made, whatever the last
    answer says (a 409 may even be that attempt's own doing). `outcome_unknown` is True."""

    def __init__(self, refusal: ApiException) -> None:
        super().__init__(
            status=refusal.status,
            reason=f"{refusal.reason} (after an attempt whose outcome is unknown)",
            body=refusal.body,
        )


def outcome_unknown(exc: BaseException) -> bool:
    """Whether a write that failed with `exc` may still have been made: the connection
    broke or timed out after the request may have reached the server, or the server gave up
    waiting for its storage (500, 504: etcd may still commit it), or an earlier attempt did
    (`WriteInDoubt`). A refusal (4xx, 429, and 503, which the API server answers before it
    reaches its storage) was not made."""
    if isinstance(exc, WriteInDoubt):
        return True
    if isinstance(exc, ApiException):
        return exc.status in (0, 500, 504)
    return isinstance(exc, CONNECTION_ERRORS)


def retry_wait(attempt: int) -> float:
    """The pause after failed attempt number `attempt` (1, 2, …): exponential from 0.05 s,
    at most 2 s, plus up to 0.1 s of jitter."""
    return min(0.05 * 2.0 ** min(attempt - 1, 10), 2.0) + random.uniform(0, 0.1)


async def retrying(
    call: Callable[[], Awaitable[T]],
    attempts: int | None = 6,
    on_retry: Callable[[BaseException], Awaitable[None]] | None = None,
) -> T:
    """Run `call` with jittered exponential backoff on retryable errors, at most `attempts`
    times (None: until it succeeds or fails for good; the caller's cancellation ends it):
    after a failure, wait `retry_wait`, then `on_retry(the error)`, then call again. A plain
    loop: the first attempt, which nearly every write succeeds on, costs one `await`."""
    attempt = 1
    while True:
        try:
            return await call()
        except Exception as exc:
            if (attempts is not None and attempt >= attempts) or not is_retryable(exc):
                raise
            await asyncio.sleep(retry_wait(attempt))
            attempt += 1
            if on_retry is not None:
                await on_retry(exc)


class Api:
    """The few calls quotagate makes, on one shared asyncio client."""

    def __init__(self, api_client: aio_client.ApiClient) -> None:
        self.api_client = api_client
        self.custom = aio_client.CustomObjectsApi(api_client)
        self.core = aio_client.CoreV1Api(api_client)
        self.scheduling = aio_client.SchedulingV1Api(api_client)

    async def list(self, resource: Resource) -> list[dict[str, Any]]:
        """All objects of a resource, as plain dicts with kind/apiVersion filled in."""
        body: Any
        if resource is NAMESPACES:
            body = self.api_client.sanitize_for_serialization(await self.core.list_namespace())
        elif resource is PRIORITY_CLASSES:
            body = self.api_client.sanitize_for_serialization(
                await self.scheduling.list_priority_class()
            )
        else:
            body = await self.custom.list_cluster_custom_object(
                resource.group, resource.version, resource.plural
            )
        items: list[dict[str, Any]] = body.get("items") or []
        for item in items:
            item.setdefault("kind", resource.kind)
            item.setdefault("apiVersion", resource.api_version)
        return items

    async def request(
        self,
        method: str,
        path: str,
        body: Any = None,
        *,
        content_type: str = "application/json",
        params: dict[str, str] | None = None,
    ) -> Any:
        """One API call, JSON in and JSON out, on the client's connection pool and
        credentials but without the generated methods' argument validation and model
        (de)serialization, which cost more CPU than the request on the hot write paths.
        A non-2xx answer raises ApiException, as the generated methods do."""
        pool = self._write_pool(method)
        if pool is None:
            response = await self._send(method, path, body, content_type, params, None)
            data = await response.read()
        else:
            target = f"{path}?{urlencode(params)}" if params else path
            encoded = None if body is None else orjson.dumps(body)
            headers = await self._headers(content_type)
            reply = await pool.request(method, target, headers, encoded, _DEFAULT_TIMEOUT)
            if not 200 <= reply.status < 300:
                raise ApiException(
                    status=reply.status,
                    reason=reply.reason,
                    body=reply.body.decode("utf-8", "replace"),
                )
            data = reply.body
        return orjson.loads(data) if data else None

    async def watch(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        resource_version: str | None = None,
        label_selector: str | None = None,
        timeout_seconds: int = 300,
        field_selector: str | None = None,
    ) -> AsyncIterator[tuple[str, dict[str, Any]]]:
        """Watch events as (type, object), each line decoded once (the generated client's
        watch decodes, re-encodes and decodes every event again). Ends when the server
        closes the watch; an ERROR event (410 Gone, say) is raised as ApiException."""
        params = {
            "watch": "true",
            "allowWatchBookmarks": "true",
            "timeoutSeconds": str(timeout_seconds),
        }
        if resource_version:
            params["resourceVersion"] = resource_version
        if label_selector:
            params["labelSelector"] = label_selector
        if field_selector:
            params["fieldSelector"] = field_selector
        collection = self.path(resource, None, namespace)
        response = await self._send(
            "GET", collection, None, "application/json", params, timeout_seconds + 30
        )
        stream = response.response
        try:
            while line := await stream.content.readline():
                event = orjson.loads(line)
                kind, body = str(event.get("type") or ""), event.get("object") or {}
                if kind == "ERROR":
                    code = int(body.get("code") or 0)
                    raise ApiException(status=code, reason=str(body.get("message") or ""))
                yield kind, body
        finally:
            stream.release()

    async def _send(
        self,
        method: str,
        path: str,
        body: Any,
        content_type: str,
        params: dict[str, str] | None,
        timeout: float | None,
    ) -> Any:
        """The request (`timeout` None: the client's default); a non-2xx answer is read and
        raised as ApiException."""
        url = self.api_client.configuration.host + path
        if params:
            url += "?" + urlencode(params)
        response = await self.api_client.rest_client.request(
            method,
            url,
            headers=await self._headers(content_type),
            body=body,
            _request_timeout=timeout,
        )
        if not 200 <= response.status < 300:
            data = await response.read()
            raise ApiException(
                status=response.status,
                reason=response.reason,
                body=data.decode("utf-8", "replace"),
            )
        return response

    async def _headers(self, content_type: str) -> dict[str, str]:
        """The client's default headers and credentials (asked for on every request: an
        exec plugin's token may have been renewed), with the body's content type."""
        headers = {
            **self.api_client.default_headers,
            "Content-Type": content_type,
            "Accept": "application/json",
        }
        for auth in (await self.api_client.configuration.auth_settings()).values():
            if auth.get("in") == "header" and auth.get("value"):
                headers[auth["key"]] = auth["value"]
        return headers

    def _write_pool(self, method: str) -> ConnectionPool | None:
        """The lean pool to send a write on (`KubeApiClient.write_pool`). None for reads
        and watches, which stay with the generated client's wrapper (it retries reads on
        Retry-After and streams watches), and for a client that has no pool."""
        if method in ("GET", "HEAD") or not isinstance(self.api_client, KubeApiClient):
            return None
        return self.api_client.write_pool()

    @staticmethod
    def path(resource: Resource, name: str | None, namespace: str | None = None) -> str:
        """The URL path of an object (`name`), or of its collection (`name` None)."""
        base = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
        scope = f"/namespaces/{quote(namespace, safe='')}" if namespace else ""
        tail = f"/{quote(name, safe='')}" if name is not None else ""
        return f"{base}{scope}/{resource.plural}{tail}"

    async def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        result = await self.request("GET", self.path(WORKLOADS, name, namespace))
        return cast(dict[str, Any], result)

    async def patch_workload_status(
        self,
        namespace: str,
        name: str,
        status: dict[str, Any],
        resource_version: str | None,
        field_manager: str = FIELD_MANAGER,
    ) -> dict[str, Any]:
        """Merge-patch `status`; with `resource_version` the server refuses (409) a patch
        computed from a stale read, so status never goes backwards."""
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        result = await self._patch_status(WORKLOADS, name, namespace, body, field_manager)
        return cast(dict[str, Any], result)

    async def deactivate_workload(
        self, namespace: str, name: str, uid: str | None = None
    ) -> dict[str, Any]:
        """Merge-patch `spec.active: false` (Kueue's workload controller deactivating a
        Workload whose DeactivationTarget is set); with `uid`, a recreated Workload of the
        same name is refused (409)."""
        body: dict[str, Any] = {"spec": {"active": False}}
        if uid:
            body["metadata"] = {"uid": uid}
        result = await self.request(
            "PATCH",
            self.path(WORKLOADS, name, namespace),
            body,
            content_type=MERGE_PATCH,
            params={"fieldManager": FIELD_MANAGER},
        )
        return cast(dict[str, Any], result)

    async def apply_workload_status(
        self, body: dict[str, Any], field_manager: str = ADMISSION_FIELD_MANAGER
    ) -> dict[str, Any]:
        """Server-side apply of a Workload's status (`api.workload_status.apply_body`) with
        force, as Kueue's writers do; a resourceVersion in the body makes a stale
        computation fail with 409."""
        meta = body["metadata"]
        result = await self.request(
            "PATCH",
            self.path(WORKLOADS, meta["name"], meta["namespace"]) + "/status",
            body,
            content_type=APPLY_PATCH,
            params={"fieldManager": field_manager, "force": "true"},
        )
        return cast(dict[str, Any], result)

    async def patch_cluster_status(
        self, resource: Resource, name: str, status: dict[str, Any]
    ) -> None:
        await self._patch_status(resource, name, None, {"status": status})

    async def patch_namespaced_status(
        self, resource: Resource, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await self._patch_status(resource, name, namespace, {"status": status})

    async def _patch_status(
        self,
        resource: Resource,
        name: str,
        namespace: str | None,
        body: dict[str, Any],
        field_manager: str = FIELD_MANAGER,
    ) -> Any:
        return await self.request(
            "PATCH",
            self.path(resource, name, namespace) + "/status",
            body,
            content_type=MERGE_PATCH,
            params={"fieldManager": field_manager},
        )

    async def create_event(self, namespace: str, body: dict[str, Any]) -> None:
        await self.request("POST", self.path(EVENTS, None, namespace), body)

    async def patch_event(self, namespace: str, name: str, patch: dict[str, Any]) -> None:
        await self.request(
            "PATCH", self.path(EVENTS, name, namespace), patch, content_type=MERGE_PATCH
        )
