"""The live cluster as the engine sees it: converted objects and a `ClusterState`. Pure.

An object the engine cannot read is skipped with a warning (the controller ignores it
too, reporting it in an Event), so one bad object never hides the answer for the rest.

The engine decides as the controller's configuration says (fair sharing, admission fair
sharing, waitForPodsReady, preemptibility). The plugin is given that file with `--config`;
without it, fair sharing is taken as on when the controller has written a
`status.fairSharing` on a ClusterQueue (it does so only while fair sharing is on, as
Kueue does), with Kueue's default strategies, and everything else as the defaults.
`settings` says which, so an answer never rests on an unstated assumption.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from controller.config import ControllerConfig, FairSharingConfig, configure_state
from controller.core.model.from_api import CoreObject, InvalidObject, convert, stand_in
from controller.core.model.nodes import node_from_api, pod_usage
from controller.core.model.priorities import PriorityClass, PriorityClasses, WorkloadPriorityClass
from controller.core.state import ClusterState

__all__ = ["Snapshot"]


@dataclass(slots=True)
class Snapshot:
    """Converted engine objects (definitions first, as listed) and what was skipped."""

    objects: list[CoreObject] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    # The pods bound to a node (not TAS pods): (key, node, requests), for the TAS view.
    pods: list[tuple[str, str, dict[str, int]]] = field(default_factory=list)
    config: ControllerConfig = field(default_factory=ControllerConfig)
    settings: str = "the controller's defaults (no --config)"
    """Where the engine's settings come from, said with every answer."""

    @classmethod
    def convert(
        cls,
        items: Iterable[dict[str, Any]],
        warnings: Iterable[str] = (),
        config: ControllerConfig | None = None,
        config_path: str | None = None,
    ) -> Snapshot:
        """Convert the live objects; with `config` (read from `config_path`) the engine
        decides as it says, else as inferred from the ClusterQueues' status."""
        snapshot = cls(warnings=list(warnings))
        shares_written = False
        for item in items:
            if item.get("kind") == "ClusterQueue" and (item.get("status") or {}).get("fairSharing"):
                shares_written = True
            try:
                if item.get("kind") == "Pod":
                    snapshot._add_pod(item)
                    continue
                snapshot.objects.append(
                    node_from_api(item) if item.get("kind") == "Node" else convert(item)
                )
            except InvalidObject as exc:
                # As the controller does: a queue, flavor or Cohort that cannot be read
                # stands in inactive; anything else is left out, with a warning.
                placeholder = stand_in(item, "; ".join(f"{p}: {m}" for p, m in exc.problems))
                if placeholder is not None:
                    snapshot.objects.append(placeholder)
                snapshot.warnings.append(f"invalid {exc}")
        if config is not None:
            snapshot.config, snapshot.settings = config, f"--config {config_path}"
        elif shares_written:
            snapshot.config = ControllerConfig.model_validate({}).model_copy(
                update={"fair_sharing": FairSharingConfig()}
            )
            snapshot.settings = (
                "fair sharing on (the ClusterQueues' status has shares), Kueue's default "
                "preemption strategies; the rest the defaults (no --config)"
            )
        return snapshot

    def _add_pod(self, item: dict[str, Any]) -> None:
        usage = pod_usage(item)
        if usage is not None:
            meta = item.get("metadata") or {}
            self.pods.append((f"{meta.get('namespace')}/{meta.get('name')}", *usage))

    def new_state(self) -> ClusterState:
        """An engine state configured as the controller is, holding no object yet but the
        usage of the pods bound to nodes (the TAS view's)."""
        state = configure_state(self.config, ClusterState())
        for key, node, requests in self.pods:
            state.set_pod(key, node, requests)
        return state

    def state(self) -> ClusterState:
        """A fresh engine state holding every object (Workloads keep their admission)."""
        state = self.new_state()
        for obj in self.objects:
            state.apply(obj)
        return state

    def priority_classes(self) -> PriorityClasses:
        classes = PriorityClasses()
        for obj in self.objects:
            if isinstance(obj, WorkloadPriorityClass):
                classes.set_workload_priority_class(obj)
            elif isinstance(obj, PriorityClass):
                classes.set_priority_class(obj)
        return classes
