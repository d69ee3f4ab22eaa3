"""The thin I/O edge: the resources quotagate watches and writes, and retried API calls.

Everything here talks to the API server through the asyncio client (`kubernetes.aio`),
so a write never blocks the event loop or needs a thread.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import aiohttp
from kubernetes.aio import client as aio_client
from kubernetes.aio import config as aio_config
from kubernetes.aio.client.exceptions import ApiException
from tenacity import (
    AsyncRetrying,
    retry_if_exception,
    stop_after_attempt,
    wait_exponential,
    wait_random,
)

log = logging.getLogger(__name__)

KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
FIELD_MANAGER = "quotagate"
MERGE_PATCH = "application/merge-patch+json"
JSON_PATCH = "application/json-patch+json"

T = TypeVar("T")


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
CLUSTER_QUEUES = Resource("ClusterQueue", KUEUE_GROUP, KUEUE_VERSION, "clusterqueues", False)
LOCAL_QUEUES = Resource("LocalQueue", KUEUE_GROUP, KUEUE_VERSION, "localqueues", True)
WORKLOAD_PRIORITY_CLASSES = Resource(
    "WorkloadPriorityClass", KUEUE_GROUP, KUEUE_VERSION, "workloadpriorityclasses", False
)
WORKLOADS = Resource("Workload", KUEUE_GROUP, KUEUE_VERSION, "workloads", True)
PRIORITY_CLASSES = Resource("PriorityClass", "scheduling.k8s.io", "v1", "priorityclasses", False)
NAMESPACES = Resource("Namespace", "", "v1", "namespaces", False)

# Order matters for the initial load: definitions before the Workloads that use them.
WATCHED = (
    NAMESPACES,
    PRIORITY_CLASSES,
    WORKLOAD_PRIORITY_CLASSES,
    RESOURCE_FLAVORS,
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
    configuration = aio_client.Configuration()
    if pool_size is not None:
        configuration.connection_pool_maxsize = pool_size
    try:
        await aio_config.load_kube_config(
            config_file=kubeconfig, client_configuration=configuration
        )
    except aio_config.ConfigException:
        if kubeconfig:
            raise
        aio_config.load_incluster_config(client_configuration=configuration)
    if not any(os.environ.get(v) for v in _PROXY_VARIABLES):
        # aiohttp re-reads the proxy variables and ~/.netrc on every request when told to
        # trust the environment (a measurable share of the controller's CPU); with no
        # proxy configured there is nothing to read.
        configuration.client_session_kwargs = {"trust_env": False}
    return aio_client.ApiClient(configuration)


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


def is_retryable(exc: BaseException) -> bool:
    """Conflicts, throttling, server-side hiccups and dropped connections are worth another
    try; 4xx are not."""
    if isinstance(exc, ApiException):
        return exc.status in (409, 429, 500, 502, 503, 504) or exc.status == 0
    return isinstance(exc, CONNECTION_ERRORS)


async def retrying(
    call: Callable[[], Awaitable[T]],
    attempts: int = 6,
    on_retry: Callable[[BaseException], Awaitable[None]] | None = None,
) -> T:
    """Run `call` with jittered exponential backoff on retryable errors (bounded)."""
    async for attempt in AsyncRetrying(
        retry=retry_if_exception(is_retryable),
        wait=wait_exponential(multiplier=0.05, max=2.0) + wait_random(0, 0.1),
        stop=stop_after_attempt(attempts),
        reraise=True,
    ):
        with attempt:
            if attempt.retry_state.attempt_number > 1 and on_retry is not None:
                outcome = attempt.retry_state.outcome
                if outcome is not None and outcome.exception() is not None:
                    await on_retry(outcome.exception())  # type: ignore[arg-type]
            return await call()
    raise AssertionError("unreachable")  # pragma: no cover


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

    async def get_workload(self, namespace: str, name: str) -> dict[str, Any]:
        result = await self.custom.get_namespaced_custom_object(
            KUEUE_GROUP, KUEUE_VERSION, namespace, WORKLOADS.plural, name
        )
        return cast(dict[str, Any], result)

    async def patch_workload_status(
        self, namespace: str, name: str, status: dict[str, Any], resource_version: str | None
    ) -> dict[str, Any]:
        """Merge-patch `status`; with `resource_version` the server refuses (409) a patch
        computed from a stale read, so status never goes backwards."""
        body: dict[str, Any] = {"status": status}
        if resource_version:
            body["metadata"] = {"resourceVersion": resource_version}
        result = await self.custom.patch_namespaced_custom_object_status(
            KUEUE_GROUP,
            KUEUE_VERSION,
            namespace,
            WORKLOADS.plural,
            name,
            body,
            field_manager=FIELD_MANAGER,
            _content_type=MERGE_PATCH,
        )
        return cast(dict[str, Any], result)

    async def patch_cluster_status(
        self, resource: Resource, name: str, status: dict[str, Any]
    ) -> None:
        await self.custom.patch_cluster_custom_object_status(
            resource.group,
            resource.version,
            resource.plural,
            name,
            {"status": status},
            field_manager=FIELD_MANAGER,
            _content_type=MERGE_PATCH,
        )

    async def patch_namespaced_status(
        self, resource: Resource, namespace: str, name: str, status: dict[str, Any]
    ) -> None:
        await self.custom.patch_namespaced_custom_object_status(
            resource.group,
            resource.version,
            namespace,
            resource.plural,
            name,
            {"status": status},
            field_manager=FIELD_MANAGER,
            _content_type=MERGE_PATCH,
        )
