"""Patches computed from an object before and after an adapter changed it (pure).

An adapter changes a copy of its object as Kueue's `GenericJob` changes the object in
place; the reconciler sends the difference. `merge_patch` is an RFC 7386 JSON merge patch
(what Kueue's `clientutil.Patch` sends), `json_patch` an RFC 6902 patch (what a mutating
webhook answers). Lists are replaced whole in both: a pod template's tolerations or a
JobSet's replicatedJobs are one value, so a patch is only safe on the copy the API server
has — the reconciler adds the object's resourceVersion as a precondition.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["json_patch", "merge_patch"]


def merge_patch(old: Mapping[str, Any], new: Mapping[str, Any]) -> dict[str, Any]:
    """The JSON merge patch that turns `old` into `new` (empty: nothing changed). A key
    gone from `new` is `null`; maps are patched key by key; anything else is replaced."""
    patch: dict[str, Any] = {}
    for key in old.keys() | new.keys():
        if key not in new:
            patch[key] = None
        elif key not in old:
            patch[key] = new[key]
        elif old[key] != new[key]:
            before, after = old[key], new[key]
            if isinstance(before, Mapping) and isinstance(after, Mapping):
                patch[key] = merge_patch(before, after)
            else:
                patch[key] = after
    return patch


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


def json_patch(
    old: Mapping[str, Any], new: Mapping[str, Any], path: str = ""
) -> list[dict[str, Any]]:
    """The RFC 6902 operations that turn `old` into `new`: `add`, `remove` and `replace`
    by key, maps recursively, lists and scalars as whole values."""
    ops: list[dict[str, Any]] = []
    for key in sorted(old.keys() | new.keys()):
        where = f"{path}/{_escape(str(key))}"
        if key not in new:
            ops.append({"op": "remove", "path": where})
        elif key not in old:
            ops.append({"op": "add", "path": where, "value": new[key]})
        elif old[key] != new[key]:
            before, after = old[key], new[key]
            if isinstance(before, Mapping) and isinstance(after, Mapping):
                ops.extend(json_patch(before, after, where))
            else:
                ops.append({"op": "replace", "path": where, "value": after})
    return ops
