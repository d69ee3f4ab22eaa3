"""Owner references, as the API server keeps them."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = ["controller_reference"]


def controller_reference(obj: Mapping[str, Any]) -> dict[str, Any]:
    """An owner reference making `obj` (with its apiVersion, kind, name and uid) the
    controller of the object that carries it, its deletion blocked until that goes
    (client-go's `SetControllerReference`)."""
    meta = obj["metadata"]
    return {
        "apiVersion": obj["apiVersion"],
        "kind": obj["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }
