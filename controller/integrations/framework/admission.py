"""What the webhook does with the queue-labelled objects of a kind that has no `GenericJob`
adapter: a kind that runs through its pods (Kueue's Deployment, StatefulSet and
LeaderWorkerSet webhooks). Such a kind is never suspended; its webhook marks its pod
templates so that the pod integration gates and queues the pods, and refuses what the
integration could not honour. Pure: the object in, its change or the problems out.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, ClassVar

__all__ = ["ObjectAdmission"]


class ObjectAdmission:
    """A kind's defaulting and validation (Kueue's `Defaulter` and `Validator`); the
    defaults: nothing to change, nothing to refuse."""

    operations: ClassVar[tuple[str, ...]] = ("CREATE",)
    """The operations the webhook is called for (`UPDATE` too when the kind validates
    updates)."""

    def default(self, obj: dict[str, Any]) -> None:
        """Change a queue-labelled object being created or updated, in place."""

    def validate_create(self, obj: Mapping[str, Any]) -> list[str]:
        """Why a queue-labelled object is refused on creation, each `field: message`."""
        return []

    def validate_update(self, old: Mapping[str, Any], new: Mapping[str, Any]) -> list[str]:
        """Why an update of an object that has (or had) the queue label is refused."""
        return []
