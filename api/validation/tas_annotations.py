"""The topology annotations of a pod template, checked as Kueue's job webhooks check them
(`jobframework.ValidateTASPodSetRequest`, `ValidateSliceSizeAnnotationUpperBound` and
`ValidatePodSetGroupingTopology` in Kueue's `tas_validation.go`), so that quotagate refuses
the job objects and pods whose `topologyRequest` Kueue would refuse to build instead of
building one silently (required winning over preferred, a bad slice size dropped).

Every error is reported at `<template metadata>.annotations[<annotation>]`, e.g.
`spec.template.metadata.annotations[kueue.x-k8s.io/podset-slice-size]`, with Kueue's
message. Pure: the callers (the webhook, one call per pod template) give the path.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from api.constants import (
    POD_SET_GROUP_NAME_ANNOTATION,
    POD_SET_PREFERRED_TOPOLOGY_ANNOTATION,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION,
    POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION,
    POD_SET_SLICE_SIZE_ANNOTATION,
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION,
)
from api.validation.field_errors import (
    OMIT_VALUE,
    FieldError,
    Path,
    duplicate,
    forbidden,
    invalid,
    required,
)
from api.validation.names import validate_label_name

__all__ = [
    "TemplateTopology",
    "annotations_of",
    "parse_int32",
    "parse_slice_layers",
    "validate_pod_set_grouping",
    "validate_slice_size_upper_bound",
    "validate_tas_pod_set_request",
    "validate_templates",
]

REQUIRED: Final = POD_SET_REQUIRED_TOPOLOGY_ANNOTATION
PREFERRED: Final = POD_SET_PREFERRED_TOPOLOGY_ANNOTATION
UNCONSTRAINED: Final = POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION
SLICE_REQUIRED: Final = POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION
SLICE_SIZE: Final = POD_SET_SLICE_SIZE_ANNOTATION
SLICE_LAYERS: Final = POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION
GROUP_NAME: Final = POD_SET_GROUP_NAME_ANNOTATION

_INT: Final = re.compile(r"[+-]?[0-9]+")
_BOOLS: Final = frozenset(
    {"1", "t", "T", "TRUE", "true", "True", "0", "f", "F", "FALSE", "false", "False"}
)
_INT32: Final = (-(2**31), 2**31 - 1)
_LAYERS_COUNT: Final = "topology constraints must contain between 1 and 3 entries"


def parse_int32(text: str) -> int | None:
    """Go's `strconv.ParseInt(text, 10, 32)`: None when it fails (not a decimal integer,
    or out of the int32 range)."""
    if _INT.fullmatch(text) is None:
        return None
    value = int(text)
    return value if _INT32[0] <= value <= _INT32[1] else None


def _is_uint64(text: str) -> bool:
    """Go's `strconv.ParseUint(text, 10, 64)` succeeds."""
    return text.isascii() and text.isdigit() and int(text) < 2**64


def validate_tas_pod_set_request(
    meta_path: Path, annotations: Mapping[str, str], multi_layer: bool = True
) -> list[FieldError]:
    """Kueue's `ValidateTASPodSetRequest` for one pod template's metadata at `meta_path`:
    at most one of required / preferred / unconstrained; the levels label names;
    unconstrained a boolean; the slice size an int32 ≥ 1, set exactly when the slice
    level is; the group name not a number, only with required or preferred and without a
    slice; the multi-layer slices (`multi_layer`: Kueue's `TASMultiLayerTopology` gate)."""
    errors: list[FieldError] = []
    path = meta_path.child("annotations")
    has_required, has_preferred = REQUIRED in annotations, PREFERRED in annotations
    has_slice, has_size = SLICE_REQUIRED in annotations, SLICE_SIZE in annotations
    has_group = GROUP_NAME in annotations
    if has_required + has_preferred + (UNCONSTRAINED in annotations) > 1:
        errors.append(
            invalid(
                path,
                OMIT_VALUE,
                "must not contain more than one topology annotation: "
                f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"]',
            )
        )
    for key in (REQUIRED, PREFERRED, SLICE_REQUIRED):
        if key in annotations:
            errors += validate_label_name(annotations[key], path.key(key))
    if has_group:
        group = annotations[GROUP_NAME]
        if _is_uint64(group):
            errors.append(invalid(path.key(GROUP_NAME), group, "must not be a number"))
        for other, present in ((SLICE_SIZE, has_size), (SLICE_REQUIRED, has_slice)):
            if present:
                errors.append(
                    forbidden(path.key(GROUP_NAME), f"may not be set when '{other}' is specified")
                )
        if not has_preferred and not has_required:
            errors.append(
                forbidden(
                    path.key(GROUP_NAME),
                    f"may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified",
                )
            )
    if UNCONSTRAINED in annotations and annotations[UNCONSTRAINED] not in _BOOLS:
        errors.append(
            invalid(path.key(UNCONSTRAINED), annotations[UNCONSTRAINED], "must be a boolean value")
        )
    if has_size:
        size = annotations[SLICE_SIZE]
        value = parse_int32(size)
        if value is None:
            errors.append(invalid(path.key(SLICE_SIZE), size, "must be a numeric value"))
        elif value < 1:
            errors.append(invalid(path.key(SLICE_SIZE), size, "must be greater than or equal to 1"))
    if has_slice and not has_size:
        errors.append(
            required(path.key(SLICE_SIZE), f"must be set when '{SLICE_REQUIRED}' is specified")
        )
    if has_size and not has_slice:
        errors.append(
            forbidden(
                path.key(SLICE_SIZE), f"may not be set when '{SLICE_REQUIRED}' is not specified"
            )
        )
    errors += _validate_layers(path, annotations, multi_layer)
    return errors


def _validate_layers(
    path: Path, annotations: Mapping[str, str], multi_layer: bool
) -> list[FieldError]:
    """Kueue's `validateSliceRequiredTopologyConstraintsAnnotation`: the multi-layer slice
    annotation (gate on) alone of the slice annotations and the group name, a JSON array
    of 1 to 3 `{topology, size}` with label names, sizes ≥ 1, distinct levels, each size
    dividing the one above."""
    if SLICE_LAYERS not in annotations:
        return []
    text = annotations[SLICE_LAYERS]
    where = path.key(SLICE_LAYERS)
    if not multi_layer:
        return [
            forbidden(
                where,
                "the TASMultiLayerTopology feature gate must be enabled to use this annotation",
            )
        ]
    errors = [
        forbidden(where, f"may not be set when '{other}' is specified")
        for other in (SLICE_REQUIRED, SLICE_SIZE)
        if other in annotations
    ]
    if GROUP_NAME in annotations:
        errors.append(
            forbidden(path.key(GROUP_NAME), f"may not be set when '{SLICE_LAYERS}' is specified")
        )
    layers, problem = parse_slice_layers(text)
    if layers is None:
        errors.append(invalid(where, text, f"must be a valid JSON array: {problem}"))
        return errors
    if not 1 <= len(layers) <= 3:
        errors.append(invalid(where, text, _LAYERS_COUNT))
        return errors
    for i, (topology, size) in enumerate(layers):
        errors += validate_label_name(topology, where.index(i).child("topology"))
        if size < 1:
            errors.append(
                invalid(where.index(i).child("size"), size, "must be greater than or equal to 1")
            )
    seen: dict[str, int] = {}
    for i, (topology, _) in enumerate(layers):
        if topology in seen:
            errors.append(
                duplicate(
                    where.index(i).child("topology"), f"{topology} (also at index {seen[topology]})"
                )
            )
        else:
            seen[topology] = i
    for i in range(len(layers) - 1):
        parent, size = layers[i][1], layers[i + 1][1]
        if size > 0 and parent % size != 0:
            errors.append(
                invalid(
                    where.index(i + 1).child("size"),
                    size,
                    f"must evenly divide the parent layer size {parent}",
                )
            )
    return errors


def parse_slice_layers(text: str) -> tuple[list[tuple[str, int]] | None, str]:
    """The layers as Go's `json.Unmarshal` into `[]PodsetSliceRequiredTopologyConstraint`
    reads them (absent fields zero, `null` an empty list), or None and why not."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        return None, str(exc)
    if data is None:
        return [], ""
    if not isinstance(data, list):
        return None, f"cannot unmarshal {type(data).__name__} into an array"
    layers: list[tuple[str, int]] = []
    for entry in data:
        if entry is None:
            entry = {}
        if not isinstance(entry, dict):
            return None, f"cannot unmarshal {type(entry).__name__} into a topology constraint"
        fields = {str(k).lower(): v for k, v in entry.items()}
        topology, size = fields.get("topology", ""), fields.get("size", 0)
        topology = "" if topology is None else topology
        size = 0 if size is None else size
        if not isinstance(topology, str):
            return None, "topology must be a string"
        if isinstance(size, bool) or not isinstance(size, int) or parse_int32(str(size)) is None:
            return None, "size must be a 32-bit integer"
        layers.append((topology, size))
    return layers, ""


def validate_slice_size_upper_bound(
    meta_path: Path, annotations: Mapping[str, str], count: int
) -> list[FieldError]:
    """Kueue's `ValidateSliceSizeAnnotationUpperBound`: the slice size, and the first
    layer's size, no greater than the pod set's `count`."""
    path = meta_path.child("annotations")
    errors: list[FieldError] = []
    if SLICE_SIZE in annotations:
        size = annotations[SLICE_SIZE]
        value = parse_int32(size)
        if value is None:
            return [invalid(path.key(SLICE_SIZE), size, "must be a numeric value")]
        if value > count:
            errors.append(
                invalid(
                    path.key(SLICE_SIZE), size, f"must not be greater than pod set count {count}"
                )
            )
    if SLICE_LAYERS in annotations:
        layers, _ = parse_slice_layers(annotations[SLICE_LAYERS])
        if layers and layers[0][1] > count:
            errors.append(
                invalid(
                    path.key(SLICE_LAYERS),
                    layers[0][1],
                    f"must not be greater than pod set count {count}",
                )
            )
    return errors


@dataclass(frozen=True, slots=True)
class TemplateTopology:
    """One pod set's template as the checks see it: where its metadata is, its
    annotations, its pod count (None: not known, the upper bound is not checked)."""

    meta_path: Path
    annotations: Mapping[str, str]
    count: int | None = None


def _level(annotations: Mapping[str, str]) -> tuple[str | None, str | None]:
    """(required, preferred) as the Workload's `topologyRequest` gets them."""
    if REQUIRED in annotations:
        return annotations[REQUIRED], None
    return None, annotations.get(PREFERRED)


def validate_pod_set_grouping(templates: Sequence[TemplateTopology]) -> list[FieldError]:
    """Kueue's `ValidatePodSetGroupingTopology`: a `podset-group-name` names exactly two
    pod sets, one of them of one pod, both asking the same required or preferred level."""
    groups: dict[str, list[TemplateTopology]] = {}
    for template in templates:
        if not (REQUIRED in template.annotations or PREFERRED in template.annotations):
            continue  # no group in the topologyRequest
        if GROUP_NAME in template.annotations:
            groups.setdefault(template.annotations[GROUP_NAME], []).append(template)
    errors: list[FieldError] = []
    for name, members in groups.items():
        paths = [m.meta_path.child("annotations") for m in members]
        if len(members) != 2:
            detail = f"can only define groups of exactly 2 pod sets, got: {len(members)} pod set(s)"
            errors += [invalid(p.key(GROUP_NAME), name, detail) for p in paths]
            continue
        first, second = members
        if first.count != 1 and second.count != 1:
            detail = (
                "can only define groups where at least one pod set has only 1 replica, got: "
                f"{first.count} replica(s) and {second.count} replica(s) in the group"
            )
            errors += [invalid(p.key(GROUP_NAME), name, detail) for p in paths]
        if _level(first.annotations) != _level(second.annotations):
            consistent = (
                f"must specify '{REQUIRED}' or '{PREFERRED}' topology consistent with "
                f"'%s' in group '{name}'"
            )
            errors.append(invalid(paths[0], OMIT_VALUE, consistent % paths[1]))
            errors.append(invalid(paths[1], OMIT_VALUE, consistent % paths[0]))
    return errors


def validate_templates(
    templates: Sequence[TemplateTopology], multi_layer: bool = True, grouping: bool = True
) -> list[FieldError]:
    """Every template's request and slice bound, then the pod set groups across them
    (`grouping`: the kind has pod sets that can be grouped). Without grouping (Kueue's Job
    webhook: one template), the bound is checked only when the request is valid, as
    Kueue's returns the request's errors alone."""
    errors: list[FieldError] = []
    for template in templates:
        request = validate_tas_pod_set_request(
            template.meta_path, template.annotations, multi_layer
        )
        errors += request
        if template.count is not None and (grouping or not request):
            errors += validate_slice_size_upper_bound(
                template.meta_path, template.annotations, template.count
            )
    if grouping:
        errors += validate_pod_set_grouping(templates)
    return errors


def annotations_of(template: Mapping[str, Any] | None) -> dict[str, str]:
    """A pod template's annotations (none when it has no metadata)."""
    meta = (template or {}).get("metadata") or {}
    return {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
