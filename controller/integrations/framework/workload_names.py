"""Workload names, as Kueue's jobframework makes them (`workload_names.go`), so that a
platform replacing Kueue with quotagate (or the reverse) finds every job's Workload under
the name the other gave it, and users' scripts and kueuectl see the same names.

`<kind lowercased>-<owner name>`, cut to the longest prefix that leaves room for `-` and
five hex digits of the SHA-1 of `kind \\n group \\n owner name \\n owner uid` (with
`\\n extra` when there is an extra part): 253 characters at most (Kueue's
`ShortWorkloadNames` feature gate, off by default and not implemented by quotagate, makes
it 63). The uid in the hash gives a job deleted and made again with the same name a
Workload of another name than the one still being deleted.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = [
    "LONG_MAX_LENGTH",
    "SHORT_MAX_LENGTH",
    "api_group",
    "object_workload_name",
    "workload_name",
]

LONG_MAX_LENGTH = 253
"""Kueue's `longMaxWorkloadNameLength`: a Workload name at most."""
SHORT_MAX_LENGTH = 63
"""Kueue's `shortMaxWorkloadNameLength`, under its `ShortWorkloadNames` feature gate."""
_HASH_LENGTH = 5


def workload_name(
    kind: str,
    group: str,
    owner_name: str,
    owner_uid: str,
    extra: str = "",
    max_length: int = LONG_MAX_LENGTH,
) -> str:
    """Kueue's `GenerateWorkloadNameWithExtra` (`GetWorkloadNameForOwnerWithGVK` when
    `extra` is empty) for the owner of `kind` in API `group` ("" for the core group)."""
    prefix = f"{kind.lower()}-{owner_name}"[: max_length - 1 - _HASH_LENGTH]
    parts = [kind, group, owner_name, owner_uid] + ([extra] if extra else [])
    digest = hashlib.sha1("\n".join(parts).encode()).hexdigest()
    return f"{prefix}-{digest[:_HASH_LENGTH]}"


def api_group(api_version: str) -> str:
    """The group of an `apiVersion` (`apps/v1` → `apps`, `v1` → "")."""
    return api_version.rpartition("/")[0]


def object_workload_name(obj: Mapping[str, Any]) -> str:
    """The name Kueue gives the Workload of the job object `obj` (its kind, apiVersion,
    name and uid)."""
    meta = obj.get("metadata") or {}
    return workload_name(
        str(obj.get("kind") or ""),
        api_group(str(obj.get("apiVersion") or "")),
        str(meta.get("name") or ""),
        str(meta.get("uid") or ""),
    )
