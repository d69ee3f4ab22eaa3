"""The webhook's TLS server inside the controller process (every replica serves it): its
certificate — self-signed for local runs, mounted from a Secret, or managed by the
controller (controller/runtime/certs.py) — reloaded whenever it changes, and, for local
runs, our own Mutating- and ValidatingWebhookConfiguration with a `url:` clientConfig.
What the mutating webhook answers is the integrations' (controller/integrations/webhook.py),
what the validating one answers is Kueue's rules (controller/runtime/validating_webhook.py)."""

from __future__ import annotations

import asyncio
import datetime
import logging
import ssl
import tempfile
from collections.abc import Awaitable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from aiohttp import web
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from controller.config import ControllerConfig
from controller.config_report import job_management
from controller.integrations import webhook as webhooks
from controller.integrations.framework.registry import by_kind, enabled_with_implied
from controller.integrations.job_management import JobManagement
from controller.kube.client import API_ERRORS
from controller.kube.fatal import FatalError
from controller.kube.health import Readiness
from controller.kube.retries import retried
from controller.runtime import validating_webhook
from controller.runtime.certs import (
    WebhookCertificates,
    issue,
    service_dns_names,
    write_files,
)

VISIBILITY_API_SERVICE = "v1beta2.visibility.kueue.x-k8s.io"

__all__ = ["CertReloader", "ServingCert", "WebhookServer", "self_signed", "serve"]

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServingCert:
    cert: Path
    key: Path
    ca_bundle: bytes  # PEM of the CA the API server must trust


def self_signed(directory: Path, host: str) -> ServingCert:
    """A CA and a serving certificate for `host` (an IP or DNS name), for local runs."""
    certs = issue([host], datetime.datetime.now(datetime.UTC), datetime.timedelta(days=365))
    write_files(directory, certs)
    return ServingCert(directory / "tls.crt", directory / "tls.key", certs.ca)


class CertReloader:
    """Serves the current certificate files: new TLS handshakes use `tls.crt`/`tls.key` as
    they are on disk, reloaded when they change (a rotated Secret, or files rewritten by
    the controller's own certificate management), without a restart."""

    def __init__(self, cert: ServingCert, context: ssl.SSLContext | None = None) -> None:
        self.cert = cert
        self.context = context or ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        self._seen: tuple[tuple[float, int, int], ...] = ()
        self.reload()

    def _stamp(self) -> tuple[tuple[float, int, int], ...]:
        stats = [path.stat() for path in (self.cert.cert, self.cert.key)]
        return tuple((s.st_mtime, s.st_size, s.st_ino) for s in stats)

    def reload(self) -> bool:
        """Load the files if they changed since the last load; whether they were loaded."""
        stamp = self._stamp()
        if stamp == self._seen:
            return False
        self.context.load_cert_chain(str(self.cert.cert), str(self.cert.key))
        self._seen = stamp
        return True

    async def watch(self, interval: float = 5.0) -> None:
        """Reload whenever the files change, until cancelled."""
        while True:
            await asyncio.sleep(interval)
            try:
                if self.reload():
                    log.info("webhook certificate reloaded from %s", self.cert.cert)
            except (OSError, ssl.SSLError) as exc:  # half-written, or being replaced
                log.warning("webhook certificate not reloaded: %s", exc)


async def serve(
    address: str,
    port: int,
    reloader: CertReloader,
    enabled: webhooks.Enabled | None = None,
    priority_boost: bool = False,
    management: JobManagement | None = None,
    lookup: webhooks.Lookup | None = None,
) -> web.AppRunner:
    """Start the HTTPS webhook server for the `enabled` integrations (default: all), one
    path per kind, applying the job-management rules (`management`, over the cluster
    `lookup` sees); returns the runner (call `cleanup()` to stop). `priority_boost`: Kueue's
    PriorityBoost gate, under which the Workload's annotation is checked."""
    app = web.Application()
    app[validating_webhook.PRIORITY_BOOST_GATE] = priority_boost
    chosen = webhooks.by_default(enabled)
    handle = webhooks.handler(chosen, management, lookup)
    for framework in chosen.values():
        app.router.add_post(framework.webhook_path, handle)
    for plural in validating_webhook.KINDS:
        app.router.add_post(validating_webhook.path_of(plural), validating_webhook.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    try:
        await web.TCPSite(runner, address, port, ssl_context=reloader.context).start()
    except OSError:
        await runner.cleanup()
        raise
    log.info("webhook serving on https://%s:%d", address, port)
    return runner


async def _create_or_replace(body: Any, read: Any, replace: Any, create: Any) -> None:
    """Replace the configuration of that name at the version read, or create it."""
    name = body["metadata"]["name"]
    try:
        existing: Any = await read(name)
        body["metadata"]["resourceVersion"] = existing.metadata.resource_version
        await replace(name, body)
    except ApiException as exc:
        if exc.status != 404:
            raise
        await create(body)


class WebhookServer:
    """The webhook server, its certificate (self-signed for local runs, mounted from a
    Secret, or managed by the controller: controller/runtime/certs.py) reloaded whenever
    it changes, and, for local runs, our own MutatingWebhookConfiguration."""

    def __init__(
        self,
        config: ControllerConfig,
        api_client: Any,
        readiness: Readiness,
        lookup: webhooks.Lookup | None = None,
    ) -> None:
        self.config = config
        self.lookup = lookup
        self.management = job_management(config)
        self.settings = config.webhook
        self.api_client = api_client
        self.readiness = readiness
        self.runner: Any = None
        self.reloader: CertReloader | None = None
        self.certificates: WebhookCertificates | None = None
        self.enabled = by_kind(enabled_with_implied(config.integrations.frameworks))
        readiness.require("the webhook is serving")

    def _host(self) -> str:
        settings = self.settings
        if settings.url_host:
            return settings.url_host
        return settings.address if settings.address != "0.0.0.0" else "127.0.0.1"

    async def start(self) -> None:
        settings = self.settings
        managed = settings.internal_cert_management
        if managed.enabled:
            assert settings.cert_dir is not None  # the config requires it
            namespace = self.config.leader_election.lease_namespace
            visibility = self.config.serves_visibility()
            self.certificates = WebhookCertificates(
                self.api_client,
                managed,
                namespace,
                Path(settings.cert_dir),
                # The visibility API shares the certificate: it names that Service too,
                # and its APIService trusts the same CA (controller/runtime/visibility.py).
                extra_names=service_dns_names(self.config.visibility.service_name, namespace)
                if visibility
                else (),
                api_services=(VISIBILITY_API_SERVICE,) if visibility else (),
            )
            try:
                await retried(self.certificates.ensure, attempts=8)
            except API_ERRORS as exc:
                raise FatalError(
                    f"cannot set up the webhook's certificates in Secret "
                    f"{self.config.leader_election.lease_namespace}/{managed.secret_name}: {exc}"
                ) from None
        if settings.cert_dir:
            directory = Path(settings.cert_dir)
            ca_file = directory / "ca.crt"
            cert = ServingCert(
                directory / "tls.crt",
                directory / "tls.key",
                ca_file.read_bytes() if ca_file.exists() else b"",
            )
        else:
            directory = Path(tempfile.mkdtemp(prefix="quotagate-webhook-"))
            cert = self_signed(directory, self._host())
        try:
            self.reloader = CertReloader(cert)
        except (OSError, ssl.SSLError) as exc:
            raise FatalError(
                f"cannot load the webhook certificate from {directory}: {exc} (webhook.certDir)"
            ) from None
        try:
            self.runner = await serve(
                settings.address,
                settings.port,
                self.reloader,
                self.enabled,
                self.config.gate("PriorityBoost"),
                self.management,
                self.lookup,
            )
        except OSError as exc:
            raise FatalError(
                f"cannot serve the webhook on {settings.address}:{settings.port}: "
                f"{exc.strerror or exc} (webhook.address, webhook.port, --webhook-address)"
            ) from None
        if settings.manage_configuration:
            await self._register(cert.ca_bundle)
        self.readiness.mark("the webhook is serving")

    def background(self) -> list[tuple[str, Awaitable[None]]]:
        """The long-running parts: certificate reloads and, when managed, rotation."""
        assert self.reloader is not None
        work: list[tuple[str, Awaitable[None]]] = [
            ("the webhook certificate reloader", self.reloader.watch())
        ]
        if self.certificates is not None:
            work.append(("the webhook certificate manager", self.certificates.run_forever()))
        return work

    async def _register(self, ca_bundle: bytes) -> None:
        """Create or update our MutatingWebhookConfiguration and, unless `webhook.validation`
        is off, our ValidatingWebhookConfiguration (both named `quotagate`)."""
        settings = self.settings
        url_base = f"https://{self._host()}:{settings.port}"
        admission = aio_client.AdmissionregistrationV1Api(self.api_client)
        mutating = webhooks.webhook_configuration(
            url_base,
            ca_bundle,
            self.config.leader_election.lease_namespace,
            self.enabled,
            self.config.manage_jobs_without_queue_name,
            self.config.namespace_selector_spec,
        )
        await _create_or_replace(
            mutating,
            admission.read_mutating_webhook_configuration,
            admission.replace_mutating_webhook_configuration,
            admission.create_mutating_webhook_configuration,
        )
        log.info("registered MutatingWebhookConfiguration %s", webhooks.CONFIG_NAME)
        if not settings.validation:
            return
        validating = validating_webhook.validating_configuration(
            url_base, ca_bundle, settings.validation_failure_policy, webhooks.CONFIG_NAME
        )
        await _create_or_replace(
            validating,
            admission.read_validating_webhook_configuration,
            admission.replace_validating_webhook_configuration,
            admission.create_validating_webhook_configuration,
        )
        log.info(
            "registered ValidatingWebhookConfiguration %s (failurePolicy %s)",
            webhooks.CONFIG_NAME,
            settings.validation_failure_policy,
        )

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()
