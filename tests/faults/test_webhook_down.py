"""quotagate's webhook unreachable (no endpoint answers) while pods and Jobs are created:
what its `failurePolicy: Fail` promises happens. Queue-labelled pods and Jobs are refused,
so none runs past quota ungated or unsuspended; unlabelled pods and system namespaces are
not sent to the webhook and are not held up; once it answers again, the same pods and
Jobs are gated, admitted within quota and run (tests/faults/replay.py)."""

from __future__ import annotations

import contextlib
from typing import Any

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from tests.cluster.fixtures import wait_for
from tests.faults.load import queued_pod


def test_webhook_down_while_pods_and_jobs_are_created(scenario: Any, fault_cluster: Any) -> None:
    s = scenario()
    core = client.CoreV1Api(fault_cluster.api_client)
    s.load.create(bare=60)
    s.load.wait_admitting(6)
    fault_cluster.webhook.refuse()
    refused = []
    try:
        for i in range(10):
            ns = s.load.namespaces[i % 2]
            for create, name in ((s.load.pod, f"p{i}"), (s.load.job, f"j{i}")):
                try:
                    create(ns, name)
                except ApiException as exc:
                    refused.append(exc)
        # Not sent to the webhook: an unlabelled pod, and a labelled one in kube-system.
        plain = queued_pod("plain")
        del plain["metadata"]["labels"]
        core.create_namespaced_pod(s.load.namespaces[0], plain)
        core.create_namespaced_pod("kube-system", queued_pod(f"{s.load.tag}-system"))
    finally:
        fault_cluster.webhook.accept()
    assert len(refused) == 20, [str(e)[:200] for e in refused]
    assert all(e.status == 500 and "failed calling webhook" in str(e.body) for e in refused)
    assert s.load.created == 60
    try:
        for name, ns in (("plain", s.load.namespaces[0]), (f"{s.load.tag}-system", "kube-system")):
            wait_for(
                lambda name=name, ns=ns: _phase(core, ns, name) == "Succeeded",
                timeout=60,
                what=f"pod {ns}/{name} to run while the webhook was down",
            )
            assert not core.read_namespaced_pod(name, ns).spec.scheduling_gates
        # The webhook answers again: the same pods and Jobs go through it.
        for i in range(10):
            ns = s.load.namespaces[i % 2]
            s.load.pod(ns, f"p{i}")
            s.load.job(ns, f"j{i}")
        result = s.end(expected=80)
        assert (result.ungated, result.unsuspended) == (10, 10)
    finally:
        with contextlib.suppress(ApiException):
            core.delete_namespaced_pod(f"{s.load.tag}-system", "kube-system")


def _phase(core: client.CoreV1Api, namespace: str, name: str) -> str:
    return str(core.read_namespaced_pod(name, namespace).status.phase)
