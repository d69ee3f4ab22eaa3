"""`kubectl quotagate describe workload`: queue position, priority and its origin,
preemptibility and its source, cost, admission, whether its pods are ready (the PodsReady
condition), conditions, eviction history, and for a pending Workload the exact reason. Pure: works on the live objects and the engine.

The position is the Workload's place in its ClusterQueue's pending queue as the engine
orders it (priority, then preemption cost, then creation time). The pending reason is
the `QuotaReserved=False` message the controller wrote; when there is none yet, the
engine is asked (`plan` over the same objects), so the answer follows the same rules.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from api.constants import ADMISSION_GATED_BY_ANNOTATION, EXPECTED_RUNTIME_ANNOTATION
from api.quantities import Format, Quantity
from api.workload_status import rfc3339
from controller.core.forecast import forecast
from controller.core.model.workloads import WorkloadKey, workload_key
from controller.core.pending import why_pending
from controller.core.plan import plan
from controller.core.state import ClusterState
from controller.core.tas.encoding import describe as describe_topology
from controller.kubectl.printing import age, format_table, human_duration, one_line
from controller.kubectl.snapshot import Snapshot
from controller.kubectl.workload_view import (
    admission_of,
    condition,
    describe_preemptibility_source,
    describe_priority,
    engine_workload,
    is_pending,
    pods_ready_of,
    status_of,
)

__all__ = ["DEFAULT_ESTIMATE_CYCLES", "describe_workload", "format_quantity", "render_description"]

DEFAULT_ESTIMATE_CYCLES = 5000
"""Simulated admission cycles the estimate may run (`--estimate-cycles`); about 10 s at
worst on 2 cores (docs/after-admission.md)."""

NONE = "<none>"
_MEBI = 1024 * 1024


def format_quantity(milli: int) -> str:
    """Kubernetes' canonical text; byte-sized values (whole MiB multiples) in binary SI."""
    units, rest = divmod(milli, 1000)
    binary = rest == 0 and units >= _MEBI and units % 1024 == 0
    return str(Quantity(milli, Format.BINARY_SI if binary else Format.DECIMAL_SI))


def describe_workload(
    obj: Mapping[str, Any],
    snapshot: Snapshot,
    now: float,
    estimate_cycles: int = DEFAULT_ESTIMATE_CYCLES,
) -> dict[str, Any]:
    """Everything `describe` prints, as plain data (also the `-o json|yaml` output)."""
    meta, spec, status = obj.get("metadata") or {}, obj.get("spec") or {}, obj.get("status") or {}
    key = workload_key(str(meta.get("namespace")), str(meta.get("name")))
    state = snapshot.state()
    lq = state.objects.local_queues.get(f"{meta.get('namespace')}/{spec.get('queueName')}")
    admission = admission_of(obj)
    return {
        "name": meta.get("name"),
        "namespace": meta.get("namespace"),
        "localQueue": spec.get("queueName"),
        "clusterQueue": (admission or {}).get("clusterQueue") or (lq.cluster_queue if lq else None),
        "status": status_of(obj),
        "position": _position(state, key),
        "priority": _priority(obj, snapshot),
        "preemptibility": _preemptibility(status, state, key),
        "preemptionCost": status.get("preemptionCost"),
        "created": meta.get("creationTimestamp"),
        "podSets": _pod_sets(obj),
        "admission": _admission(admission),
        "podsReady": pods_ready_of(obj),
        "admissionGatedBy": (meta.get("annotations") or {}).get(ADMISSION_GATED_BY_ANNOTATION),
        "admissionChecks": [
            {
                "name": c.get("name"),
                "state": c.get("state"),
                "retryCount": c.get("retryCount", 0),
                "message": c.get("message", ""),
            }
            for c in status.get("admissionChecks") or ()
        ],
        "minimumRuntime": _minimum_runtime(state, key, now),
        "pendingReason": _pending_reason(obj, key, snapshot, state, now),
        "estimatedAdmission": _estimate(obj, key, snapshot, state, now, estimate_cycles),
        "engineSettings": snapshot.settings,
        "conditions": [
            {field: c.get(field) for field in ("type", "status", "reason", "message")}
            | {"lastTransitionTime": c.get("lastTransitionTime")}
            for c in status.get("conditions") or ()
        ],
        "evictions": [
            {
                "reason": e.get("reason"),
                "underlyingCause": e.get("underlyingCause") or "",
                "count": e.get("count", 0),
            }
            for e in (status.get("schedulingStats") or {}).get("evictions") or ()
        ],
    }


def _position(state: ClusterState, key: WorkloadKey) -> dict[str, Any] | None:
    """1-based place among the pending Workloads of the ClusterQueue and of the LocalQueue."""
    cluster_queue = state.queues.queued_in(key)
    queue = state.queues.get(cluster_queue) if cluster_queue else None
    if queue is None or key not in state.cache.workloads:
        return None
    ordered = [item[4] for item in queue.ordered()]
    workload = state.cache.workloads[key]
    same_lq = [
        k
        for k in ordered
        if state.cache.workloads[k].namespace == workload.namespace
        and state.cache.workloads[k].queue_name == workload.queue_name
    ]
    return {
        "clusterQueue": cluster_queue,
        "position": ordered.index(key) + 1,
        "pending": len(ordered),
        "localQueuePosition": same_lq.index(key) + 1,
        "localQueuePending": len(same_lq),
    }


def _priority(obj: Mapping[str, Any], snapshot: Snapshot) -> dict[str, Any]:
    workload = engine_workload(obj)
    if workload is None:
        value = (obj.get("spec") or {}).get("priority")
        return {"value": value, "source": "unknown", "text": f"{value} (Workload unreadable)"}
    resolved = snapshot.priority_classes().resolve(workload)
    return {
        "value": resolved.value,
        "source": resolved.source,
        "text": describe_priority(obj, resolved),
    }


def _preemptibility(
    status: Mapping[str, Any], state: ClusterState, key: WorkloadKey
) -> dict[str, Any]:
    written = status.get("resolvedPreemptibility") or {}
    if written.get("value"):
        value, source, message = (
            written["value"],
            str(written.get("source")),
            written.get("message"),
        )
        origin = "from status.resolvedPreemptibility"
    elif key in state.cache.records:
        resolution = state.cache.resolution(key)
        value, source = str(resolution.value), str(resolution.source)
        message = "; ".join(resolution.problems) or None
        origin = "computed here: the controller has not written it yet"
    else:
        return {"value": None, "source": None, "text": "<unknown> (Workload unreadable)"}
    text = f"{value} (source: {describe_preemptibility_source(source)}; {origin})"
    if message:
        text += f"; {message}"
    return {"value": value, "source": source, "text": text}


def _pod_sets(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    workload = engine_workload(obj)
    if workload is None:
        return []
    return [
        {
            "name": ps.name,
            "count": ps.count,
            **({"minCount": ps.min_count} if ps.min_count is not None else {}),
            "requests": {r: format_quantity(v) for r, v in sorted(ps.requests.items())},
        }
        for ps in workload.pod_sets
    ]


def _admission(admission: Mapping[str, Any] | None) -> dict[str, Any] | None:
    if not admission:
        return None
    return {
        "clusterQueue": admission.get("clusterQueue"),
        "podSets": [
            {
                "name": a.get("name", "main"),
                "count": a.get("count"),
                "flavors": dict(a.get("flavors") or {}),
                "resourceUsage": dict(a.get("resourceUsage") or {}),
                **(
                    {"topology": describe_topology(a["topologyAssignment"])}
                    if a.get("topologyAssignment")
                    else {}
                ),
            }
            for a in admission.get("podSetAssignments") or ()
        ],
    }


def _pending_reason(
    obj: Mapping[str, Any], key: WorkloadKey, snapshot: Snapshot, state: ClusterState, now: float
) -> dict[str, Any] | None:
    if not is_pending(obj):
        return None
    written = condition(obj, "QuotaReserved")
    if written is not None and written.get("status") == "False" and written.get("message"):
        return {
            "reason": written.get("reason"),
            "message": one_line(written["message"]),
            "source": "controller",
        }
    if key not in state.cache.workloads:
        return {"reason": None, "message": "the engine cannot read this Workload", "source": "-"}
    return {
        "reason": None,
        "message": _engine_reason(key, snapshot, state, now),
        "source": "engine",
    }


def _engine_reason(key: WorkloadKey, snapshot: Snapshot, state: ClusterState, now: float) -> str:
    result = plan(snapshot.objects, now, state=snapshot.new_state())
    for admitted in result["admitted"]:
        if admitted["workload"] == key:
            return (
                f"fits now in ClusterQueue {admitted['clusterQueue']}; "
                "the controller has not admitted it yet (is it running?)"
            )
    for preempting in result["preempting"]:
        if preempting["workload"] == key:
            victims = ", ".join(v["workload"] for v in preempting["victims"])
            return f"would be admitted after preempting {victims}"
    for pending in result["pending"]:
        if pending["workload"] == key:
            return str(pending["reason"])
    return why_pending(state, key)


# -- text ---------------------------------------------------------------------------------


def render_description(d: Mapping[str, Any], now: float) -> str:
    queue = d["localQueue"] or NONE
    if d["clusterQueue"]:
        queue += f" (ClusterQueue {d['clusterQueue']})"
    cost = d["preemptionCost"]
    lines = [
        _field("Name", d["name"]),
        _field("Namespace", d["namespace"]),
        _field("Queue", queue),
        _field("Status", d["status"]),
        _field("Position", _position_text(d)),
        _field("Priority", d["priority"]["text"]),
        _field("Preemptibility", d["preemptibility"]["text"]),
        _field("Preemption cost", "0 (unset)" if cost is None else cost),
        _field("Created", f"{d['created']} ({age(d['created'], now)} ago)"),
        "Pod sets:",
        *_indent(_pod_sets_table(d["podSets"])),
        *_admission_lines(d["admission"]),
    ]
    if d["admission"] is not None:
        lines.append(_field("Pods ready", _pods_ready_text(d["podsReady"], now)))
    if d["admissionGatedBy"]:
        lines.append(_field("Admission gated by", d["admissionGatedBy"]))
    if d["admissionChecks"]:
        lines += ["Admission checks:", *_indent(_checks_table(d["admissionChecks"]))]
    if d["minimumRuntime"] is not None:
        lines.append(_field("Preemptible from", _minimum_runtime_text(d["minimumRuntime"])))
    if d["pendingReason"]:
        reason = d["pendingReason"]
        suffix = f" ({reason['reason']})" if reason.get("reason") else ""
        if reason["source"] == "engine":
            suffix = " (computed by the engine; the controller has written no reason yet)"
        lines.append(_field("Pending reason", reason["message"] + suffix))
    if d["estimatedAdmission"] is not None:
        lines += _estimate_lines(d["estimatedAdmission"])
    if d["pendingReason"] or d["estimatedAdmission"] is not None:
        lines.append(_field("Engine settings", d["engineSettings"]))
    lines += ["Conditions:", *_indent(_conditions_table(d["conditions"], now))]
    lines += ["Eviction history:", *_indent(_evictions_table(d["evictions"]))]
    return "\n".join(lines)


def _checks_table(checks: list[Mapping[str, Any]]) -> str:
    """The Workload's admission checks: quota is reserved, the job runs once all are Ready."""
    rows = [
        (str(c["name"]), str(c["state"]), str(c["retryCount"]), str(c["message"] or "-"))
        for c in checks
    ]
    return format_table(["NAME", "STATE", "RETRIES", "MESSAGE"], rows)


def _field(label: str, value: Any) -> str:
    return f"{label + ':':<17} {value}"


def _indent(text: str) -> list[str]:
    return ["  " + line for line in text.splitlines()]


def _position_text(d: Mapping[str, Any]) -> str:
    position = d["position"]
    if position is None:
        return f"{NONE} (not waiting in a queue)" if d["pendingReason"] is None else NONE
    return (
        f"{position['position']} of {position['pending']} pending in ClusterQueue "
        f"{position['clusterQueue']}; {position['localQueuePosition']} of "
        f"{position['localQueuePending']} in LocalQueue {d['namespace']}/{d['localQueue']}"
    )


def _pod_sets_table(pod_sets: list[Mapping[str, Any]]) -> str:
    if not pod_sets:
        return NONE
    rows = [
        [
            str(ps["name"]),
            str(ps["count"]),
            ", ".join(f"{r}={v}" for r, v in ps["requests"].items()) or NONE,
        ]
        for ps in pod_sets
    ]
    if not any("minCount" in ps for ps in pod_sets):
        return format_table(["NAME", "COUNT", "REQUESTS PER POD"], rows)
    for row, ps in zip(rows, pod_sets, strict=True):  # partial admission
        row.insert(2, str(ps.get("minCount", "-")))
    return format_table(["NAME", "COUNT", "MIN COUNT", "REQUESTS PER POD"], rows)


def _admission_lines(admission: Mapping[str, Any] | None) -> list[str]:
    if admission is None:
        return [_field("Admission", NONE)]
    rows = [
        [
            str(a["name"]),
            str(a["count"] if a["count"] is not None else "-"),
            ", ".join(f"{r}={f}" for r, f in sorted(a["flavors"].items())) or NONE,
            ", ".join(f"{r}={v}" for r, v in sorted(a["resourceUsage"].items())) or NONE,
        ]
        for a in admission["podSets"]
    ]
    domains = [f"  {a['name']}: {a['topology']}" for a in admission["podSets"] if "topology" in a]
    return [
        "Admission:",
        f"  ClusterQueue: {admission['clusterQueue']}",
        *_indent(format_table(["PODSET", "COUNT", "FLAVORS", "USAGE"], rows)),
        *(["Topology domains:", *domains] if domains else []),
    ]


def _estimate(
    obj: Mapping[str, Any],
    key: WorkloadKey,
    snapshot: Snapshot,
    state: ClusterState,
    now: float,
    cycles: int,
) -> dict[str, Any] | None:
    """The admission wait-time estimate of a pending Workload (controller/core/forecast.py),
    with the assumptions it rests on (None: not pending, or `cycles` is 0)."""
    if cycles <= 0 or not is_pending(obj) or key not in state.cache.workloads:
        return None
    answer = forecast(snapshot.state(), key, now, max_cycles=cycles)
    return {
        "at": None if answer.admitted_at is None else rfc3339(answer.admitted_at),
        "inSeconds": None if answer.admitted_at is None else round(answer.admitted_at - now),
        "notBefore": None if answer.not_before is None else rfc3339(answer.not_before),
        "clusterQueue": answer.cluster_queue,
        "reason": answer.reason,
        "assumptions": {
            "stateAt": rfc3339(now),
            "runtimesFrom": dict(sorted(answer.runtime_sources.items())),
            "unknownRuntime": list(answer.unknown),
            "invalidExpectedRuntime": dict(sorted(answer.invalid.items())),
            "admittedBefore": answer.admitted_before,
            "preemptions": answer.preemptions,
        },
    }


def _estimate_lines(d: Mapping[str, Any]) -> list[str]:
    if d["at"] is None:
        head = _field("Estimated admission", f"none: {d['reason']}")
    else:
        head = _field(
            "Estimated admission",
            f"{d['at']} (in {human_duration(d['inSeconds'])}, ClusterQueue {d['clusterQueue']})",
        )
    a = d["assumptions"]
    sources = ", ".join(f"{n} from {source}" for source, n in a["runtimesFrom"].items()) or NONE
    lines = [
        head,
        "  Assuming:",
        f"    - nothing new arrives after {a['stateAt']} and no spec changes",
        f"    - Workloads end when their expected runtime is over (runtimes known: {sources})",
    ]
    if a["unknownRuntime"]:
        names = ", ".join(a["unknownRuntime"][:3]) + (" …" if len(a["unknownRuntime"]) > 3 else "")
        lines.append(
            f"    - {len(a['unknownRuntime'])} Workload(s) with no known runtime run beyond it "
            f"({names})"
        )
    for name, value in a["invalidExpectedRuntime"].items():
        lines.append(
            f"    - {name}: {EXPECTED_RUNTIME_ANNOTATION}={value!r} is not a whole number of "
            "seconds (ignored)"
        )
    lines.append(
        f"    - {a['admittedBefore']} Workload(s) admitted before it and {a['preemptions']} "
        "preemption(s), as the engine decides them; victims release their quota at once"
    )
    return lines


def _minimum_runtime(state: ClusterState, key: WorkloadKey, now: float) -> dict[str, Any] | None:
    """When an admitted Workload becomes a preemption candidate under its ClusterQueue's
    minimum runtime (None: it holds no quota, or its queue sets none)."""
    record = state.cache.records.get(key)
    if record is None or not record.holds_quota:
        return None
    seconds = state.objects.cluster_queues[record.cluster_queue].minimum_runtime_seconds
    if not seconds:
        return None
    reserved = record.workload.quota_reserved_at
    until = (now if reserved is None else reserved) + seconds
    return {
        "clusterQueue": record.cluster_queue,
        "seconds": seconds,
        "at": rfc3339(until),
        "inSeconds": max(0, round(until - now)),
    }


def _minimum_runtime_text(d: Mapping[str, Any]) -> str:
    rule = f"minimum runtime {d['seconds']}s of ClusterQueue {d['clusterQueue']}"
    if d["inSeconds"] <= 0:
        return f"now (it has run its {rule})"
    return (
        f"{d['at']} (in {human_duration(d['inSeconds'])}; {rule}; reclaiming quota its "
        "queue borrowed may preempt it sooner)"
    )


def _pods_ready_text(pods_ready: Mapping[str, Any] | None, now: float) -> str:
    if pods_ready is None:
        return f"{NONE} (no PodsReady condition: waitForPodsReady is off)"
    since = pods_ready["since"]
    text = f"{pods_ready['status']} ({pods_ready['reason']}) since {since} ({age(since, now)} ago)"
    return f"{text}: {one_line(pods_ready['message'])}" if pods_ready["message"] else text


def _conditions_table(conditions: list[Mapping[str, Any]], now: float) -> str:
    if not conditions:
        return NONE
    rows = [
        [
            str(c["type"]),
            str(c["status"]),
            str(c["reason"] or ""),
            age(c["lastTransitionTime"], now),
            one_line(c["message"] or ""),
        ]
        for c in conditions
    ]
    return format_table(["TYPE", "STATUS", "REASON", "AGE", "MESSAGE"], rows)


def _evictions_table(evictions: list[Mapping[str, Any]]) -> str:
    if not evictions:
        return NONE
    rows = [[str(e["reason"]), e["underlyingCause"] or NONE, str(e["count"])] for e in evictions]
    return format_table(["REASON", "UNDERLYING CAUSE", "COUNT"], rows)
