"""Per-pod requests (controller/core/model/requests.py)."""

from __future__ import annotations

from controller.core.model.requests import Container, is_pod_level_resource, pod_requests


def test_requests_default_to_limits_and_sum_over_containers() -> None:
    containers = [
        Container({"cpu": 500}, {"cpu": 1000, "memory": 64}),
        Container(limits={"cpu": 250}),
    ]
    assert pod_requests(containers) == {"cpu": 750, "memory": 64}


def test_init_containers_set_a_floor_and_overhead_adds() -> None:
    requests = pod_requests(
        [Container({"cpu": 1000})],
        [Container({"cpu": 3000}), Container({"cpu": 500})],
        {"cpu": 100},
    )
    assert requests == {"cpu": 3100}


def test_sidecars_add_to_running_total_and_later_init_phases() -> None:
    requests = pod_requests(
        [Container({"cpu": 1000})],
        [Container({"cpu": 200}, sidecar=True), Container({"cpu": 1000})],
    )
    assert requests == {"cpu": 1200}  # max(1000 + 200, 200 + 1000)


def test_pod_level_resources_replace_the_containers_sum() -> None:
    """Kubernetes' PodLevelResources, as Kueue counts them: the pod's own requests replace
    the containers' total for cpu, memory and hugepages (and limits stand in for missing
    requests); other resources stay the containers'; overhead still adds."""
    containers = [Container({"cpu": 500, "memory": 10, "example.com/gpu": 1000})]
    pod = Container({"cpu": 2000}, {"memory": 64, "hugepages-2Mi": 4, "example.com/gpu": 9000})
    requests = pod_requests(containers, (), {"cpu": 100}, pod_level=pod)
    assert requests == {"cpu": 2100, "memory": 64, "hugepages-2Mi": 4, "example.com/gpu": 1000}
    assert pod_requests([], pod_level=Container({"cpu": 3000})) == {"cpu": 3000}
    # Pods with pod-level resources and no container requests were counted as nothing.
    assert pod_requests([Container()], pod_level=Container(limits={"memory": 1 << 20})) == {
        "memory": 1 << 20
    }
    assert is_pod_level_resource("hugepages-1Gi") and not is_pod_level_resource("pods")
