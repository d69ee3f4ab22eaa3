"""`quotagate run`: watches feed the Controller; the leader runs the scheduling loop.

Workloads, and the queue-labelled objects of the enabled integrations (pods, Jobs,
JobSets, …: `integrations.frameworks`, filtered by the API server), come from informers
(controller/kube/informer.py); the low-volume queue objects from kopf, which
runs `standalone` (its peering is not leader election). `leader.run_while_leading`
decides which replica schedules. Every replica keeps its state current from the watches
and serves the webhook and the health probes; a replica that becomes leader re-reads
everything before its first cycle, so it never decides on a state older than what the
previous leader wrote.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import os
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from typing import Any

import kopf
from kubernetes.aio.client.exceptions import ApiException

from api.constants import POD_SET_LABEL, QUEUE_NAME_LABEL
from controller.config import ControllerConfig
from controller.config_report import job_management, not_implemented
from controller.integrations.framework.reconciler import GenericReconciler
from controller.integrations.framework.registry import (
    IntegrationSettings,
    enabled_with_implied,
    frameworks,
)
from controller.integrations.topology_ungater import TopologyUngater
from controller.kube.client import (
    CLUSTER_QUEUES,
    CONNECTION_ERRORS,
    LOCAL_QUEUES,
    PODS,
    WATCHED,
    WORKLOADS,
    Api,
    Resource,
    make_api_client,
)
from controller.kube.fatal import FatalError
from controller.kube.health import Readiness, serve_health
from controller.kube.informer import MAX_BACKOFF, Informer, WorkloadInformer
from controller.kube.leader import run_while_leading
from controller.kube.process import begin_stopping, stop_on_signals
from controller.runtime.config_metrics import export_not_implemented
from controller.runtime.controller import Controller
from controller.runtime.events import EventRecorder
from controller.runtime.metrics import FOLLOWER, LEADER, STANDALONE, Metrics
from controller.runtime.queue_status import QueueStatusWriter
from controller.runtime.visibility import VisibilityServer
from controller.runtime.webhook_server import WebhookServer

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


# Watched by informers of their own (controller/kube/informer.py), not by kopf: the
# Workloads, and the queues whose status the controller rewrites as their usage changes.
INFORMED = (WORKLOADS, CLUSTER_QUEUES, LOCAL_QUEUES)


class _RetryForever:
    """kopf's pauses between the tries of a failed request, without end: 1, 1, 2 and 3 s,
    then every 4 s, as the informers' backoff. kopf escalates once its pauses run out (its
    default: after about a minute), and an escalated watch error ends the operator: the
    process would exit on an API server outage of a minute. Iterable again for each
    request."""

    def __iter__(self) -> Iterator[float]:
        return itertools.chain((1.0, 1.0, 2.0, 3.0), itertools.repeat(MAX_BACKOFF))


RETRY_FOREVER = _RetryForever()


def build_registry(controller: Controller, kubeconfig: str | None = None) -> kopf.OperatorRegistry:
    """One `on.event` handler per watched resource: events go straight into the state
    (no per-object handlers, no progress annotations written to the objects). The
    `INFORMED` resources, and the pods and Jobs the integrations manage, have informers of
    their own."""
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
        if resource not in INFORMED:
            register(resource)

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
        settings.networking.error_backoffs = RETRY_FOREVER

    return registry


class _EventSink:
    """An integration's event handler and the keys it holds, as an informer's sink."""

    def __init__(
        self,
        apply: Callable[[str | None, dict[str, Any]], None],
        keys: Callable[[], set[str]],
    ) -> None:
        self.apply_event, self.known_keys = apply, keys


QUEUED_SELECTOR = QUEUE_NAME_LABEL  # the label exists: only queue-labelled pods and Jobs


async def run_operator(
    config: ControllerConfig,
    kubeconfig: str | None = None,
    stop_flag: asyncio.Event | None = None,
    ready_flag: asyncio.Event | None = None,
    identity: str | None = None,
) -> None:
    """Run the controller until `stop_flag` is set (or forever). Raises FatalError when it
    cannot go on (the caller exits 1 with the message)."""
    api_client = await make_api_client(kubeconfig)
    try:
        await _run(config, kubeconfig, api_client, stop_flag, ready_flag, identity)
    finally:
        await api_client.close()


async def _run(
    config: ControllerConfig,
    kubeconfig: str | None,
    api_client: Any,
    stop_flag: asyncio.Event | None,
    ready_flag: asyncio.Event | None,
    identity: str | None,
) -> None:
    api = Api(api_client)
    metrics = Metrics()
    export_not_implemented(metrics.registry, not_implemented(config))
    metrics.set_role(FOLLOWER if config.leader_election.enabled else STANDALONE)
    metrics.serve(config.metrics_port)
    readiness = Readiness("the Workload informer has listed")
    health = await serve_health("0.0.0.0", config.health_port, readiness)
    recorder = EventRecorder(
        api, qps=config.event_qps, burst=config.event_burst, on_drop=metrics.events_dropped.inc
    )
    controller = Controller(api, config, metrics, events=recorder)
    await load_or_fail(controller)
    statuses = QueueStatusWriter(controller.ctx, controller.sync.unsupported)
    controller.sync.object_deletion_listeners.append(statuses.forget)

    known = frameworks()
    enabled = [n for n in enabled_with_implied(config.integrations.frameworks) if n in known]
    management = job_management(config)
    settings = IntegrationSettings(
        tuple(config.integrations.label_keys_to_copy), tuple(enabled), management
    )
    integrations = [
        (known[name], known[name].make(api_client, controller, settings)) for name in enabled
    ]
    for _, integration in integrations:
        controller.workload_listeners.append(integration.on_workload_event)
    ungater = TopologyUngater(api_client, controller)
    controller.workload_listeners.append(ungater.on_workload_event)
    controller.topology.node_listeners.append(ungater.on_node_event)
    log.info("integrations enabled: %s", ", ".join(enabled))
    webhook = (
        WebhookServer(config, api_client, readiness, controller) if config.webhook.enabled else None
    )
    if webhook is not None:
        await webhook.start()
    visibility = (
        VisibilityServer(config, api_client, lambda: controller.ctx.state)
        if config.serves_visibility()
        else None
    )
    if visibility is not None:
        await visibility.start()

    async def lead() -> None:
        controller.leading = True
        controller.reset()
        status_task: asyncio.Task[None] | None = None
        try:
            # A new leader decides on a fresh, consistent read, however long the API server
            # takes to answer (an outage longer than the term ends the term anyway).
            started = time.monotonic()
            await controller.load(WATCHED, attempts=None)
            log.info(
                "term began: read %d Workloads and their queues in %.2fs",
                len(controller.sync.copies),
                time.monotonic() - started,
            )
            status_task = asyncio.create_task(statuses.run_forever())
            for _, integration in integrations:
                integration.resync()
            ungater.resync()
            await controller.schedule_forever()
        finally:
            # The term is over: nothing the leader started may write any more.
            if status_task is not None:
                status_task.cancel()
            for _, integration in integrations:
                integration.stop_leading()
            ungater.stop_leading()

    def on_change(leading: bool) -> None:
        controller.leading = leading
        if config.leader_election.enabled:
            if leading != (metrics.role == LEADER):
                metrics.leader_transitions.labels("acquired" if leading else "lost").inc()
            metrics.set_role(LEADER if leading else FOLLOWER)
        else:
            metrics.set_role(STANDALONE)
            metrics.is_leader.set(1)

    def on_renew(renewed: bool) -> None:
        metrics.lease_renewals.labels("ok" if renewed else "failed").inc()
        if renewed:
            metrics.lease_last_renewal.set_to_current_time()

    stop_flag = stop_flag or asyncio.Event()
    failures: list[str] = []

    def fatal_when_ended(what: str) -> Callable[[asyncio.Task[None]], None]:
        # The election loop and the watches end only by cancellation; anything else is
        # fatal: a replica that can neither lead, follow nor see its objects must not keep
        # running half-alive. The process exits 1 with the reason (command.py).
        def ended(task: asyncio.Task[None]) -> None:
            if task.cancelled():
                return
            exc = task.exception()
            if exc is None:
                message = f"{what} ended unexpectedly"
            elif isinstance(exc, FatalError):
                message = str(exc)
            else:
                message = f"{what} failed: {type(exc).__name__}: {exc}".splitlines()[0]
            log.error("stopping: %s", message)
            begin_stopping()
            failures.append(message)
            assert stop_flag is not None
            stop_flag.set()

        return ended

    def background(what: str, coro: Awaitable[None]) -> asyncio.Task[None]:
        task = asyncio.ensure_future(coro)
        task.add_done_callback(fatal_when_ended(what))
        return task

    namespaces = config.namespaces or None
    tasks = [
        background(
            "leader election",
            run_while_leading(
                api_client, config.leader_election, lead, on_change, identity, on_renew
            ),
        ),
        background(
            "the Workload watch",
            WorkloadInformer(
                api_client,
                controller,
                namespaces,
                on_listed=lambda: readiness.mark("the Workload informer has listed"),
                observer=metrics.watches,
            ).run(),
        ),
        *(
            background(
                f"the {resource.kind} watch",
                Informer(
                    api_client,
                    resource,
                    _EventSink(controller.apply_event, keys),
                    namespaces if resource.namespaced else None,
                    observer=metrics.watches,
                ).run(),
            )
            for resource, keys in (
                (
                    CLUSTER_QUEUES,
                    lambda: {f"/{name}" for name in controller.ctx.state.objects.cluster_queues},
                ),
                (LOCAL_QUEUES, lambda: set(controller.ctx.state.objects.local_queues)),
            )
        ),
        *(
            background(
                f"the {framework.resource.kind} watch",
                Informer(
                    api_client,
                    framework.resource,
                    _EventSink(integration.on_object_event, integration.known_keys),
                    namespaces,
                    # Unlabelled objects are managed too: the integrations see them all.
                    label_selector=None
                    if config.manage_jobs_without_queue_name
                    else QUEUED_SELECTOR,
                    await_api=True,
                    observer=metrics.watches,
                ).run(),
            )
            for framework, integration in integrations
        ),
        *(  # the ProvisioningRequest check's objects (controller/runtime/provisioning.py)
            background(
                f"the {resource.kind} watch (provisioning requests)",
                Informer(
                    api_client,
                    resource,
                    cache,
                    namespaces if resource.namespaced else None,
                    label_selector=selector,
                    on_listed=cache.mark_listed,
                    await_api=True,  # the cluster autoscaler's CRD may come later
                    observer=metrics.watches,
                ).run(),
            )
            for resource, cache, selector in controller.provisioning.sinks()
        ),
        *(  # the TAS view: every node, and the pods bound to one (all namespaces)
            background(
                f"the {resource.kind} watch (topology view)",
                Informer(
                    api_client,
                    resource,
                    sink,
                    None,
                    field_selector=selector,
                    on_listed=sink.on_listed,
                    observer=metrics.watches,
                ).run(),
            )
            for resource, sink, selector in controller.topology.sinks()
        ),
        background(  # the pods of admitted pod sets, for the topology ungater
            "the admitted pods' watch",
            Informer(
                api_client,
                PODS,
                _EventSink(ungater.on_pod_event, ungater.known_keys),
                namespaces,
                label_selector=POD_SET_LABEL,
                observer=metrics.watches,
            ).run(),
        ),
        *(  # the kinds an adapter reads to describe its objects (a TrainJob's runtime)
            background(
                f"the {resource.kind} watch",
                Informer(
                    api_client,
                    resource,
                    sink,
                    namespaces if resource.namespaced else None,
                    on_listed=sink.mark_listed,
                    await_api=True,
                    observer=metrics.watches,
                ).run(),
            )
            for _, integration in integrations
            if isinstance(integration, GenericReconciler)
            for resource, sink in integration.related.sinks()
        ),
    ]
    for server in (webhook, visibility):
        if server is not None:
            tasks += [background(what, coro) for what, coro in server.background()]

    kopf_ready = ready_flag or asyncio.Event()

    async def stop_ours() -> None:
        # kopf installs its own SIGTERM handler once started, which would stop kopf alone
        # and have it wait 5 s for the tasks started after it (ours) before cancelling
        # them: take the signals back, and end our own tasks at once when asked to stop (a
        # leader gives its Lease up on the way).
        assert stop_flag is not None
        await kopf_ready.wait()
        if threading.current_thread() is threading.main_thread():
            stop_on_signals(stop_flag)
        await stop_flag.wait()
        for task in tasks:
            task.cancel()

    stopper = asyncio.ensure_future(stop_ours())
    refused: kopf.LoginError | None = None
    try:
        await kopf.operator(
            registry=build_registry(controller, kubeconfig),
            standalone=True,
            clusterwide=not config.namespaces,
            namespaces=config.namespaces,
            stop_flag=stop_flag,
            ready_flag=kopf_ready,
        )
    except kopf.LoginError as exc:
        # kopf's watches got 401 (credentials revoked or expired) and it gave up; our own
        # watches usually say so first (`failures`), whichever ends first.
        refused = exc
    finally:
        stopper.cancel()
        for task in tasks:
            task.cancel()
        await asyncio.gather(stopper, *tasks, return_exceptions=True)
        for server in (webhook, visibility):
            if server is not None:
                await server.stop()
        if health is not None:
            await health.cleanup()
    if failures:
        raise FatalError(failures[0])
    if refused is not None:
        raise FatalError(
            f"the API server refused the credentials (401 Unauthorized): {refused} "
            "(check the kubeconfig's or the service account's credentials)"
        )


async def load_or_fail(controller: Controller) -> None:
    """The initial read of every watched resource; a refusal that retrying cannot cure
    (CRDs not installed, RBAC), or an API server that does not answer ten tries (about ten
    seconds: a wrong address, more likely than an outage just then), is fatal, with what to
    fix. Once running, the controller rides outages out."""
    try:
        await controller.load(WATCHED)
    except CONNECTION_ERRORS as exc:
        host = controller.ctx.api.api_client.configuration.host
        raise FatalError(
            f"cannot reach the API server at {host}: {str(exc) or type(exc).__name__} "
            "(check the kubeconfig's server, --kubeconfig)"
        ) from None
    except ApiException as exc:
        if exc.status == 404:
            raise FatalError(
                "the Kueue CRDs are not installed (404 listing them): apply config/crd/bases "
                "or install the chart with installCRDs=true"
            ) from None
        if exc.status in (401, 403):
            raise FatalError(
                f"not allowed to list the watched resources: {exc.status} {exc.reason} "
                "(check the credentials and the ClusterRole's rules)"
            ) from None
        raise
