"""The Job integration's pure patches (controller/integrations/jobs.py): admission injects
the flavors' node labels and tolerations and remembers the originals; eviction restores
them exactly."""

from __future__ import annotations

import json
from typing import Any

import jsonpatch  # type: ignore[import-untyped]

from controller.integrations.jobs import admitted_template_patch, suspend_patch

TOLERATION = {"key": "dedicated", "operator": "Equal", "value": "batch", "effect": "NoSchedule"}
OWN = {"key": "gpu", "operator": "Exists", "effect": "NoSchedule"}


def job(
    node_selector: dict[str, str] | None, tolerations: list[dict[str, Any]] | None
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": []}
    if node_selector is not None:
        spec["nodeSelector"] = node_selector
    if tolerations is not None:
        spec["tolerations"] = tolerations
    return {"metadata": {"name": "j"}, "spec": {"suspend": True, "template": {"spec": spec}}}


def merge(target: dict[str, Any], patch: dict[str, Any]) -> dict[str, Any]:
    """RFC 7386 JSON merge patch, as the API server applies it."""
    out = json.loads(json.dumps(target))
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        elif isinstance(value, dict) and isinstance(out.get(key), dict):
            out[key] = merge(out[key], value)
        else:
            out[key] = value
    return out


def test_admission_adds_labels_and_tolerations_and_eviction_restores_them() -> None:
    for selector, tolerations in [(None, None), ({"disk": "ssd"}, [OWN]), ({}, [TOLERATION])]:
        original = job(selector, tolerations)
        admitted = merge(original, admitted_template_patch(original, {"zone": "b"}, [TOLERATION]))
        spec = admitted["spec"]["template"]["spec"]
        assert admitted["spec"]["suspend"] is False
        assert spec["nodeSelector"] == {**(selector or {}), "zone": "b"}
        assert spec["tolerations"].count(TOLERATION) == 1  # never added twice
        assert all(t in spec["tolerations"] for t in tolerations or [])
        restored = merge(admitted, suspend_patch(admitted))
        assert restored["spec"]["suspend"] is True
        assert restored["spec"]["template"]["spec"].get("nodeSelector") in (selector, None, {})
        assert restored["spec"]["template"]["spec"].get("tolerations") == (tolerations or None)
        assert not restored["metadata"].get("annotations")
        assert jsonpatch.make_patch(
            restored["spec"]["template"], original["spec"]["template"]
        ).patch in (
            [],
            [{"op": "add", "path": "/spec/nodeSelector", "value": {}}],
            [{"op": "remove", "path": "/spec/nodeSelector"}],
        )
