"""Reaching Kueue's visibility API through the real kube-apiserver's aggregation layer:
`quotagate run` with `visibility.manageAPIService` on this host's address, requests as the
admin or as another user (impersonated), and a wait for the APIService to be Available."""

from __future__ import annotations

import json
import ssl
import subprocess
import urllib.error
import urllib.request
from typing import Any

from kubernetes import client

from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import wait_for
from tests.integration.conftest import StartConfigured
from tests.integration.kueue import SYSTEM_NAMESPACE, ControllerProcess

API_SERVICE = "v1beta2.visibility.kueue.x-k8s.io"
PREFIX = "/apis/visibility.kueue.x-k8s.io/v1beta2"


def host_address() -> str:
    """An IPv4 address of this host outside the loopback range (an EndpointSlice may not
    hold a loopback address), where kube-apiserver reaches the controller."""
    out = subprocess.run(
        ["ip", "-4", "-o", "addr", "show", "scope", "global"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for line in out.splitlines():
        address = line.split()[3].split("/")[0]
        return address
    raise RuntimeError("no global IPv4 address on this host: the aggregator cannot reach us")


def start_with_visibility(
    start: StartConfigured, namespace: str, config: dict[str, Any] | None = None
) -> tuple[ControllerProcess, int, str]:
    """A controller serving the visibility API and its APIService; (process, port, address)."""
    port, address = free_port(), host_address()
    visibility = {
        "enabled": True,
        "port": port,
        "manageAPIService": True,
        "endpointAddress": address,
    }
    process = start({**(config or {}), "visibility": visibility}, namespace)
    return process, port, address


def remove_api_service(api_client: client.ApiClient) -> None:
    """Delete the APIService (and its Service, whose EndpointSlice goes with it): one left
    pointing at a stopped controller makes discovery fail for every later client, and the
    namespace controller cannot finish deleting namespaces."""
    for delete in (
        lambda: client.ApiregistrationV1Api(api_client).delete_api_service(API_SERVICE),
        lambda: client.CoreV1Api(api_client).delete_namespaced_service(
            "quotagate-visibility", SYSTEM_NAMESPACE
        ),
        lambda: client.DiscoveryV1Api(api_client).delete_namespaced_endpoint_slice(
            "quotagate-visibility", SYSTEM_NAMESPACE
        ),
    ):
        try:
            delete()
        except client.ApiException as exc:
            if exc.status != 404:
                raise


def wait_available(api_client: client.ApiClient, timeout: float = 60) -> None:
    registration = client.ApiregistrationV1Api(api_client)

    def available() -> bool:
        try:
            service = registration.read_api_service(API_SERVICE)
        except client.ApiException:
            return False
        conditions = (service.status and service.status.conditions) or []
        return any(c.type == "Available" and c.status == "True" for c in conditions)

    wait_for(available, timeout=timeout, what=f"APIService {API_SERVICE} Available")


def get(
    api_client: client.ApiClient, path: str, user: str | None = None
) -> tuple[int, dict[str, Any]]:
    """GET `path` from kube-apiserver as the admin, or as `user` (impersonated)."""
    configuration = api_client.configuration
    context = ssl.create_default_context(cafile=configuration.ssl_ca_cert)
    request = urllib.request.Request(configuration.host + path)
    token = configuration.get_api_key_with_prefix(
        "BearerToken"
    ) or configuration.get_api_key_with_prefix("authorization")
    request.add_header("Authorization", token)
    if user is not None:
        request.add_header("Impersonate-User", user)
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read() or b"{}")
