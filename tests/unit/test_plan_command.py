"""`quotagate plan` (controller/plan_command.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from controller.cli import main

STATE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: on-demand}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors:
    - name: on-demand
      resources: [{name: cpu, nominalQuota: 10}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
---
kind: Workload
metadata: {name: running, namespace: team-a, creationTimestamp: "2026-01-01T00:00:00Z"}
spec:
  queueName: main
  podSets: [{name: main, count: 1, template: {spec: {containers: [{resources: {requests: {cpu: "8"}}}]}}}]
status:
  admission:
    clusterQueue: team-a
    podSetAssignments: [{name: main, count: 1, flavors: {cpu: on-demand}, resourceUsage: {cpu: "8"}}]
  conditions: [{type: QuotaReserved, status: "True", lastTransitionTime: "2026-01-01T00:01:00Z"}]
---
kind: Workload
metadata: {name: big, namespace: team-a, creationTimestamp: "2026-01-01T00:02:00Z"}
spec:
  queueName: main
  podSets: [{name: main, count: 3, template: {spec: {containers: [{resources: {requests: {cpu: "2"}}}]}}}]
---
kind: Workload
metadata: {name: small, namespace: team-a, creationTimestamp: "2026-01-01T00:03:00Z"}
spec:
  queueName: main
  podSets: [{name: main, count: 2, template: {spec: {containers: [{resources: {limits: {cpu: "1"}}}]}}}]
"""


def write(tmp_path: Path, text: str, name: str = "state.yaml") -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_plan_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", write(tmp_path, STATE), "--now", "2026-01-01T01:00:00Z"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["admitted"] == [
        {
            "workload": "team-a/small",
            "clusterQueue": "team-a",
            "borrowing": False,
            "podSets": [{"name": "main", "count": 2, "flavors": {"cpu": "on-demand"}}],
        }
    ]
    assert result["preempting"] == []
    assert result["pending"] == [
        {
            "workload": "team-a/big",
            "clusterQueue": "team-a",
            "reason": "insufficient quota for cpu in flavor on-demand: requested 6, available 2 "
            "(nominal 10, reserved 8, borrowable 0)",
        }
    ]


def test_plan_table_and_yaml(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, STATE)
    assert main(["plan", "-f", path, "-o", "table"]) == 0
    table = capsys.readouterr().out
    assert table.splitlines()[0].split() == ["WORKLOAD", "CLUSTERQUEUE", "DECISION", "DETAIL"]
    rows = [line.split(None, 3) for line in table.splitlines()[1:]]
    assert [row[:3] for row in rows] == [
        ["team-a/small", "team-a", "admit"],
        ["team-a/big", "team-a", "pending"],
    ]
    assert rows[0][3] == "mainx2: cpu=on-demand"
    assert rows[1][3].startswith("insufficient quota for cpu in flavor on-demand: requested 6")
    assert main(["plan", "-f", path, "-o", "yaml"]) == 0
    document = yaml.safe_load(capsys.readouterr().out)
    assert [a["workload"] for a in document["admitted"]] == ["team-a/small"]
    assert [p["workload"] for p in document["pending"]] == ["team-a/big"]
    assert document["preempting"] == [] and document["evicted"] == []


def test_objects_may_span_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    docs = STATE.split("---")
    first = write(tmp_path, "---".join(docs[3:]), "workloads.yaml")
    second = write(tmp_path, "---".join(docs[:3]), "queues.yaml")
    assert main(["plan", "-f", first, "-f", second]) == 0
    assert json.loads(capsys.readouterr().out)["admitted"][0]["workload"] == "team-a/small"


def test_bad_input_lists_every_problem_and_exits_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = (
        STATE.replace("nominalQuota: 10", "nominalQuota: lots").replace(
            "queueName: main\n  podSets: [{name: main, count: 3",
            "queueName: nope\n  podSets: [{name: main, count: 3",
        )
        + "---\nkind: Gadget\nmetadata: {name: g}\n"
    )
    assert main(["plan", "-f", write(tmp_path, bad)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    lines = captured.err.splitlines()
    assert len(lines) == 3
    assert (
        "document 2: ClusterQueue team-a: spec.resourceGroups[0].flavors[0].resources[0].nominalQuota"
        in lines[0]
    )
    assert "document 7: Gadget g: kind: unsupported kind" in lines[1]
    assert (
        "document 5: Workload team-a/big: spec.queueName: LocalQueue team-a/nope not found"
        in lines[2]
    )


def test_unparseable_yaml_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", write(tmp_path, "a: [1,\n")]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and "invalid YAML" in captured.err


def test_hold_and_drain_evicts(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    state = STATE.replace(
        "namespaceSelector: {}", "namespaceSelector: {}\n  stopPolicy: HoldAndDrain"
    )
    assert main(["plan", "-f", write(tmp_path, state)]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["admitted"] == []
    assert result["evicted"] == [
        {"workload": "team-a/running", "clusterQueue": "team-a", "reason": "ClusterQueueStopped"}
    ]
    assert {p["reason"] for p in result["pending"]} == {
        "ClusterQueue team-a is inactive: stopped (HoldAndDrain)"
    }


def test_plan_prints_preempting_with_the_cheaper_victim(capsys: pytest.CaptureFixture[str]) -> None:
    """Two equal-priority victims, costs 1 and 5: the plan preempts the cheaper one and does
    not complete the eviction (the preemptor is not listed as admitted or pending)."""
    path = Path(__file__).parent / "data" / "plan_preempt.yaml"
    assert main(["plan", "-f", str(path), "-o", "json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["preempting"] == [
        {
            "workload": "ns/urgent",
            "clusterQueue": "cq",
            "victims": [
                {
                    "workload": "ns/cheap",
                    "clusterQueue": "cq",
                    "reason": "InClusterQueue",
                    "pods": 2,
                }
            ],
        }
    ]
    assert result["admitted"] == [] and result["pending"] == []


@pytest.mark.parametrize(
    ("now", "victim"),
    [
        ("2026-01-01T00:59:59Z", None),  # both within their hour: nobody may go yet
        ("2026-01-01T01:10:00Z", "ns/dear"),  # the cheap one is still protected
        ("2026-01-01T01:50:00Z", "ns/cheap"),  # both have run an hour: the cheaper goes
    ],
)
def test_plan_honours_the_minimum_runtime(
    now: str, victim: str | None, capsys: pytest.CaptureFixture[str]
) -> None:
    """The ClusterQueue protects each Workload for an hour after its reservation: `dear`
    was reserved at 00:00, `cheap` at 00:50."""
    path = Path(__file__).parent / "data" / "plan_minimum_runtime.yaml"
    assert main(["plan", "-f", str(path), "-o", "json", "--now", now]) == 0
    result = json.loads(capsys.readouterr().out)
    if victim is None:
        assert result["preempting"] == []
        (pending,) = result["pending"]
        assert pending["workload"] == "ns/urgent"
        assert (
            "2 preemption candidates within their ClusterQueue's minimum runtime, "
            "the first preemptible at 2026-01-01T01:00:00Z"
        ) in pending["reason"]
        return
    (preempting,) = result["preempting"]
    assert [v["workload"] for v in preempting["victims"]] == [victim]


COHORT_STATE = """
apiVersion: kueue.x-k8s.io/v1beta2
kind: ResourceFlavor
metadata: {name: default}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: Cohort
metadata: {name: research}
spec: {}
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-a}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: ClusterQueue
metadata: {name: team-b}
spec:
  cohortName: research
  namespaceSelector: {}
  resourceGroups:
  - coveredResources: [cpu]
    flavors: [{name: default, resources: [{name: cpu, nominalQuota: 4}]}]
---
apiVersion: kueue.x-k8s.io/v1beta2
kind: LocalQueue
metadata: {name: main, namespace: team-a}
spec: {clusterQueue: team-a}
---
kind: Workload
metadata: {name: big, namespace: team-a, creationTimestamp: "2026-01-01T00:02:00Z"}
spec:
  queueName: main
  podSets: [{name: main, count: 1, template: {spec: {containers: [{resources: {requests: {cpu: "6"}}}]}}}]
"""


def test_plan_accepts_a_flat_cohort_and_borrows_through_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["plan", "-f", write(tmp_path, COHORT_STATE), "--now", "2026-01-01T01:00:00Z"]) == 0
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert [(a["workload"], a["borrowing"]) for a in result["admitted"]] == [("team-a/big", True)]
    assert "unsupported" not in result and out.err == ""


@pytest.mark.parametrize(
    ("cohort_spec", "cpu"),
    [
        ("{parentName: org}", 6),  # the two queues' 8 cpus, through a parent
        (  # and with the Cohort's own 4: 12
            "{resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, "
            "resources: [{name: cpu, nominalQuota: 4}]}]}]}",
            12,
        ),
    ],
)
def test_plan_computes_quota_through_a_cohort_tree(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], cohort_spec: str, cpu: int
) -> None:
    state = COHORT_STATE.replace("spec: {}", f"spec: {cohort_spec}", 1)
    state = state.replace('cpu: "6"', f'cpu: "{cpu}"')
    assert main(["plan", "-f", write(tmp_path, state), "--now", "2026-01-01T01:00:00Z"]) == 0
    out = capsys.readouterr()
    result = json.loads(out.out)
    assert [(a["workload"], a["borrowing"]) for a in result["admitted"]] == [("team-a/big", True)]
    assert "unsupported" not in result and out.err == ""


def test_plan_refuses_nothing_but_admits_nothing_through_a_cycle_of_parents(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cycle = (
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Cohort\nmetadata: {name: org}\n"
        "spec: {parentName: research}\n---\n"
    )
    state = cycle + COHORT_STATE.replace("spec: {}", "spec: {parentName: org}", 1)
    assert main(["plan", "-f", write(tmp_path, state), "--now", "2026-01-01T01:00:00Z"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["admitted"] == []
    [pending] = result["pending"]
    assert pending["reason"] == (
        "ClusterQueue team-a is inactive: Cohort research is in a tree with a cycle "
        "(research -> org -> research)"
    )


def test_plan_rejects_a_limit_on_a_root_cohort(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = COHORT_STATE.replace(
        "spec: {}",
        "spec: {resourceGroups: [{coveredResources: [cpu], flavors: [{name: default, "
        "resources: [{name: cpu, nominalQuota: 2, lendingLimit: 1}]}]}]}",
        1,
    )
    assert main(["plan", "-f", write(tmp_path, state)]) == 2
    err = capsys.readouterr().err
    assert "Cohort research" in err
    assert (
        'spec.resourceGroups[0].flavors[0].resources[0].lendingLimit: Invalid value: "1": '
        "must be nil when parent is empty" in err
    )


def test_plan_reclaims_through_a_tree_from_the_cheapest_over_quota_queue(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """README's worked example: team-b is within its quota, lab is over it; the cheapest
    of lab's Workloads is reclaimed (the table is the README's)."""
    path = Path(__file__).parent / "data" / "plan_tree.yaml"
    assert main(["plan", "-f", str(path), "-o", "table", "--now", "2026-01-01T00:02:00Z"]) == 0
    assert capsys.readouterr().out.splitlines() == [
        "WORKLOAD       CLUSTERQUEUE  DECISION  DETAIL",
        "team-a/urgent  team-a        preempt   victims: lab/lab-idle (lab, InCohortReclamation, "
        "1 pods)",
    ]


def test_plan_with_fair_sharing_reclaims_from_the_largest_share(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """README's fair-sharing example: research (weight 2) and product (weight 1) each
    borrow 2 cpus; ops reclaims 3. Without fair sharing the first candidate in order goes
    (research's r1: cost 0); with it, the queue with the largest share (product: 2 of 12
    per mille ×1000 / 1 = 167, research's is 83), and in it the cheapest (p-cheap). The
    tables are the README's; without --config the weight is reported as having no effect."""
    data = Path(__file__).parent / "data"
    args = ["plan", "-f", str(data / "plan_fair.yaml"), "-o", "table"]
    args += ["--now", "2026-01-01T00:02:00Z"]
    assert main(args) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "WORKLOAD     CLUSTERQUEUE  DECISION  DETAIL",
        "ops/ops-job  ops           preempt   victims: research/r1 (research, "
        "InCohortReclamation, 1 pods)",
    ]
    assert "ClusterQueue research: spec.fairSharing: fair sharing is off" in captured.err
    assert main([*args, "--config", str(data / "plan_fair_config.yaml")]) == 0
    captured = capsys.readouterr()
    assert captured.out.splitlines() == [
        "WORKLOAD     CLUSTERQUEUE  DECISION  DETAIL",
        "ops/ops-job  ops           preempt   victims: product/p-cheap (product, "
        "InCohortReclamation, 1 pods)",
    ]
    assert captured.err == ""


def test_plan_shows_each_local_queues_admission_fair_sharing_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """With admissionFairSharing in --config, the table ends with the LocalQueues of
    usage-based ClusterQueues: their usage, and consumed usage plus pending penalties."""
    data = Path(__file__).parent / "data" / "kueue_afs"
    args = ["plan", "-f", str(data / "admits-workload-from-less-active-localqueue.yaml")]
    args += ["--config", str(data / "config.yaml"), "-o", "table", "--cycles", "2"]
    assert main(args) == 0
    table = capsys.readouterr().out.split("\n\n")[1]
    assert [line.split() for line in table.splitlines()] == [
        ["LOCALQUEUE", "CLUSTERQUEUE", "USAGE", "CONSUMED", "+", "PENDING", "PENALTY"],
        ["default/lq-a", "cq1", "8", "cpu=8"],
        ["default/lq-b", "cq1", "2.53574", "cpu=2.53574"],
        ["default/lq-c", "cq1", "0"],
        ["default/lq-zero", "cq1", "+Inf"],
    ]


def test_plan_waits_for_a_victim_already_evicting_instead_of_evicting_another(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The dearer Workload is already being evicted (Evicted, still holding its quota): the
    preemptor waits for it (Kueue's "preemption ongoing") instead of evicting the cheaper
    one too, and the plan says so."""
    text = (Path(__file__).parent / "data" / "plan_preempt.yaml").read_text()
    held = (
        'lastTransitionTime: "2026-01-01T00:00:00Z"}]\n---\n'
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n"
        "metadata: {name: urgent"
    )
    evicted = (
        'lastTransitionTime: "2026-01-01T00:00:00Z"}, {type: Evicted, status: "True", '
        'reason: Preempted, message: x, lastTransitionTime: "2026-01-01T00:05:00Z"}]\n---\n'
        "apiVersion: kueue.x-k8s.io/v1beta2\nkind: Workload\n"
        "metadata: {name: urgent"
    )
    assert text.count(held) == 1  # the condition list of "dear", just before "urgent"
    path = write(tmp_path, text.replace(held, evicted))
    assert main(["plan", "-f", path, "-o", "json"]) == 0
    victims = json.loads(capsys.readouterr().out)["preempting"][0]["victims"]
    assert victims == [
        {
            "workload": "ns/dear",
            "clusterQueue": "cq",
            "reason": "InClusterQueue",
            "pods": 2,
            "alreadyEvicting": True,
        }
    ]
    assert main(["plan", "-f", path, "-o", "table"]) == 0
    assert "ns/dear (cq, InClusterQueue, 2 pods, already evicting)" in capsys.readouterr().out
