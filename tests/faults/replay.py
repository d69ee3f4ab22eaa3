"""The invariants of a fault scenario, checked on its exact history (tests/faults/recorder.py):
every change, in etcd's revision order, replayed one by one.

- No quota over-use at any moment: after every change, the quota held in each ClusterQueue
  (the `status.admission` of its Workloads with `QuotaReserved=True` that are not finished,
  Kueue's rule) is within its nominal quota plus what it may borrow, and the cohort's
  within its total.
- No admission lost, none written twice: a Workload loses its reservation only by
  finishing or after it was evicted (its owner then releases it); a Workload already
  holding quota is never admitted again over it (its admission never changes while it
  holds quota, but to shrink, as a partial preemption does).
- One Workload per Job and per pod at any moment (a second one would be counted twice).
- No pod ungated and no Job unsuspended without quota: when the scheduling gate leaves a
  pod, or `spec.suspend` turns false on a Job, its Workload holds quota at that revision.
- At the end, every Workload is finished, holds quota, or is pending with a reason
  (`QuotaReserved=False` with a message).
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from api.quantities import parse_quantity
from api.workload_status import condition, has_quota_reservation, is_evicted, is_finished
from tests.faults.recorder import Change

__all__ = ["Quotas", "Replay", "replay"]

GATE = "kueue.x-k8s.io/admission"


@dataclass(frozen=True)
class Quotas:
    """The scenario's quota: per ClusterQueue its nominal cpu and its borrowing limit (None:
    up to the cohort's total), all in one cohort (milli-cpu)."""

    nominal: dict[str, int]
    borrowing_limit: dict[str, int | None]

    @property
    def cohort(self) -> int:
        return sum(self.nominal.values())

    def limit(self, cluster_queue: str) -> int:
        borrowing = self.borrowing_limit.get(cluster_queue)
        nominal = self.nominal[cluster_queue]
        return self.cohort if borrowing is None else min(self.cohort, nominal + borrowing)


def _usage(obj: dict[str, Any]) -> tuple[str, int]:
    """The ClusterQueue and milli-cpu a Workload's admission holds."""
    admission = (obj.get("status") or {}).get("admission") or {}
    cpu = 0
    for assignment in admission.get("podSetAssignments") or ():
        usage = (assignment.get("resourceUsage") or {}).get("cpu")
        if usage is not None:
            cpu += parse_quantity(usage).milli
    return str(admission.get("clusterQueue") or ""), cpu


def _holds(obj: dict[str, Any] | None) -> bool:
    return obj is not None and has_quota_reservation(obj) and not is_finished(obj)


def _owner_uid(obj: dict[str, Any], kind: str) -> str | None:
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or ():
        if ref.get("kind") == kind:
            return str(ref.get("uid"))
    return None


def _owner_uids(obj: dict[str, Any] | None, kind: str) -> set[str]:
    refs = ((obj or {}).get("metadata") or {}).get("ownerReferences") or ()
    return {str(ref.get("uid")) for ref in refs if ref.get("kind") == kind}


def _gated(pod: dict[str, Any] | None) -> bool:
    return pod is not None and any(
        g.get("name") == GATE for g in (pod.get("spec") or {}).get("schedulingGates") or ()
    )


def _suspended(job: dict[str, Any] | None) -> bool:
    return job is not None and bool((job.get("spec") or {}).get("suspend"))


# A kind quotagate holds back until its Workload (the one it owns) is admitted: how it is
# held back, and what letting it go is called.
_HELD_BACK = {"Pod": (_gated, "ungated"), "Job": (_suspended, "unsuspended")}


@dataclass
class Replay:
    """What the replay found: the violations (empty: every invariant held) and counts."""

    violations: list[str] = field(default_factory=list)
    admissions: int = 0
    evictions: int = 0
    released: dict[str, int] = field(default_factory=lambda: {"Pod": 0, "Job": 0})
    workloads: dict[str, dict[str, Any]] = field(default_factory=dict)  # the last state
    peak: dict[str, int] = field(default_factory=dict)  # most quota held, per ClusterQueue

    @property
    def ungated(self) -> int:
        return self.released["Pod"]

    @property
    def unsuspended(self) -> int:
        return self.released["Job"]

    def fail(self, text: str) -> None:
        if len(self.violations) < 50:
            self.violations.append(text)

    def end_states(self) -> dict[str, int]:
        """How the Workloads ended: finished, holding quota, pending with a reason."""
        ends: dict[str, int] = defaultdict(int)
        for key, obj in self.workloads.items():
            if is_finished(obj):
                ends["finished"] += 1
            elif has_quota_reservation(obj):
                ends["holding quota"] += 1
            else:
                reserved = condition(obj, "QuotaReserved") or {}
                if reserved.get("status") == "False" and reserved.get("message"):
                    ends["pending with a reason"] += 1
                else:
                    ends["pending without a reason"] += 1
                    self.fail(f"{key} ended pending without a reason: {reserved or 'no condition'}")
        return dict(ends)


def replay(changes: list[Change], quotas: Quotas) -> Replay:
    """Replay `changes` (any order: sorted by revision here) and check every invariant."""
    result = Replay()
    workloads: dict[str, dict[str, Any]] = {}
    others: dict[str, dict[str, dict[str, Any]]] = {kind: {} for kind in _HELD_BACK}
    held: dict[str, int] = defaultdict(int)  # milli-cpu held per ClusterQueue
    evicted_while_held: set[str] = set()  # Workload uids evicted while holding quota
    owners: dict[tuple[str, str], set[str]] = defaultdict(set)  # (kind, owner uid) → Workloads
    owned_by: dict[tuple[str, str], set[str]] = defaultdict(set)  # the same, by every owner
    for change in sorted(changes, key=lambda c: c.revision):
        key = f"{change.namespace}/{change.name}"
        at = f"at revision {change.revision}"
        if change.kind == "Workload":
            before, after = workloads.get(key), change.obj
            if _holds(before):
                cq, cpu = _usage(before)  # type: ignore[arg-type]
                held[cq] -= cpu
            if after is None:
                workloads.pop(key, None)
            else:
                workloads[key] = after
            uid = str(((after or before) or {}).get("metadata", {}).get("uid"))
            for kind in _HELD_BACK:
                for owner in _owner_uids(before, kind):
                    owned_by[(kind, owner)].discard(key)
                for owner in _owner_uids(after, kind):
                    owned_by[(kind, owner)].add(key)
            _check_transition(result, key, at, before, after, evicted_while_held, uid)
            if _holds(after):
                cq, cpu = _usage(after)  # type: ignore[arg-type]
                held[cq] += cpu
                result.peak[cq] = max(result.peak.get(cq, 0), held[cq])
                if cq not in quotas.nominal:
                    result.fail(f"{key} admitted to unknown ClusterQueue {cq!r} {at}")
                elif held[cq] > quotas.limit(cq):
                    result.fail(
                        f"over-use {at}: ClusterQueue {cq} holds {held[cq]}m cpu, its limit is "
                        f"{quotas.limit(cq)}m (after {key})"
                    )
                if sum(held.values()) > quotas.cohort:
                    result.fail(
                        f"over-use {at}: the cohort holds {sum(held.values())}m cpu of "
                        f"{quotas.cohort}m (after {key})"
                    )
            for kind in ("Job", "Pod"):
                for obj, present in ((before, False), (after, True)):
                    owner = obj and _owner_uid(obj, kind)
                    if owner:
                        (owners[(kind, owner)].add if present else owners[(kind, owner)].discard)(
                            key
                        )
                owner = after and _owner_uid(after, kind)
                if owner and len(owners[(kind, owner)]) > 1:
                    result.fail(
                        f"{kind} {owner} has {len(owners[(kind, owner)])} Workloads {at}: "
                        f"{sorted(owners[(kind, owner)])}"
                    )
        else:
            held_back, released = _HELD_BACK[change.kind]
            objects = others[change.kind]
            before = objects.get(key)
            if change.obj is None:
                objects.pop(key, None)
                continue
            objects[key] = change.obj
            if held_back(before) and not held_back(change.obj):
                result.released[change.kind] += 1
                uid = str((change.obj.get("metadata") or {}).get("uid"))
                own = owned_by.get((change.kind, uid)) or set()
                if not any(_holds(workloads.get(k)) for k in own):
                    result.fail(f"{change.kind} {key} {released} without quota {at}")
    result.workloads = workloads
    for key, obj in workloads.items():
        if is_evicted(obj) and has_quota_reservation(obj) and not is_finished(obj):
            result.fail(f"{key} ended evicted and still holding quota")
    return result


def _check_transition(
    result: Replay,
    key: str,
    at: str,
    before: dict[str, Any] | None,
    after: dict[str, Any] | None,
    evicted_while_held: set[str],
    uid: str,
) -> None:
    """Admissions and releases of one Workload (see the module docstring)."""
    was, now = _holds(before), _holds(after)
    if after is not None and was and is_evicted(after):
        evicted_while_held.add(uid)
    if not was and now:
        result.admissions += 1
    elif was and not now:
        if after is None or is_finished(after):
            return
        if uid in evicted_while_held:
            result.evictions += 1
            evicted_while_held.discard(uid)
        else:
            result.fail(f"admission of {key} lost {at}: quota released without an eviction")
    elif was and now:
        old = ((before or {}).get("status") or {}).get("admission")
        new = ((after or {}).get("status") or {}).get("admission")
        if old != new and not _shrunk(old, new):
            result.fail(f"{key} admitted again over its admission {at}: {old} -> {new}")


def _shrunk(old: Any, new: Any) -> bool:
    """A partial preemption: the same admission with fewer pods in a pod set."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return False
    if old.get("clusterQueue") != new.get("clusterQueue"):
        return False
    before = {a.get("name"): a for a in old.get("podSetAssignments") or ()}
    after = {a.get("name"): a for a in new.get("podSetAssignments") or ()}
    return before.keys() == after.keys() and all(
        (after[n].get("count") or 0) <= (before[n].get("count") or 0) for n in before
    )
