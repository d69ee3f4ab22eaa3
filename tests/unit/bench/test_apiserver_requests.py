"""kube-apiserver's write counters (tools/bench/apiserver_requests.py) and the
per-Workload table `make bench-compare` prints from them."""

from __future__ import annotations

import dataclasses

from tools.bench.apiserver_requests import request_counts, requests_between, write_rows
from tools.bench.comparison import WRITES, render_comparison
from tools.bench.scenario import SCENARIOS, load
from tools.bench.simulate import simulate

SMOKE = SCENARIOS / "smoke.yaml"

METRICS = """\
# HELP apiserver_request_total [STABLE] Counter of apiserver requests.
# TYPE apiserver_request_total counter
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kueue.x-k8s.io",resource="workloads",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 40
apiserver_request_total{code="409",component="apiserver",dry_run="",group="kueue.x-k8s.io",resource="workloads",scope="resource",subresource="status",verb="PATCH",version="v1beta2"} 2
apiserver_request_total{code="201",component="apiserver",dry_run="",group="",resource="events",scope="resource",subresource="",verb="POST",version="v1"} 7
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kueue.x-k8s.io",resource="workloads",scope="namespace",subresource="",verb="LIST",version="v1beta2"} 900
apiserver_request_total{code="200",component="apiserver",dry_run="",group="kueue.x-k8s.io",resource="workloads",scope="resource",subresource="",verb="WATCH",version="v1beta2"} 3
apiserver_request_total{code="200",component="apiserver",dry_run="",group="",resource="pods",scope="resource",subresource="",verb="GET",version="v1"} 5
# HELP apiserver_request_duration_seconds [STABLE] Response latency.
# TYPE apiserver_request_duration_seconds histogram
apiserver_request_duration_seconds_count{resource="events",subresource="",verb="POST"} 99
"""


def test_writes_are_counted_by_verb_and_resource_and_reads_left_out() -> None:
    # Every response code together (the 409s were requests too); GET, LIST, WATCH are
    # reads; other metrics with the same labels are not requests counted twice.
    assert request_counts(METRICS) == {"PATCH workloads/status": 42, "POST events": 7}


def test_writes_between_two_scrapes_keep_only_what_happened() -> None:
    before = {"PATCH workloads/status": 10, "POST events": 7}
    after = {"PATCH workloads/status": 42, "POST events": 7, "POST workloads": 5}
    assert requests_between(before, after) == {"PATCH workloads/status": 32, "POST workloads": 5}


def test_rows_are_per_workload_the_most_frequent_first_with_a_total() -> None:
    rows = write_rows({"POST events": 20, "PATCH workloads/status": 30}, {"POST events": 5}, 10)
    assert rows == [
        ("PATCH workloads/status", 3.0, 0.0),
        ("POST events", 2.0, 0.5),
        ("all writes", 5.0, 0.5),
    ]


def test_the_comparison_prints_the_writes_when_both_runs_counted_them() -> None:
    report = simulate(load(SMOKE))
    first = dataclasses.replace(report, extra={WRITES: {"POST events": 2 * report.workloads}})
    second = dataclasses.replace(report, extra={WRITES: {"POST events": report.workloads}})
    lines = render_comparison({"kueue": first, "quotagate": second}).splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("kube-apiserver writes"))
    assert lines[start + 1].split() == ["REQUEST", "KUEUE", "QUOTAGATE", "RATIO"]
    assert lines[start + 2].split() == ["POST", "events", "2.00", "1.00", "0.50"]
    assert lines[start + 3].split() == ["all", "writes", "2.00", "1.00", "0.50"]
    # Without counts in either run, no such table.
    assert not any(
        line.startswith("kube-apiserver writes")
        for line in render_comparison({"a": report, "b": first}).splitlines()
    )
