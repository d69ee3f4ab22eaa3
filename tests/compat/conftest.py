"""The compatibility suite: quotagate on the real API server, driven only through Kueue's
client behaviours (tools/bench/kueue_clients.py, each reproduced from Kueue's code).
It shares the integration fixtures: a real etcd + kube-apiserver, the CRDs, and one
`quotagate run` per test module."""

from __future__ import annotations

from tests.integration.conftest import controller, kueue, system_namespace

__all__ = ["controller", "kueue", "system_namespace"]
