"""Multi-layer slices (Kueue's `TASMultiLayerTopology`, on by default): a pod set's slice
layers below the outermost one (`podsetSliceRequiredTopologyConstraints[1:]`) — each at a
lower level than the layer above, its size dividing that layer's — group the pods of every
level from the layer above down to its own in its size (Kueue's `buildSliceSizeAtLevel`);
and Kueue's not-fit message for them (`multiLayerNotFitMessage`)."""

from __future__ import annotations

from controller.core.model.topology import TopologyRequest
from controller.core.tas.counts import SearchState
from controller.core.tas.snapshot import Domain, TopologySnapshot

__all__ = ["inner_slices", "layers_not_fit"]


def inner_slices(
    snapshot: TopologySnapshot, topology: TopologyRequest, state: SearchState
) -> str | None:
    """Fill `state.size_at_level` and `state.layers` from the inner slice layers; why they
    cannot be used, if they cannot."""
    previous_size, previous_level = state.slice_size, state.slice_level
    for key, size in topology.inner_slices:
        level = snapshot.level_index(key)
        if level is None:
            return f"no requested topology level for additional slice layer: {key}"
        if level <= previous_level:
            return (
                f"additional slice layer topology {key} must be at a lower level than "
                f"{snapshot.levels[previous_level]}"
            )
        if size <= 0 or previous_size % size:
            return (
                f"additional slice layer size {size} must evenly divide parent layer size "
                f"{previous_size}"
            )
        for between in range(previous_level + 1, level + 1):
            state.size_at_level[between] = size
        previous_size, previous_level = size, level
    if topology.inner_slices:
        assert topology.slice_level is not None
        state.layers = ((topology.slice_level, state.slice_size), *topology.inner_slices)
    return None


def _slices_under(domain: Domain, level: int, target: int, size: int) -> int:
    """Slices of `size` the domains of level `target` under `domain` hold."""
    if level == target:
        return domain.pod_count // size
    return sum(_slices_under(child, level + 1, target, size) for child in domain.children)


def layers_not_fit(snapshot: TopologySnapshot, level: int, state: SearchState) -> str:
    """For the domain of `level` with the most slices (ties: the lowest id), how many
    slices of each layer fit under it."""
    message = f'topology "{snapshot.topology}" doesn\'t allow to fit'
    domains = snapshot.domains_per_level[level].values()
    best = min(domains, key=lambda d: (-d.slice_count, ",".join(d.id)), default=None)
    if best is None:
        return message
    for key, size in state.layers:
        target = snapshot.level_index(key)
        if target is None:
            continue
        fit = _slices_under(best, level, target, size)
        message += f"; {fit}/{state.count // size} slice(s) fit on level {key}"
    reasons = str(state.excluded)
    if reasons:
        message += f". Total nodes: {state.excluded.total_nodes}; excluded: {reasons}"
    return message
