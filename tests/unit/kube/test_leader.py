"""controller/kube/leader.py: a leader's term ends `renewDeadlineSeconds` after it *sent* its
last successful renewal, by a timer that a hanging renewal cannot hold up; on the way out
it stops deciding first, then cancels its work and resets its connections, so nothing it
started reaches the API server once a standby may lead (fencing by lease)."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
from kubernetes.aio import client as aio_client

from controller.kube import leader
from controller.kube.client import KubeApiClient
from controller.kube.leader import LeaderElection, LeaseElector

SETTINGS = LeaderElection(leaseDurationSeconds=3, renewDeadlineSeconds=2, retryPeriodSeconds=1)


class _Leases:
    """The Lease API: reads answer at once; renewals take `delay` seconds, or never
    answer once `hang` is set."""

    def __init__(self, client: Any) -> None:
        self.api_client = client
        self.lease: dict[str, Any] = {"metadata": {}, "spec": {}}
        self.delay = 0.0
        self.hang = False
        self.renewals = 0

    async def get_namespaced_custom_object(self, *_: Any) -> dict[str, Any]:
        return {"metadata": {}, "spec": dict(self.lease["spec"])}

    async def replace_namespaced_custom_object(self, *args: Any) -> dict[str, Any]:
        if self.hang:
            await asyncio.Event().wait()
        await asyncio.sleep(self.delay)
        self.lease = args[-1]
        self.renewals += 1
        return self.lease


class _Client(KubeApiClient):
    def __init__(self) -> None:
        super().__init__(aio_client.Configuration())
        self.abandoned = 0

    def abandon_connections(self) -> None:
        self.abandoned += 1


def _elector() -> tuple[LeaseElector, _Leases, _Client]:
    client = _Client()
    elector = LeaseElector(client, SETTINGS, "me")
    leases = _Leases(client)
    elector.api = leases  # type: ignore[assignment]
    return elector, leases, client


def test_the_term_ends_on_time_when_a_renewal_hangs() -> None:
    elector, leases, client = _elector()
    order: list[str] = []

    async def lead() -> None:
        try:
            await asyncio.Event().wait()
        finally:
            order.append("lead cancelled")

    async def scenario() -> float:
        assert await elector.try_acquire_or_renew()
        sent = elector.renewed_at
        leases.hang = True  # every renewal from now on hangs
        await elector.lead_while_holding(lead, lambda: order.append("stepped down"))
        return time.monotonic() - sent

    term = asyncio.run(scenario())
    assert SETTINGS.renew_deadline_seconds <= term < SETTINGS.renew_deadline_seconds + 0.5
    assert order == ["stepped down", "lead cancelled"]
    assert client.abandoned == 1


def test_renewals_extend_the_term_from_when_they_were_sent() -> None:
    elector, leases, _ = _elector()
    leases.delay = 0.4  # a slow API server: the renewal still counts from its sending

    async def scenario() -> tuple[float, float]:
        assert await elector.try_acquire_or_renew()
        before = time.monotonic()
        assert await elector.try_acquire_or_renew()
        sent = elector.renewed_at
        lead = asyncio.ensure_future(elector.lead_while_holding(asyncio.Event().wait))
        await asyncio.sleep(2.5)  # past one renew deadline: renewals kept it
        assert not lead.done()
        leases.hang = True
        await lead
        return before, sent

    before, sent = asyncio.run(scenario())
    assert before <= sent < before + 0.1
    assert leases.renewals >= 3


def _stopped_while_leading(
    monkeypatch: pytest.MonkeyPatch, elector: LeaseElector, leases: _Leases, hang: bool
) -> float:
    """`run_while_leading` on `elector`, cancelled once it leads (a SIGTERM), with every
    request from then on hanging if `hang`; the seconds it took to end."""
    monkeypatch.setattr(leader, "LeaseElector", lambda *_, **__: elector)

    async def scenario() -> float:
        leading = asyncio.Event()

        async def lead() -> None:
            leading.set()
            await asyncio.Event().wait()

        task = asyncio.ensure_future(
            leader.run_while_leading(elector.api.api_client, SETTINGS, lead)
        )
        await asyncio.wait_for(leading.wait(), 5)
        leases.hang = hang
        cancelled = time.monotonic()
        task.cancel()
        await asyncio.wait_for(asyncio.gather(task, return_exceptions=True), 10)
        return time.monotonic() - cancelled

    return asyncio.run(scenario())


def test_a_leader_stopped_mid_term_gives_the_lease_up(monkeypatch: pytest.MonkeyPatch) -> None:
    elector, leases, _ = _elector()
    took = _stopped_while_leading(monkeypatch, elector, leases, hang=False)
    assert took < 1
    assert leases.lease["spec"]["holderIdentity"] is None
    assert leases.lease["spec"]["leaseDurationSeconds"] == 1


def test_giving_the_lease_up_waits_at_most_the_renew_deadline(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """An API server that does not answer (cut off, hung) must not hold the process up: a
    standby takes over when the Lease expires."""
    elector, leases, _ = _elector()
    took = _stopped_while_leading(monkeypatch, elector, leases, hang=True)
    assert SETTINGS.renew_deadline_seconds <= took < SETTINGS.renew_deadline_seconds + 0.5
    assert leases.lease["spec"]["holderIdentity"] == "me"


def test_a_term_that_ran_out_is_not_given_up() -> None:
    elector, leases, _ = _elector()

    async def scenario() -> None:
        assert await elector.try_acquire_or_renew()
        leases.hang = True
        await elector.lead_while_holding(asyncio.Event().wait)
        leases.hang = False
        renewals = leases.renewals
        await elector.release()  # no read, no write: the Lease is not ours to give up
        assert leases.renewals == renewals

    asyncio.run(scenario())
