"""Per-pod requests (controller/core/requests.py)."""

from __future__ import annotations

from controller.core.requests import Container, pod_requests


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
