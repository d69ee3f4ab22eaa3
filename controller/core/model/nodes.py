"""Nodes and pods, as the TAS view reads them (pure: API dicts in, the engine's objects
out): a node's labels, allocatable capacity, readiness, cordon and taints; what a running
pod takes from its node."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import WORKLOAD_ANNOTATION
from controller.core.model.api_fields import FieldReader
from controller.core.model.flavors import Taint
from controller.core.model.from_api import InvalidObject, pod_spec_requests
from controller.core.model.topology import Node, is_tas_pod
from controller.core.model.workloads import WorkloadKey

__all__ = ["node_from_api", "pod_usage", "running_tas_pod"]

_TERMINAL = frozenset({"Succeeded", "Failed"})


def node_from_api(body: Mapping[str, Any]) -> Node:
    """A Node; ready when its Ready condition is True, else since when not (raises
    InvalidObject)."""
    r = FieldReader()
    meta = r.obj(body.get("metadata"), "metadata")
    spec = r.obj(body.get("spec"), "spec")
    status = r.obj(body.get("status"), "status")
    condition = next(
        (
            c
            for c in r.seq(status.get("conditions"), "status.conditions")
            if isinstance(c, Mapping) and c.get("type") == "Ready"
        ),
        None,
    )
    ready = condition is not None and condition.get("status") == "True"
    since = None
    if condition is not None and not ready:
        since = r.time(condition.get("lastTransitionTime"), "status.conditions[Ready]")
    taints = tuple(
        Taint(str(t.get("key") or ""), str(t.get("value") or ""), str(t.get("effect") or ""))
        for t in r.seq(spec.get("taints"), "spec.taints")
        if isinstance(t, Mapping)
    )
    node = Node(
        r.text(meta.get("name"), "metadata.name"),
        r.labels(meta.get("labels"), "metadata.labels"),
        r.quantities(status.get("allocatable"), "status.allocatable"),
        ready,
        spec.get("unschedulable") is True,
        taints,
        since,
    )
    if r.problems:
        raise InvalidObject("Node", str(meta.get("name") or "?"), r.problems)
    return node


def pod_usage(body: Mapping[str, Any]) -> tuple[str, dict[str, int]] | None:
    """The node a pod runs on and what it requests there, or None when it takes nothing
    the TAS view counts: not bound, finished, being a TAS pod (its admission counts it)
    (raises InvalidObject)."""
    spec = body.get("spec") or {}
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = (body.get("status") or {}).get("phase")
    if not node or phase in _TERMINAL or is_tas_pod(body):
        return None
    r = FieldReader()
    requests = pod_spec_requests(r, spec, "spec")
    if r.problems:
        meta = body.get("metadata") or {}
        raise InvalidObject("Pod", f"{meta.get('namespace')}/{meta.get('name')}", r.problems)
    return str(node), requests


def running_tas_pod(body: Mapping[str, Any]) -> tuple[str, WorkloadKey] | None:
    """The node and Workload of a TAS pod still running there (bound, neither finished nor
    being deleted: Kueue's progressing pod), or None."""
    meta = body.get("metadata") or {}
    spec = body.get("spec") or {}
    workload = (meta.get("annotations") or {}).get(WORKLOAD_ANNOTATION)
    node = spec.get("nodeName") if isinstance(spec, Mapping) else None
    phase = (body.get("status") or {}).get("phase")
    if not node or not workload or phase in _TERMINAL or meta.get("deletionTimestamp"):
        return None
    if not is_tas_pod(body):
        return None
    return str(node), WorkloadKey(f"{meta.get('namespace')}/{workload}")
