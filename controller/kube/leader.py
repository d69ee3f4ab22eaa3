"""Lease-based leader election: only the replica holding the Lease runs the scheduling loop.

kopf's peering is not leader election (it pauses on priority, and tasks we start are not
paused), so kopf runs `standalone` and this module decides who schedules. It follows
client-go's `leaderelection` rules on a `coordination.k8s.io/v1` Lease:

- a Lease held by someone else counts as expired only after we have seen its record
  unchanged for `leaseDurationSeconds` of *our* clock (no clock-skew assumptions);
- every update is a compare-and-swap on `resourceVersion`, so two candidates can never
  both win the same term;
- the leader's term ends `renewDeadlineSeconds` after it *sent* its last successful
  renewal, by a timer that no hanging request can hold up: then it stops deciding, cancels
  its work and abandons its writes in flight. A standby counts `leaseDurationSeconds`,
  which is longer, from when it *saw* that renewal, which cannot be before it was sent:
  the old leader has stopped writing before anyone else may start (fencing by lease, as
  client-go's leader election; `quotagate_lease_*` metrics show it).

(The asyncio elector shipped in `kubernetes.aio.leaderelection` 37.0.2 cannot create a
Lease — its LeaseLock passes `pretty=True` where the client wants a string — hence ours.)
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import logging
import os
import socket
import time
import uuid
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime
from typing import Any, cast

from kubernetes.aio import client as aio_client
from kubernetes.aio.client.exceptions import ApiException
from pydantic import BaseModel, ConfigDict, Field, model_validator

from controller.kube.client import API_ERRORS, CONNECTION_ERRORS, describe
from controller.kube.connections import KubeApiClient
from controller.kube.fatal import FatalError
from controller.kube.retries import campaign


class LeaderElection(BaseModel):
    """Lease-based leader election: only the leader acts (the `leaderElection` section of
    the controller's configuration; the cost controller builds one from its flags)."""

    model_config = ConfigDict(extra="forbid", populate_by_name=True, frozen=True)

    enabled: bool = Field(True, description="run the scheduling loop only while holding the Lease")
    lease_name: str = Field("quotagate-controller", alias="leaseName", min_length=1)
    lease_namespace: str = Field("quotagate-system", alias="leaseNamespace", min_length=1)
    lease_duration_seconds: int = Field(15, alias="leaseDurationSeconds", ge=1)
    renew_deadline_seconds: int = Field(10, alias="renewDeadlineSeconds", ge=1)
    retry_period_seconds: int = Field(2, alias="retryPeriodSeconds", ge=1)

    @model_validator(mode="after")
    def _durations_are_ordered(self) -> LeaderElection:
        if self.lease_duration_seconds <= self.renew_deadline_seconds:
            raise ValueError("leaseDurationSeconds must be greater than renewDeadlineSeconds")
        if self.renew_deadline_seconds <= 1.2 * self.retry_period_seconds:
            raise ValueError("renewDeadlineSeconds must be greater than 1.2 × retryPeriodSeconds")
        return self


log = logging.getLogger(__name__)

_GROUP, _VERSION, _PLURAL = "coordination.k8s.io", "v1", "leases"


def default_identity() -> str:
    """Pod name (HOSTNAME) plus a random suffix, so two processes never share an identity."""
    host = os.environ.get("HOSTNAME") or socket.gethostname()
    return f"{host}_{uuid.uuid4().hex[:8]}"


def _micro_time() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaseElector:
    """Acquire and renew one Lease; see the module docstring for the rules."""

    def __init__(
        self,
        api_client: aio_client.ApiClient,
        settings: LeaderElection,
        identity: str | None = None,
        monotonic: Callable[[], float] = time.monotonic,
        on_renew: Callable[[bool], None] | None = None,
    ) -> None:
        self.api = aio_client.CustomObjectsApi(api_client)
        self.settings = settings
        self.identity = identity or default_identity()
        self.monotonic = monotonic
        self.on_renew = on_renew  # told whether each renewal while leading worked
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at = 0.0
        # When the last successful acquisition or renewal was sent (monotonic): the term
        # ends `renewDeadlineSeconds` after it.
        self.renewed_at = 0.0
        self.holding = False  # in a term that has not run out (`release` gives it up)

    async def try_acquire_or_renew(self) -> bool:
        """One attempt; True when we hold the Lease afterwards."""
        s = self.settings
        try:
            lease = await self._read()
        except ApiException as exc:
            if exc.status == 403:
                raise FatalError(_forbidden(s, "get")) from None
            if exc.status != 404:
                log.info("reading lease failed: %s", describe(exc))
                return False
            return await self._create()
        spec = lease.get("spec") or {}
        record = (spec.get("holderIdentity"), spec.get("renewTime"), spec.get("leaseTransitions"))
        now = self.monotonic()
        if record != self._observed_record:
            self._observed_record, self._observed_at = record, now
        holder = spec.get("holderIdentity")
        duration = int(spec.get("leaseDurationSeconds") or s.lease_duration_seconds)
        if holder and holder != self.identity and now < self._observed_at + duration:
            return False  # someone else holds an unexpired lease
        new_spec = dict(spec)
        new_spec.update(
            holderIdentity=self.identity,
            leaseDurationSeconds=s.lease_duration_seconds,
            renewTime=_micro_time(),
        )
        if holder != self.identity:
            new_spec["acquireTime"] = new_spec["renewTime"]
            new_spec["leaseTransitions"] = int(spec.get("leaseTransitions") or 0) + 1
        lease["spec"] = new_spec
        sent = self.monotonic()
        try:
            await self.api.replace_namespaced_custom_object(
                _GROUP, _VERSION, s.lease_namespace, _PLURAL, s.lease_name, lease
            )
        except ApiException as exc:
            log.info("updating lease failed: %s", describe(exc))  # 409: someone else won
            return False
        self._observed_record = (
            self.identity,
            new_spec["renewTime"],
            new_spec.get("leaseTransitions"),
        )
        self._observed_at = self.renewed_at = sent
        return True

    async def _read(self) -> dict[str, Any]:
        s = self.settings
        lease = await self.api.get_namespaced_custom_object(
            _GROUP, _VERSION, s.lease_namespace, _PLURAL, s.lease_name
        )
        return cast(dict[str, Any], lease)

    async def _create(self) -> bool:
        s = self.settings
        now = _micro_time()
        body = {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": {"name": s.lease_name, "namespace": s.lease_namespace},
            "spec": {
                "holderIdentity": self.identity,
                "leaseDurationSeconds": s.lease_duration_seconds,
                "acquireTime": now,
                "renewTime": now,
                "leaseTransitions": 0,
            },
        }
        sent = self.monotonic()
        try:
            await self.api.create_namespaced_custom_object(
                _GROUP, _VERSION, s.lease_namespace, _PLURAL, body
            )
        except ApiException as exc:
            if exc.status == 404:
                raise FatalError(
                    f"the leader-election namespace {s.lease_namespace} does not exist: create "
                    "it, or name another with --lease-namespace (leaderElection.leaseNamespace)"
                ) from None
            if exc.status == 403:
                raise FatalError(_forbidden(s, "create")) from None
            log.info("creating lease failed: %s", describe(exc))  # 409: someone else created it
            return False
        self._observed_record = (self.identity, now, 0)
        self._observed_at = self.renewed_at = sent
        return True

    async def release(self) -> None:
        """Give the Lease up on a clean shutdown so a standby takes over at once; only a
        leader whose term was cut short does, and for at most `renewDeadlineSeconds`, as
        client-go's (an API server that does not answer must not hold the process up:
        the standby then takes over when the Lease expires)."""
        if not self.holding:
            return
        with contextlib.suppress(*API_ERRORS):  # TimeoutError included
            async with asyncio.timeout(self.settings.renew_deadline_seconds):
                await self._give_up()

    async def _give_up(self) -> None:
        s = self.settings
        lease = await self._read()
        if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
            return
        lease["spec"].update(holderIdentity=None, leaseDurationSeconds=1, renewTime=_micro_time())
        await self.api.replace_namespaced_custom_object(
            _GROUP, _VERSION, s.lease_namespace, _PLURAL, s.lease_name, lease
        )

    @property
    def term_ends(self) -> float:
        """When the current term ends unless renewed (monotonic)."""
        return self.renewed_at + self.settings.renew_deadline_seconds

    async def lead_while_holding(
        self, lead: Callable[[], Awaitable[None]], stepping_down: Callable[[], None] | None = None
    ) -> None:
        """Run `lead()` from acquisition until the term ends (`term_ends`, moved on by every
        renewal); then `stepping_down()` (stop deciding: nothing new is written), and
        `lead()` is cancelled. The end is a timer: a renewal that hangs cannot extend it."""
        work = asyncio.ensure_future(lead())
        renewing = asyncio.ensure_future(self._keep_renewing())
        self.holding = True
        try:
            while (remaining := self.term_ends - self.monotonic()) > 0:
                done, _ = await asyncio.wait(
                    {work, renewing}, timeout=remaining, return_when=asyncio.FIRST_COMPLETED
                )
                if work in done:
                    work.result()  # lead() crashed: propagate; a silent leader must not hold the Lease
                    raise RuntimeError("the scheduling loop ended while leading")
                if renewing in done:
                    renewing.result()  # a FatalError (RBAC) propagates
            self.holding = False  # the term ran out: not ours to give up
        finally:
            if stepping_down is not None:
                stepping_down()
            for task in (renewing, work):
                task.cancel()
            # Before anything else runs: the writes in flight are reset, so none of them
            # can reach the API server in a later term (a partition that heals would
            # otherwise deliver what TCP still held).
            client = self.api.api_client
            if isinstance(client, KubeApiClient):
                client.abandon_connections()
            await asyncio.gather(renewing, work, return_exceptions=True)

    async def _keep_renewing(self) -> None:
        """Renew every `retryPeriodSeconds`; an attempt may take until the term ends (a
        slow API server's renewal still counts from when it was sent)."""
        s = self.settings
        while True:
            started = self.monotonic()
            renewed = False
            try:
                async with asyncio.timeout(max(0.0, self.term_ends - started)):
                    renewed = await self.try_acquire_or_renew()
            except CONNECTION_ERRORS as exc:  # TimeoutError included
                log.info("renewing the lease failed: %s", str(exc) or type(exc).__name__)
            if self.on_renew is not None:
                self.on_renew(renewed)
            await asyncio.sleep(max(0.0, s.retry_period_seconds - (self.monotonic() - started)))


def _forbidden(settings: LeaderElection, verb: str) -> str:
    return (
        f"not allowed to {verb} the Lease {settings.lease_namespace}/{settings.lease_name}: "
        "grant get, create and update on leases (coordination.k8s.io) in that namespace"
    )


async def run_while_leading(
    api_client: aio_client.ApiClient,
    settings: LeaderElection,
    lead: Callable[[], Awaitable[None]],
    on_change: Callable[[bool], None] | None = None,
    identity: str | None = None,
    on_renew: Callable[[bool], None] | None = None,
) -> None:
    """Campaign for the Lease forever; run `lead()` while holding it and cancel it on loss.

    `on_change(True/False)` is told when leadership starts and stops (metrics, readiness),
    `on_renew(worked)` of every acquisition and renewal while leading (metrics).
    When leader election is disabled, `lead()` simply runs.
    """
    if not settings.enabled:
        if on_change:
            on_change(True)
        await lead()
        return
    elector = LeaseElector(api_client, settings, identity, on_renew=on_renew)
    try:
        while True:
            await campaign(elector.try_acquire_or_renew, settings.retry_period_seconds)
            log.info(
                "acquired lease %s/%s as %s",
                settings.lease_namespace,
                settings.lease_name,
                elector.identity,
            )
            if on_renew:
                on_renew(True)
            if on_change:
                on_change(True)
            await elector.lead_while_holding(
                lead, functools.partial(on_change, False) if on_change else None
            )
            log.warning(
                "lost lease %s/%s: not renewed for %.1fs (renewDeadlineSeconds %d); stopped "
                "deciding",
                settings.lease_namespace,
                settings.lease_name,
                elector.monotonic() - elector.renewed_at,
                settings.renew_deadline_seconds,
            )
    finally:
        await asyncio.shield(elector.release())
