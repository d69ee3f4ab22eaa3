"""Lease-based leader election: only the replica holding the Lease runs the scheduling loop.

kopf's peering is not leader election (it pauses on priority, and tasks we start are not
paused), so kopf runs `standalone` and this module decides who schedules. It follows
client-go's `leaderelection` rules on a `coordination.k8s.io/v1` Lease:

- a Lease held by someone else counts as expired only after we have seen its record
  unchanged for `leaseDurationSeconds` of *our* clock (no clock-skew assumptions);
- every update is a compare-and-swap on `resourceVersion`, so two candidates can never
  both win the same term;
- the leader cancels its work as soon as it has failed to renew for `renewDeadlineSeconds`,
  which is shorter than the lease duration: it has stopped before anyone else may start.

(The asyncio elector shipped in `kubernetes.aio.leaderelection` 37.0.2 cannot create a
Lease — its LeaseLock passes `pretty=True` where the client wants a string — hence ours.)
"""

from __future__ import annotations

import asyncio
import contextlib
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

from controller.kube.client import CONNECTION_ERRORS, describe
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
    ) -> None:
        self.api = aio_client.CustomObjectsApi(api_client)
        self.settings = settings
        self.identity = identity or default_identity()
        self.monotonic = monotonic
        self._observed_record: tuple[Any, ...] | None = None
        self._observed_at = 0.0

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
        self._observed_at = self.monotonic()
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
        self._observed_at = self.monotonic()
        return True

    async def release(self) -> None:
        """Give the Lease up on a clean shutdown so a standby takes over at once."""
        s = self.settings
        with contextlib.suppress(ApiException, OSError):
            lease = await self._read()
            if (lease.get("spec") or {}).get("holderIdentity") != self.identity:
                return
            lease["spec"].update(
                holderIdentity=None, leaseDurationSeconds=1, renewTime=_micro_time()
            )
            await self.api.replace_namespaced_custom_object(
                _GROUP, _VERSION, s.lease_namespace, _PLURAL, s.lease_name, lease
            )

    async def lead_while_holding(self, lead: Callable[[], Awaitable[None]]) -> None:
        """Run `lead()` from acquisition until the Lease cannot be renewed; then cancel it."""
        s = self.settings
        task = asyncio.ensure_future(lead())
        last_renewed = self.monotonic()
        try:
            while True:
                done, _ = await asyncio.wait({task}, timeout=s.retry_period_seconds)
                if done:
                    task.result()  # lead() crashed: propagate; a silent leader must not hold the Lease
                    raise RuntimeError("the scheduling loop ended while leading")
                try:
                    renewed = await asyncio.wait_for(
                        self.try_acquire_or_renew(), s.retry_period_seconds
                    )
                except CONNECTION_ERRORS:
                    renewed = False
                if renewed:
                    last_renewed = self.monotonic()
                elif self.monotonic() - last_renewed >= s.renew_deadline_seconds:
                    return
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


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
) -> None:
    """Campaign for the Lease forever; run `lead()` while holding it and cancel it on loss.

    `on_change(True/False)` is told when leadership starts and stops (metrics, readiness).
    When leader election is disabled, `lead()` simply runs.
    """
    if not settings.enabled:
        if on_change:
            on_change(True)
        await lead()
        return
    elector = LeaseElector(api_client, settings, identity)
    try:
        while True:
            await campaign(elector.try_acquire_or_renew, settings.retry_period_seconds)
            log.info(
                "acquired lease %s/%s as %s",
                settings.lease_namespace,
                settings.lease_name,
                elector.identity,
            )
            if on_change:
                on_change(True)
            try:
                await elector.lead_while_holding(lead)
            finally:
                if on_change:
                    on_change(False)
            log.warning(
                "lost lease %s/%s; stopped deciding", settings.lease_namespace, settings.lease_name
            )
    finally:
        await asyncio.shield(elector.release())
