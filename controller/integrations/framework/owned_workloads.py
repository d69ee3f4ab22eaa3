"""Which Workloads each object owns, by the object's uid, learnt from Workload events: Kueue
finds a job's (or a pod's) Workloads by their owner reference, whatever their names, so a
Workload made by Kueue or by an older quotagate is adopted rather than made again. A lookup
reads the Workloads from the controller's view and forgets the keys of those gone or no
longer owned.
"""

from __future__ import annotations

from typing import Any

from controller.integrations.host import ControllerView

__all__ = ["OwnedWorkloads"]


class OwnedWorkloads:
    def __init__(self, view: ControllerView) -> None:
        self.view = view
        self.keys: dict[str, set[str]] = {}  # owner uid → keys of Workloads it owns

    def add(self, uid: str, key: str) -> None:
        self.keys.setdefault(uid, set()).add(key)

    def forget(self, uid: str) -> None:
        """The owner is gone."""
        self.keys.pop(uid, None)

    def of(self, uid: str) -> dict[str, dict[str, Any]]:
        """The Workloads known to be owned by the object of `uid`, by key."""
        keys = self.keys.get(uid)
        if not keys:
            return {}
        found = {}
        for key in list(keys):
            workload = self.view.workload(key)
            refs = ((workload or {}).get("metadata") or {}).get("ownerReferences") or ()
            if workload is not None and any(str(o.get("uid")) == uid for o in refs):
                found[key] = workload
            else:
                keys.discard(key)
        if not keys:
            self.keys.pop(uid, None)
        return found
