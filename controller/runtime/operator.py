"""`quotagate run`: kopf watches feed the Controller; the leader runs the scheduling loop.

kopf runs `standalone` (its peering is not leader election); `leader.run_while_leading`
decides which replica schedules. Every replica keeps its state current from the
watches, and a replica that becomes leader re-reads everything before its first cycle,
so it never decides on a state older than what the previous leader wrote.
"""

from __future__ import annotations

import asyncio
import logging
import os
import tempfile
from pathlib import Path
from typing import Any

import kopf
from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException

from api.constants import QUEUE_NAME_LABEL
from controller.core.workloads import WorkloadKey
from controller.integrations import webhook as webhooks
from controller.integrations.jobs import JobIntegration
from controller.integrations.pods import PodIntegration
from controller.runtime.config import ControllerConfig
from controller.runtime.controller import Controller
from controller.runtime.events import EventRecorder
from controller.runtime.informer import WorkloadInformer
from controller.runtime.kube import WATCHED, WORKLOADS, Api, Resource, make_api_client
from controller.runtime.leader import run_while_leading
from controller.runtime.metrics import Metrics
from controller.runtime.queue_status import QueueStatusWriter

log = logging.getLogger(__name__)


def connection_info(kubeconfig: str | None) -> kopf.ConnectionInfo:
    """kopf's credentials from the same source as our client: the kubeconfig named on the
    command line (or $KUBECONFIG, ~/.kube/config), else the in-cluster ServiceAccount."""
    from kubernetes import client, config

    configuration = client.Configuration()
    try:
        config.load_kube_config(
            config_file=kubeconfig or os.environ.get("KUBECONFIG") or None,
            client_configuration=configuration,
        )
    except config.ConfigException:
        if kubeconfig:
            raise
        config.load_incluster_config(client_configuration=configuration)
    header = configuration.get_api_key_with_prefix(
        "BearerToken"
    ) or configuration.get_api_key_with_prefix("authorization")
    scheme, _, token = (
        (header or "").partition(" ") if header and " " in header else (None, "", header)
    )
    return kopf.ConnectionInfo(
        server=configuration.host,
        ca_path=configuration.ssl_ca_cert,
        insecure=not configuration.verify_ssl,
        scheme=scheme or None,
        token=token or None,
        certificate_path=configuration.cert_file,
        private_key_path=configuration.key_file,
    )


def _toleration(toleration: Any) -> dict[str, Any]:
    """A flavor's toleration as the pod spec writes it."""
    out = {"key": toleration.key, "operator": toleration.operator, "effect": toleration.effect}
    if toleration.operator != "Exists":
        out["value"] = toleration.value
    return {k: v for k, v in out.items() if v}


def build_registry(
    controller: Controller,
    kubeconfig: str | None = None,
    jobs: JobIntegration | None = None,
    pods: PodIntegration | None = None,
) -> kopf.OperatorRegistry:
    """One `on.event` handler per watched resource: events go straight into the state
    (no per-object handlers, no progress annotations written to the objects)."""
    registry = kopf.OperatorRegistry()

    def register(resource: Resource) -> None:
        # async: kopf runs sync handlers in a thread pool, and the state must only ever be
        # touched from the event loop the scheduling cycle runs in.
        async def on_event(event: kopf.RawEvent, **_: Any) -> None:
            body = dict(event["object"])
            body.setdefault("kind", resource.kind)
            body.setdefault("apiVersion", resource.api_version)
            controller.apply_event(event.get("type"), body)

        kopf.on.event(
            resource.group,
            resource.version,
            resource.plural,
            id=f"track-{resource.plural}",
            registry=registry,
        )(on_event)

    for resource in WATCHED:
        if resource is not WORKLOADS:  # high volume: controller/runtime/informer.py
            register(resource)

    if jobs is not None:

        @kopf.on.event(
            "batch",
            "v1",
            "jobs",
            id="track-jobs",
            labels={QUEUE_NAME_LABEL: kopf.PRESENT},
            registry=registry,
        )
        async def on_job(event: kopf.RawEvent, **_: Any) -> None:
            body = dict(event["object"])
            body.setdefault("kind", "Job")
            body.setdefault("apiVersion", "batch/v1")
            jobs.on_job_event(event.get("type"), body)

    if pods is not None:

        @kopf.on.event(
            "",
            "v1",
            "pods",
            id="track-pods",
            labels={QUEUE_NAME_LABEL: kopf.PRESENT},
            registry=registry,
        )
        async def on_pod(event: kopf.RawEvent, **_: Any) -> None:
            body = dict(event["object"])
            body.setdefault("kind", "Pod")
            body.setdefault("apiVersion", "v1")
            pods.on_pod_event(event.get("type"), body)

    @kopf.on.login(registry=registry)
    def login(**_: Any) -> kopf.ConnectionInfo:
        return connection_info(kubeconfig)

    @kopf.on.startup(registry=registry)
    def configure(settings: kopf.OperatorSettings, **_: Any) -> None:
        settings.peering.standalone = True
        settings.posting.enabled = False
        settings.watching.server_timeout = 300
        settings.watching.client_timeout = 330
        settings.networking.request_timeout = 60

    return registry


async def run_operator(
    config: ControllerConfig,
    kubeconfig: str | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
    identity: str | None = None,
) -> None:
    """Run the controller until `stop_flag` is set (or forever)."""
    api_client = await make_api_client(kubeconfig)
    api = Api(api_client)
    metrics = Metrics()
    metrics.serve(config.metrics_port)
    recorder = EventRecorder(
        api, qps=config.event_qps, burst=config.event_burst, on_drop=metrics.events_dropped.inc
    )
    controller = Controller(api, config, metrics, events=recorder)
    await controller.load(WATCHED)
    statuses = QueueStatusWriter(controller)
    def flavor(name: str) -> tuple[dict[str, str], list[dict[str, Any]]] | None:
        found = controller.state.flavors.get(name)
        if found is None:
            return None
        return dict(found.node_labels), [_toleration(t) for t in found.tolerations]

    jobs = JobIntegration(
        api_client,
        is_leading=lambda: controller.leading,
        workload_copy=lambda key: (
            copy.body if (copy := controller.copies.get(WorkloadKey(key))) else None
        ),
        flavor=flavor,
        priority_of_class=lambda name: (
            c.value if (c := controller.state.priority_classes.workload_class(name)) else None
        ),
        events=controller.events,
    )
    controller.workload_listeners.append(jobs.on_workload_event)
    pods = PodIntegration(
        api_client,
        is_leading=lambda: controller.leading,
        workload_copy=lambda key: (
            copy.body if (copy := controller.copies.get(WorkloadKey(key))) else None
        ),
        flavor=flavor,
        priority_of_class=lambda name: (
            c.value if (c := controller.state.priority_classes.workload_class(name)) else None
        ),
        events=controller.events,
    )
    controller.workload_listeners.append(pods.on_workload_event)
    webhook_runner = await start_webhook(config, api_client) if config.webhook.enabled else None

    async def lead() -> None:
        controller.leading = True
        controller.reset()
        await controller.load(WATCHED)  # a new leader decides on a fresh, consistent read
        status_task = asyncio.create_task(statuses.run_forever())
        jobs.resync()
        pods.resync()
        try:
            await controller.schedule_forever()
        finally:
            status_task.cancel()

    def on_change(leading: bool) -> None:
        controller.leading = leading
        metrics.is_leader.set(1 if leading else 0)

    stop_flag = stop_flag or asyncio.Event()
    election = asyncio.create_task(
        run_while_leading(api_client, config.leader_election, lead, on_change, identity)
    )

    def election_ended(task: asyncio.Task[None]) -> None:
        # The election loop only ends by cancellation; anything else is fatal: a replica
        # that can neither lead nor follow must not keep running half-alive.
        if not task.cancelled() and task.exception() is not None:
            log.error("leader election failed; stopping", exc_info=task.exception())
            assert stop_flag is not None
            stop_flag.set()

    election.add_done_callback(election_ended)
    informer = asyncio.create_task(
        WorkloadInformer(api_client, controller, config.namespaces or None).run()
    )

    def informer_ended(task: asyncio.Task[None]) -> None:
        if not task.cancelled() and task.exception() is not None:
            log.error("the Workload watch failed; stopping", exc_info=task.exception())
            assert stop_flag is not None
            stop_flag.set()

    informer.add_done_callback(informer_ended)
    try:
        await kopf.operator(
            registry=build_registry(controller, kubeconfig, jobs, pods),
            standalone=True,
            clusterwide=not config.namespaces,
            namespaces=config.namespaces,
            stop_flag=stop_flag,
            ready_flag=ready_flag,
        )
    finally:
        election.cancel()
        informer.cancel()
        await asyncio.gather(election, informer, return_exceptions=True)
        if webhook_runner is not None:
            await webhook_runner.cleanup()
        await api_client.close()


async def start_webhook(config: ControllerConfig, api_client: Any) -> Any:
    """Serve the webhook; for local runs also register our MutatingWebhookConfiguration."""
    settings = config.webhook
    host = settings.url_host or (settings.address if settings.address != "0.0.0.0" else "127.0.0.1")
    if settings.cert_dir:
        directory = Path(settings.cert_dir)
        ca_file = directory / "ca.crt"
        cert = webhooks.ServingCert(
            directory / "tls.crt",
            directory / "tls.key",
            ca_file.read_bytes() if ca_file.exists() else b"",
        )
    else:
        cert = webhooks.self_signed(Path(tempfile.mkdtemp(prefix="quotagate-webhook-")), host)
    runner = await webhooks.serve(settings.address, settings.port, cert)
    if settings.manage_configuration:
        body: Any = webhooks.webhook_configuration(
            f"https://{host}:{settings.port}",
            cert.ca_bundle,
            config.leader_election.lease_namespace,
        )
        admission = aio_client.AdmissionregistrationV1Api(api_client)
        try:
            existing: Any = await admission.read_mutating_webhook_configuration(
                webhooks.CONFIG_NAME
            )
            body["metadata"]["resourceVersion"] = existing.metadata.resource_version
            await admission.replace_mutating_webhook_configuration(webhooks.CONFIG_NAME, body)
        except ApiException as exc:
            if exc.status != 404:
                raise
            await admission.create_mutating_webhook_configuration(body)
        log.info("registered MutatingWebhookConfiguration %s", webhooks.CONFIG_NAME)
    return runner
