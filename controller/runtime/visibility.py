"""The visibility API server's life in `quotagate run` (every replica): its certificate, the
aggregator's credentials, the HTTPS server (controller/runtime/visibility_server.py) and,
for local runs (`visibility.manageAPIService`), the Service, EndpointSlice and APIService
that route `visibility.kueue.x-k8s.io/v1beta2` to this process.

The certificate is the webhook's: in a cluster the files of `webhook.certDir` (managed by
the controller, whose serving certificate then also names the visibility Service and whose
CA goes into the APIService's caBundle; or cert-manager's, or your Secret), reloaded when
they change; without a certificate directory, a self-signed one for the Service's names.
"""

from __future__ import annotations

import base64
import datetime
import logging
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller.config import ControllerConfig
from controller.core.state import ClusterState
from controller.kube.client import API_ERRORS, retrying
from controller.kube.fatal import FatalError
from controller.runtime.aggregation import Authorizer, load_front_proxy
from controller.runtime.certs import issue, service_dns_names, write_files
from controller.runtime.visibility_server import GROUP, VERSION, make_app
from controller.runtime.webhook_server import CertReloader, ServingCert

__all__ = ["API_SERVICE", "VisibilityServer", "api_service"]

log = logging.getLogger(__name__)

API_SERVICE = f"{VERSION}.{GROUP}"
SERVICE_PORT = 443


def api_service(service: str, namespace: str, ca_bundle: bytes | None) -> dict[str, Any]:
    """Kueue's APIService for the visibility API, with our CA instead of Kueue's
    `insecureSkipTLSVerify: true` when we have one."""
    spec: dict[str, Any] = {
        "group": GROUP,
        "version": VERSION,
        "groupPriorityMinimum": 100,
        "versionPriority": 100,
        "service": {"name": service, "namespace": namespace, "port": SERVICE_PORT},
    }
    if ca_bundle:
        spec["caBundle"] = base64.b64encode(ca_bundle).decode()
    else:
        spec["insecureSkipTLSVerify"] = True
    return {
        "apiVersion": "apiregistration.k8s.io/v1",
        "kind": "APIService",
        "metadata": {"name": API_SERVICE},
        "spec": spec,
    }


class VisibilityServer:
    """Serves the visibility API from `state()` until stopped."""

    def __init__(
        self, config: ControllerConfig, api_client: Any, state: Callable[[], ClusterState]
    ) -> None:
        self.config = config
        self.settings = config.visibility
        self.namespace = config.leader_election.lease_namespace
        self.api_client = api_client
        self.state = state
        self.runner: web.AppRunner | None = None
        self.reloader: CertReloader | None = None

    def _certificate(self) -> ServingCert:
        webhook = self.config.webhook
        if webhook.cert_dir:
            directory = Path(webhook.cert_dir)
            ca = directory / "ca.crt"
            return ServingCert(
                directory / "tls.crt",
                directory / "tls.key",
                ca.read_bytes() if ca.exists() else b"",
            )
        names = service_dns_names(self.settings.service_name, self.namespace)
        if self.settings.endpoint_address:
            names.append(self.settings.endpoint_address)
        directory = Path(tempfile.mkdtemp(prefix="quotagate-visibility-"))
        certs = issue(names, datetime.datetime.now(datetime.UTC), datetime.timedelta(days=365))
        write_files(directory, certs)
        return ServingCert(directory / "tls.crt", directory / "tls.key", certs.ca)

    async def start(self) -> None:
        settings = self.settings
        try:
            front_proxy = await retrying(lambda: load_front_proxy(self.api_client), attempts=8)
        except API_ERRORS as exc:
            raise FatalError(
                f"cannot read kube-system/extension-apiserver-authentication for the "
                f"visibility API: {exc} (the controller needs the "
                f"extension-apiserver-authentication-reader Role; visibility.enabled)"
            ) from None
        except ValueError as exc:
            raise FatalError(
                f"cannot serve the visibility API: {exc}; configure it, or turn the API off "
                "(visibility.enabled: false; the chart's visibility.enabled)"
            ) from None
        cert = self._certificate()
        try:
            self.reloader = CertReloader(cert, front_proxy.tls_context())
        except (OSError, ssl.SSLError) as exc:
            raise FatalError(
                f"cannot load the visibility API's certificate from {cert.cert.parent}: {exc}"
            ) from None
        app = make_app(self.state, front_proxy, Authorizer(self.api_client))
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        try:
            await web.TCPSite(
                runner, settings.address, settings.port, ssl_context=self.reloader.context
            ).start()
        except OSError as exc:
            await runner.cleanup()
            raise FatalError(
                f"cannot serve the visibility API on {settings.address}:{settings.port}: "
                f"{exc.strerror or exc} (visibility.address, visibility.port)"
            ) from None
        self.runner = runner
        log.info("visibility API serving on https://%s:%d", settings.address, settings.port)
        if settings.manage_api_service:
            await self._register(cert.ca_bundle)

    def background(self) -> list[tuple[str, Awaitable[None]]]:
        assert self.reloader is not None
        return [("the visibility certificate reloader", self.reloader.watch())]

    async def _register(self, ca_bundle: bytes) -> None:
        """The Service (without selector), its EndpointSlice to `endpointAddress` and the
        APIService, for a controller running outside the cluster."""
        settings, namespace = self.settings, self.namespace
        name = settings.service_name
        core = aio_client.CoreV1Api(self.api_client)
        discovery = aio_client.DiscoveryV1Api(self.api_client)
        registration = aio_client.ApiregistrationV1Api(self.api_client)
        port = {
            "name": "https",
            "port": SERVICE_PORT,
            "targetPort": settings.port,
            "protocol": "TCP",
        }
        await _apply(
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": name, "namespace": namespace},
                "spec": {"ports": [port]},
            },
            lambda n: core.read_namespaced_service(n, namespace),
            lambda n, b: core.replace_namespaced_service(n, namespace, b),
            lambda b: core.create_namespaced_service(namespace, b),
            keep=("spec", "clusterIP"),
        )
        await _apply(
            {
                "apiVersion": "discovery.k8s.io/v1",
                "kind": "EndpointSlice",
                "metadata": {
                    "name": name,
                    "namespace": namespace,
                    "labels": {"kubernetes.io/service-name": name},
                },
                "addressType": "IPv4",
                "endpoints": [
                    {"addresses": [settings.endpoint_address], "conditions": {"ready": True}}
                ],
                "ports": [{"name": "https", "port": settings.port, "protocol": "TCP"}],
            },
            lambda n: discovery.read_namespaced_endpoint_slice(n, namespace),
            lambda n, b: discovery.replace_namespaced_endpoint_slice(n, namespace, b),
            lambda b: discovery.create_namespaced_endpoint_slice(namespace, b),
        )
        await _apply(
            api_service(name, namespace, ca_bundle),
            registration.read_api_service,
            registration.replace_api_service,
            registration.create_api_service,
        )
        log.info("registered APIService %s → %s/%s", API_SERVICE, namespace, name)

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


async def _apply(
    body: dict[str, Any],
    read: Callable[[str], Awaitable[Any]],
    replace: Callable[[str, Any], Awaitable[Any]],
    create: Callable[[Any], Awaitable[Any]],
    keep: tuple[str, str] | None = None,
) -> None:
    """Replace the object at the version read (keeping `keep`, a field the server
    allocated), or create it."""
    name = body["metadata"]["name"]
    try:
        existing: Any = await read(name)
    except ApiException as exc:
        if exc.status != 404:
            raise
        await create(body)
        return
    body["metadata"]["resourceVersion"] = existing.metadata.resource_version
    if keep is not None:
        section, field = keep
        value = getattr(getattr(existing, section), _snake(field), None)
        if value is not None:
            body[section][field] = value
    await replace(name, body)


def _snake(name: str) -> str:
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name)
