"""ResourceFlavor rules: Kueue's `pkg/webhooks/resourceflavor_webhook.go` and the CRD rules
of `apis/kueue/v1beta2/resourceflavor_types.go` (taints, tolerations, topologyName).

The toleration rules are also those of every other toleration list Kueue validates (a
Workload's admission-check pod set updates), hence `validate_tolerations` and
`toleration_rules`.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Final

from api.validation.field_errors import FieldError, Path, duplicate, invalid, rule_failed
from api.validation.names import is_label_value, validate_label_name, validate_labels

__all__ = [
    "TAINT_EFFECT_MESSAGE",
    "TOLERATION_MESSAGES",
    "toleration_rules",
    "validate_resource_flavor",
    "validate_resource_flavor_update",
    "validate_tolerations",
]

_EFFECTS: Final = ("NoSchedule", "PreferNoSchedule", "NoExecute")
TAINT_EFFECT_MESSAGE: Final = (
    "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', 'NoExecute'"
)
TOLERATION_MESSAGES: Final = (
    "operator must be Exists when 'key' is empty, which means 'match all values and all keys'",
    "effect must be 'NoExecute' when 'tolerationSeconds' is set",
    "supported toleration values: 'Equal'(default), 'Exists'",
    "a value must be empty when 'operator' is 'Exists'",
    TAINT_EFFECT_MESSAGE,
)
"""The CRD rules on a toleration list, in Kueue's order (each over the whole list)."""
TOPOLOGY_NEEDS_LABELS: Final = "at least one nodeLabel is required when topology is set"
TOPOLOGY_IMMUTABLE: Final = "topologyName is immutable when topologyName is set"
_SPEC: Final = Path("spec")


def _list(value: Any) -> list[Mapping[str, Any]]:
    if not isinstance(value, list):
        return []
    return [item for item in value if isinstance(item, Mapping)]


def toleration_rules(tolerations: Any, path: Path) -> list[FieldError]:
    """The CRD's five rules on a toleration list, each failing at the list (`array`)."""
    items = _list(tolerations)
    broken = (
        any(not t.get("key") and t.get("operator") != "Exists" for t in items),
        any(
            t.get("tolerationSeconds") is not None and t.get("effect") != "NoExecute" for t in items
        ),
        any(t.get("operator") not in (None, "Equal", "Exists") for t in items),
        any(t.get("operator") == "Exists" and t.get("value") is not None for t in items),
        any(t.get("effect") not in (None, *_EFFECTS) for t in items),
    )
    return [
        rule_failed(path, message, f"cel:toleration-{i}")
        for i, (message, failed) in enumerate(zip(TOLERATION_MESSAGES, broken, strict=True))
        if failed
    ]


def validate_tolerations(tolerations: Any, path: Path) -> list[FieldError]:
    """`validateTolerations`: a key, when given, is a qualified name."""
    errors = []
    for i, toleration in enumerate(_list(tolerations)):
        key = toleration.get("key")
        if key:
            errors.extend(
                validate_label_name(str(key), path.index(i).child("key"), "toleration-key")
            )
    return errors


def _taint_value(taint: Mapping[str, Any]) -> dict[str, Any]:
    """A `corev1.Taint` as Go marshals it (shown in a Duplicate error): key, value, effect,
    timeAdded in that order, the empty optional ones left out."""
    return {
        name: taint.get(name, "")
        for name in ("key", "value", "effect", "timeAdded")
        if taint.get(name) not in (None, "") or name in ("key", "effect")
    }


def _validate_node_taints(taints: Any, path: Path) -> list[FieldError]:
    """`validateNodeTaints`: a qualified key, a label value, unique by (key, effect)."""
    errors: list[FieldError] = []
    seen: set[tuple[str, str]] = set()
    for i, taint in enumerate(_list(taints)):
        at = path.index(i)
        key, effect = str(taint.get("key") or ""), str(taint.get("effect") or "")
        errors.extend(validate_label_name(key, at.child("key"), "taint-key"))
        value = str(taint.get("value") or "")
        messages = is_label_value(value)
        if messages:
            errors.append(invalid(at.child("value"), value, ";".join(messages), "taint-value"))
        if (key, effect) in seen:
            errors.append(
                duplicate(
                    at,
                    _taint_value(taint),
                    "taint-unique",
                    "taints must be unique by key and effect pair",
                )
            )
            continue
        seen.add((key, effect))
    return errors


def validate_resource_flavor(obj: Mapping[str, Any]) -> list[FieldError]:
    """`ValidateResourceFlavor`, with the CRD's own rules first."""
    spec = obj.get("spec")
    spec = spec if isinstance(spec, Mapping) else {}
    errors: list[FieldError] = []
    labels = spec.get("nodeLabels")
    if spec.get("topologyName") is not None and not labels:
        errors.append(rule_failed(_SPEC, TOPOLOGY_NEEDS_LABELS, "cel:topology-needs-labels"))
    taints = _list(spec.get("nodeTaints"))
    if any(t.get("effect") not in _EFFECTS for t in taints):
        errors.append(
            rule_failed(_SPEC.child("nodeTaints"), TAINT_EFFECT_MESSAGE, "cel:taint-effect")
        )
    errors += toleration_rules(spec.get("tolerations"), _SPEC.child("tolerations"))
    errors += validate_labels(
        labels if isinstance(labels, Mapping) else {}, _SPEC.child("nodeLabels"), "node-labels"
    )
    errors += _validate_node_taints(spec.get("nodeTaints"), _SPEC.child("nodeTaints"))
    errors += validate_tolerations(spec.get("tolerations"), _SPEC.child("tolerations"))
    return errors


def validate_resource_flavor_update(
    old: Mapping[str, Any], new: Mapping[str, Any]
) -> list[FieldError]:
    """The new flavor, and topologyName kept once set (a CRD transition rule)."""
    errors = validate_resource_flavor(new)
    before = (old.get("spec") or {}).get("topologyName")
    after = (new.get("spec") or {}).get("topologyName")
    if before is not None and after != before:
        errors.insert(0, rule_failed(_SPEC, TOPOLOGY_IMMUTABLE, "cel:topology-immutable"))
    return errors
