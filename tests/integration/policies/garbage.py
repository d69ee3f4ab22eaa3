"""Misbehaving cost policies for the integration test: the controller must survive them."""

from __future__ import annotations

from typing import Any


class Garbage:
    """Raises for Workloads named bomb-*, returns junk for the rest."""

    def cost(self, workload: Any, clock: Any) -> Any:
        if workload.metadata.name.startswith("bomb"):
            raise RuntimeError("policy exploded")
        return "not a quantity object"
