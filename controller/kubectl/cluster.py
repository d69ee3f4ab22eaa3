"""The plugin's I/O edge: GET requests for the resources quotagate watches, returned as
plain dicts (as `kubectl get -o json` shows them), errors turned into `KubectlError`."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

import urllib3
from kubernetes.client.exceptions import ApiException

from controller.kube.client import NODES, PODS, SCHEDULED_PODS, WATCHED, Resource
from controller.kubectl.connection import Connection, KubectlError, server_error, transport_error

__all__ = ["Cluster", "resource_path"]

# A list the caller may do without: forbidden to this user, or the API is not served.
_TOLERATED = (403, 404)


def resource_path(resource: Resource, namespace: str | None = None, name: str | None = None) -> str:
    """The REST path of a resource collection (or one object), namespaced when asked."""
    root = f"/apis/{resource.group}/{resource.version}" if resource.group else "/api/v1"
    scope = f"/namespaces/{quote(namespace)}" if namespace and resource.namespaced else ""
    item = f"/{quote(name)}" if name is not None else ""
    return f"{root}{scope}/{resource.plural}{item}"


class Cluster:
    """Reads from the API server through one synchronous client."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.api = connection.api_client

    def get(self, resource: Resource, name: str, namespace: str | None = None) -> dict[str, Any]:
        obj = self._get_json(resource_path(resource, namespace, name))
        obj.setdefault("kind", resource.kind)
        obj.setdefault("apiVersion", resource.api_version)
        return obj

    def list_objects(
        self, resource: Resource, namespace: str | None = None, field_selector: str = ""
    ) -> list[dict[str, Any]]:
        """Every object of a resource (in one namespace, or all when `namespace` is None;
        only those `field_selector` selects, when given)."""
        path = resource_path(resource, namespace)
        if field_selector:
            path += f"?fieldSelector={quote(field_selector)}"
        body = self._get_json(path)
        items: list[dict[str, Any]] = list(body.get("items") or [])
        for item in items:  # list items of built-in kinds carry no kind/apiVersion
            item.setdefault("kind", resource.kind)
            item.setdefault("apiVersion", resource.api_version)
        return items

    def list_objects_tolerant(
        self, resource: Resource, namespace: str | None = None, field_selector: str = ""
    ) -> tuple[list[dict[str, Any]], str | None]:
        """Like `list_objects`, but a Forbidden or NotFound answer yields no items and a warning."""
        try:
            return self.list_objects(resource, namespace, field_selector), None
        except KubectlError as exc:
            if exc.status not in _TOLERATED:
                raise
            return [], exc.message

    def engine_inputs(self) -> tuple[list[dict[str, Any]], list[str]]:
        """Everything the controller watches, cluster-wide, definitions before Workloads;
        the warnings name what could not be read."""
        objects: list[dict[str, Any]] = []
        warnings: list[str] = []
        # The TAS view's inputs too: every Node, and the pods bound to one.
        for resource, selector in (
            *((r, "") for r in WATCHED),
            (NODES, ""),
            (PODS, SCHEDULED_PODS),
        ):
            items, problem = self.list_objects_tolerant(resource, field_selector=selector)
            objects.extend(items)
            if problem is not None:
                warnings.append(f"cannot list {resource.plural}: {problem}")
        return objects, warnings

    def _get_json(self, path: str) -> dict[str, Any]:
        request = self.api.param_serialize(
            "GET",
            path,
            header_params={"Accept": "application/json"},
            auth_settings=["BearerToken"],
        )
        try:
            response = self.api.call_api(*request, _request_timeout=self.connection.request_timeout)
            response.read()  # type: ignore[no-untyped-call]
            data = self.api.response_deserialize(response, {"200": "object"}).data
        except ApiException as exc:
            raise server_error(exc) from None
        except (urllib3.exceptions.HTTPError, OSError) as exc:
            raise transport_error(
                exc, self.connection.server, self.connection.request_timeout
            ) from None
        if not isinstance(data, dict):
            raise KubectlError(f"error: unexpected answer from the server for {path}")
        return data
