"""Jobs owned by a queued job (controller/integrations/framework/ancestors.py): the walk up
the controller owner references, as Kueue's `FindAncestorJobManagedByKueue`, over owners
read from a table standing in for the API server."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from kubernetes.aio.client.exceptions import ApiException

from api.constants import QUEUE_NAME_LABEL
from controller.integrations.framework.ancestors import (
    AncestorUnknown,
    managed_ancestor,
    owner_framework,
)
from controller.integrations.framework.registry import by_kind


class Objects:
    """`get_namespaced_custom_object` over a table of objects by (plural, name)."""

    def __init__(self, *objects: dict[str, Any]) -> None:
        plurals = {"RayJob": "rayjobs", "RayCluster": "rayclusters", "JobSet": "jobsets"}
        self.table = {(plurals[o["kind"]], o["metadata"]["name"]): o for o in objects}
        self.reads: list[str] = []

    async def get_namespaced_custom_object(
        self, group: str, version: str, namespace: str, plural: str, name: str
    ) -> dict[str, Any]:
        self.reads.append(f"{plural}/{name}")
        try:
            return self.table[(plural, name)]
        except KeyError:
            raise ApiException(status=404, reason="Not Found") from None


API_VERSIONS = {
    "RayJob": "ray.io/v1",
    "RayCluster": "ray.io/v1",
    "JobSet": "jobset.x-k8s.io/v1alpha2",
}


def obj(kind: str, name: str, queued: bool, owner: dict[str, Any] | None = None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "uid": f"uid-{name}"}
    if queued:
        meta["labels"] = {QUEUE_NAME_LABEL: "lq"}
    if owner is not None:
        meta["ownerReferences"] = [
            {
                "apiVersion": API_VERSIONS[owner["kind"]],
                "kind": owner["kind"],
                "name": owner["metadata"]["name"],
                "uid": owner["metadata"]["uid"],
                "controller": True,
            }
        ]
    return {"kind": kind, "metadata": meta}


ENABLED = by_kind(["ray.io/rayjob", "ray.io/raycluster", "jobset.x-k8s.io/jobset"])


def walk(objects: Objects, child: dict[str, Any]) -> dict[str, Any] | None:
    return asyncio.run(managed_ancestor(objects, child, ENABLED))  # type: ignore[arg-type]


def test_a_rayjobs_cluster_belongs_to_the_queued_rayjob() -> None:
    job = obj("RayJob", "rj", queued=True)
    cluster = obj("RayCluster", "rc", queued=True, owner=job)
    assert owner_framework(cluster, ENABLED) is not None
    assert walk(Objects(job), cluster) == job


def test_an_unqueued_owner_makes_no_ancestor_and_a_top_level_job_reads_nothing() -> None:
    job = obj("RayJob", "rj", queued=False)
    cluster = obj("RayCluster", "rc", queued=True, owner=job)
    assert walk(Objects(job), cluster) is None
    lone = obj("RayCluster", "lone", queued=True)
    objects = Objects()
    assert owner_framework(lone, ENABLED) is None and walk(objects, lone) is None
    assert objects.reads == []


def test_the_top_most_queued_owner_is_the_ancestor() -> None:
    top = obj("JobSet", "top", queued=True)
    middle = obj("RayJob", "middle", queued=True, owner=top)
    unqueued_top = obj("JobSet", "plain", queued=False)
    middle_under_plain = obj("RayJob", "m2", queued=True, owner=unqueued_top)
    assert walk(Objects(top, middle), obj("RayCluster", "rc", True, owner=middle)) == top
    assert (
        walk(
            Objects(unqueued_top, middle_under_plain),
            obj("RayCluster", "r2", True, middle_under_plain),
        )
        == middle_under_plain
    )


def test_an_owner_of_a_kind_not_enabled_ends_the_walk() -> None:
    job = obj("RayJob", "rj", queued=True)
    cluster = obj("RayCluster", "rc", queued=True, owner=job)
    only_clusters = by_kind(["ray.io/raycluster"])
    assert owner_framework(cluster, only_clusters) is None
    assert asyncio.run(managed_ancestor(Objects(job), cluster, only_clusters)) is None  # type: ignore[arg-type]


def test_a_stale_owner_reference_ends_the_walk() -> None:
    job = obj("RayJob", "rj", queued=True)
    cluster = obj("RayCluster", "rc", queued=True, owner=job)
    replaced = obj("RayJob", "rj", queued=True)
    replaced["metadata"]["uid"] = "another"
    assert walk(Objects(replaced), cluster) is None


def test_a_missing_owner_or_a_cycle_cannot_be_told() -> None:
    job = obj("RayJob", "rj", queued=True)
    with pytest.raises(AncestorUnknown, match="RayJob ns/rj does not exist"):
        walk(Objects(), obj("RayCluster", "rc", queued=True, owner=job))
    a = obj("RayJob", "a", queued=True)
    b = obj("RayJob", "b", queued=True, owner=a)
    a["metadata"]["ownerReferences"] = obj("RayJob", "a", True, owner=b)["metadata"][
        "ownerReferences"
    ]
    with pytest.raises(AncestorUnknown, match="cyclic"):
        walk(Objects(a, b), obj("RayCluster", "rc", queued=True, owner=b))
