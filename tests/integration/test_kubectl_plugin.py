"""`kubectl quotagate` against the real API server with the controller running: list,
describe (admitted, pending, evicted), whatif (fits, preempts, stays pending), and errors
that read like kubectl's (issue 9)."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from api import workload_status as ws
from api.constants import EXPECTED_RUNTIME_ANNOTATION
from controller.kubectl.plugin import main
from tests.cluster.build import bin_dir
from tests.cluster.controlplane import free_port
from tests.cluster.fixtures import wait_for
from tests.integration.kueue import (
    GROUP,
    VERSION,
    ControllerProcess,
    Kueue,
    cluster_queue,
    condition,
    flavor,
    local_queue,
    wait_admitted,
    wait_pending_reason,
    workload,
)

VENV_BIN = Path(sys.executable).parent


@dataclass(frozen=True)
class Scenario:
    """One namespace with two ClusterQueues:

    - `cq` (4 CPUs, preemption of lower priority): `steady` (priority 5, 2 CPUs) admitted;
      `victim` (priority 1, 2 CPUs) preempted by `urgent` (priority 100, 2 CPUs), now
      waiting again; `stuck` (priority 1, 3 CPUs) pending for quota.
    - `roomy` (10 CPUs, empty), reached through LocalQueue `roomy-lq`.
    """

    namespace: str
    kubeconfig: str
    kueue: Kueue
    flavor: str
    cq: str
    roomy: str
    priority_class: str

    def run(self, capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
        """The plugin in-process, as `kubectl quotagate ARGS --kubeconfig …`."""
        capsys.readouterr()
        code = main([*args, "--kubeconfig", self.kubeconfig])
        captured = capsys.readouterr()
        return code, captured.out, captured.err


@pytest.fixture(scope="module")
def scenario(
    controller: ControllerProcess, api_client: client.ApiClient, kubeconfig_path: str
) -> Iterator[Scenario]:
    kueue = Kueue(api_client)
    core = client.CoreV1Api(api_client)
    ns = f"kp-{uuid.uuid4().hex[:8]}"
    core.create_namespace({"metadata": {"name": ns}})
    s = Scenario(ns, kubeconfig_path, kueue, f"{ns}-rf", f"{ns}-cq", f"{ns}-roomy", f"{ns}-high")
    kueue.custom.create_cluster_custom_object(
        GROUP,
        VERSION,
        "workloadpriorityclasses",
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "WorkloadPriorityClass",
            "metadata": {"name": s.priority_class},
            "value": 50,
        },
    )
    kueue.apply(
        flavor(s.flavor),
        cluster_queue(
            s.cq, {s.flavor: {"cpu": 4}}, preemption={"withinClusterQueue": "LowerPriority"}
        ),
        cluster_queue(s.roomy, {s.flavor: {"cpu": 10}}),
        local_queue(ns, "lq", s.cq),
        local_queue(ns, "roomy-lq", s.roomy),
        workload(ns, "steady", "lq", cpu="2", priority=5),
        workload(ns, "victim", "lq", cpu="2", priority=1),
    )
    for name in ("steady", "victim"):
        wait_admitted(kueue, ns, name)
    kueue.apply(workload(ns, "stuck", "lq", cpu="3", priority=1))
    wait_pending_reason(kueue, ns, "stuck")
    kueue.apply(workload(ns, "urgent", "lq", cpu="2", priority=100))
    wait_for(lambda: condition(kueue.get_workload(ns, "victim"), "Evicted"), what="victim evicted")
    kueue.acknowledge_eviction(ns, "victim")  # its owner stops it: quota is released
    wait_admitted(kueue, ns, "urgent")
    # The controller writes queue status at most once a second: wait for the settled counts.
    wait_for(
        lambda: _counts(kueue.get_cluster_queue(s.cq)) == (2, 2, 2),
        what="ClusterQueue status: 2 pending, 2 reserving, 2 admitted",
    )
    wait_for(
        lambda: (
            _counts(
                kueue.custom.get_namespaced_custom_object(GROUP, VERSION, ns, "localqueues", "lq")
            )
            == (2, 2, 2)
        ),
        what="LocalQueue status: 2 pending, 2 admitted",
    )
    wait_for(
        lambda: (kueue.get_workload(ns, "steady").get("status") or {}).get(
            "resolvedPreemptibility"
        ),
        what="resolvedPreemptibility written",
    )
    try:
        yield s
    finally:
        core.delete_namespace(ns)
        for plural, name in (
            ("clusterqueues", s.cq),
            ("clusterqueues", s.roomy),
            ("resourceflavors", s.flavor),
            ("workloadpriorityclasses", s.priority_class),
        ):
            kueue.delete_cluster_scoped(plural, name)


def _section(output: str, title: str) -> list[str]:
    """The indented lines under a describe heading (its table without the header)."""
    lines = output.split(f"\n{title}\n", 1)[1].splitlines()
    body = []
    for line in lines[1:]:
        if not line.startswith("  "):
            break
        body.append(line.strip())
    return body


def _counts(queue: dict[str, Any]) -> tuple[int, int, int]:
    status = queue.get("status") or {}
    return tuple(  # type: ignore[return-value]
        status.get(f"{field}Workloads", 0) for field in ("pending", "reserving", "admitted")
    )


def _rows(output: str) -> dict[str, list[str]]:
    """Table rows by their first cell."""
    return {line.split()[0]: line.split() for line in output.splitlines()[1:]}


# -- list ---------------------------------------------------------------------------------


def test_list_workloads_shows_queue_priority_status_and_cost(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = scenario.run(capsys, "list", "workloads", "-n", scenario.namespace)
    assert (code, err) == (0, "")
    assert out.splitlines()[0].split() == [
        "NAME",
        "QUEUE",
        "CLUSTERQUEUE",
        "PRIORITY",
        "STATUS",
        "COST",
        "AGE",
    ]
    rows = _rows(out)
    cq = scenario.cq
    assert rows["steady"][:6] == ["steady", "lq", cq, "5", "Admitted", "0"]
    assert rows["urgent"][:6] == ["urgent", "lq", cq, "100", "Admitted", "0"]
    assert rows["stuck"][:6] == ["stuck", "lq", cq, "1", "Pending", "0"]
    assert rows["victim"][:6] == ["victim", "lq", cq, "1", "Evicted", "0"]


def test_list_workloads_across_namespaces_and_as_json(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = scenario.run(capsys, "list", "wl", "-A")
    assert code == 0
    assert out.splitlines()[0].split()[:2] == ["NAMESPACE", "NAME"]
    assert [scenario.namespace, "stuck", "lq", scenario.cq] in [
        line.split()[:4] for line in out.splitlines()
    ]
    code, out, _ = scenario.run(capsys, "list", "workload", "-n", scenario.namespace, "-o", "json")
    assert code == 0
    names = {item["metadata"]["name"] for item in json.loads(out)["items"]}
    assert names == {"steady", "victim", "stuck", "urgent"}


def test_list_clusterqueues_and_localqueues(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = scenario.run(capsys, "list", "clusterqueues")
    assert code == 0
    assert out.splitlines()[0].split() == [
        "NAME",
        "COHORT",
        "PENDING",
        "RESERVING",
        "ADMITTED",
        "ACTIVE",
    ]
    rows = _rows(out)
    assert rows[scenario.cq] == [scenario.cq, "<none>", "2", "2", "2", "True"]
    assert rows[scenario.roomy] == [scenario.roomy, "<none>", "0", "0", "0", "True"]

    code, out, _ = scenario.run(capsys, "list", "lq", "-n", scenario.namespace)
    assert code == 0
    assert out.splitlines()[0].split() == ["NAME", "CLUSTERQUEUE", "PENDING", "ADMITTED"]
    rows = _rows(out)
    assert rows["lq"] == ["lq", scenario.cq, "2", "2"]
    assert rows["roomy-lq"] == ["roomy-lq", scenario.roomy, "0", "0"]


# -- describe -----------------------------------------------------------------------------


def test_describe_an_admitted_workload(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = scenario.run(
        capsys, "describe", "workload", "steady", "-n", scenario.namespace
    )
    assert (code, err) == (0, "")
    print(out)
    assert "Status:           Admitted" in out
    assert f"Queue:            lq (ClusterQueue {scenario.cq})" in out
    assert "Priority:         5 (spec.priority)" in out
    assert "Preemptibility:   preemptible (source: default" in out
    assert "status.resolvedPreemptibility" in out
    assert "Preemption cost:  0 (unset)" in out
    assert "Position:         <none> (not waiting in a queue)" in out
    assert f"  ClusterQueue: {scenario.cq}" in out
    assert _section(out, "Admission:")[1:] == [f"main     1       cpu={scenario.flavor}   cpu=2"]
    assert "Pending reason" not in out
    assert "Eviction history:\n  <none>" in out


def test_describe_a_pending_workload_shows_its_reason_and_position(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    written = condition(scenario.kueue.get_workload(scenario.namespace, "stuck"), "QuotaReserved")
    assert written is not None and written["status"] == "False"  # what the controller wrote
    code, out, _ = scenario.run(capsys, "describe", "wl", "stuck", "-n", scenario.namespace)
    assert code == 0
    print(out)
    assert "Status:           Pending" in out
    assert f"of 2 pending in ClusterQueue {scenario.cq}" in out
    assert f"of 2 in LocalQueue {scenario.namespace}/lq" in out
    reason_line = next(line for line in out.splitlines() if line.startswith("Pending reason:"))
    assert "insufficient quota for cpu in flavor" in reason_line
    assert written["message"] in reason_line
    assert "Admission:        <none>" in out
    # Nothing running in its queue has a known runtime: no estimate, and the answer says why.
    estimate = next(line for line in out.splitlines() if line.startswith("Estimated admission:"))
    assert estimate.startswith(
        "Estimated admission: none: cannot estimate: it waits for 2 admitted Workloads whose "
        "runtime is unknown"
    )
    assert f"{scenario.namespace}/steady" in estimate and f"{scenario.namespace}/urgent" in estimate


def test_describe_estimates_when_a_pending_workload_will_be_admitted(
    controller: ControllerProcess,
    api_client: client.ApiClient,
    kubeconfig_path: str,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A 2-CPU queue runs `first` (maximumExecutionTimeSeconds 3600); `second` (expected
    runtime 600 s, by annotation) waits, then `third`: `third` is admitted when `second`
    ends, 3600 + 600 s after `first` was reserved."""
    kueue = Kueue(api_client)
    ns = f"kp-{uuid.uuid4().hex[:8]}"
    client.CoreV1Api(api_client).create_namespace({"metadata": {"name": ns}})
    first = workload(ns, "first", "lq", cpu="2")
    first["spec"]["maximumExecutionTimeSeconds"] = 3600
    second = workload(ns, "second", "lq", cpu="2")
    second["metadata"]["annotations"] = {EXPECTED_RUNTIME_ANNOTATION: "600"}
    kueue.apply(
        flavor(f"{ns}-rf"),
        cluster_queue(f"{ns}-cq", {f"{ns}-rf": {"cpu": 2}}),
        local_queue(ns, "lq", f"{ns}-cq"),
        first,
    )
    admitted = wait_admitted(kueue, ns, "first")
    reserved = condition(admitted, "QuotaReserved")["lastTransitionTime"]  # type: ignore[index]
    kueue.apply(second)
    wait_pending_reason(kueue, ns, "second")
    kueue.apply(workload(ns, "third", "lq", cpu="2"))
    wait_pending_reason(kueue, ns, "third")
    code, out, _ = Scenario(ns, kubeconfig_path, kueue, "", "", "", "").run(
        capsys, "describe", "workload", "third", "-n", ns
    )
    assert code == 0, out
    print(out)
    expected = ws.rfc3339(ws.parse_rfc3339(reserved) + 3600 + 600)  # type: ignore[operator]
    # 70 minutes after the reservation, less the seconds this test took to get here.
    assert re.search(rf"Estimated admission: {expected} \(in 6\dm, ClusterQueue {ns}-cq\)", out)
    assert "no known runtime" not in out  # other namespaces' queues are out of its reach
    assert (
        "runtimes known: 1 from quotagate.x-k8s.io/expected-runtime-seconds, "
        "1 from spec.maximumExecutionTimeSeconds"
    ) in out
    assert "1 Workload(s) admitted before it and 0 preemption(s)" in out
    code, out, _ = Scenario(ns, kubeconfig_path, kueue, "", "", "", "").run(
        capsys, "describe", "workload", "third", "-n", ns, "-o", "json"
    )
    described = json.loads(out)["estimatedAdmission"]
    assert described["at"] == expected and described["reason"] is None
    assert described["assumptions"]["admittedBefore"] == 1
    # A single simulated cycle admits `second`, not `third`: a lower bound, said as such.
    code, out, _ = Scenario(ns, kubeconfig_path, kueue, "", "", "", "").run(
        capsys, "describe", "workload", "third", "-n", ns, "--estimate-cycles", "1"
    )
    assert code == 0, out
    assert "Estimated admission: none: no estimate within 1 simulated admission cycles; " in out
    code, out, _ = Scenario(ns, kubeconfig_path, kueue, "", "", "", "").run(
        capsys, "describe", "workload", "third", "-n", ns, "--estimate-cycles", "0"
    )
    assert code == 0 and "Estimated admission" not in out, out


def test_describe_an_evicted_workload_shows_its_eviction_history(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = scenario.run(capsys, "describe", "workload", "victim", "-n", scenario.namespace)
    assert code == 0
    print(out)
    assert "Status:           Evicted" in out
    history = out.split("Eviction history:\n")[1].splitlines()
    assert history[0].split() == ["REASON", "UNDERLYING", "CAUSE", "COUNT"]
    assert history[1].split() == ["Preempted", "<none>", "1"]
    conditions = {line.split()[0]: line.split()[1:3] for line in _section(out, "Conditions:")}
    assert conditions["Evicted"] == ["True", "Preempted"]
    assert conditions["Preempted"] == ["True", "InClusterQueue"]

    code, out, _ = scenario.run(
        capsys, "describe", "workload", "victim", "-n", scenario.namespace, "-o", "json"
    )
    described = json.loads(out)
    assert described["evictions"] == [{"reason": "Preempted", "underlyingCause": "", "count": 1}]
    assert described["status"] == "Evicted"


# -- whatif -------------------------------------------------------------------------------


def test_whatif_fits_and_names_the_flavor(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["whatif", "--queue", "roomy-lq", "-n", scenario.namespace, "--requests", "cpu=2"]
    code, out, err = scenario.run(capsys, *args, "--count", "3")
    assert (code, err) == (0, "")
    print(out)
    assert f"would be admitted by ClusterQueue {scenario.roomy}" in out
    assert "borrowing: no" in out
    assert f"flavors: cpu={scenario.flavor}" in out
    code, out, _ = scenario.run(capsys, *args, "-o", "json")
    answer = json.loads(out)
    assert answer["decision"] == "admit"
    assert answer["podSets"] == [{"name": "main", "count": 1, "flavors": {"cpu": scenario.flavor}}]
    assert answer["workload"].startswith(f"{scenario.namespace}/whatif-")
    # Nothing was created: whatif only asks the engine.
    names = {w["metadata"]["name"] for w in scenario.kueue.workloads(scenario.namespace)}
    assert names == {"steady", "victim", "stuck", "urgent"}


def test_whatif_preempts_a_named_lower_priority_victim(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = scenario.run(
        capsys,
        "whatif",
        "--queue",
        "lq",
        "-n",
        scenario.namespace,
        "--priority-class",
        scenario.priority_class,
        "--requests",
        "cpu=2",
    )
    assert (code, err) == (0, "")
    print(out)
    assert "priority 50)" in out
    assert f"would be admitted by ClusterQueue {scenario.cq} after preempting 1 workload" in out
    lines = out.splitlines()
    header = next(i for i, line in enumerate(lines) if line.split()[:1] == ["VICTIM"])
    assert lines[header + 1].split() == [
        f"{scenario.namespace}/steady",
        scenario.cq,
        "InClusterQueue",
        "1",
    ]
    assert lines[header + 2].strip() == "decided with: the controller's defaults (no --config)"


def test_whatif_without_room_or_victims_stays_pending_with_the_reason(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = scenario.run(
        capsys,
        "whatif",
        "--queue",
        "lq",
        "-n",
        scenario.namespace,
        "--requests",
        "cpu=2,memory=1Gi",
        "-o",
        "yaml",
    )
    assert code == 0
    answer = yaml.safe_load(out)
    assert answer["decision"] == "pending"
    assert answer["priority"] == 0
    assert answer["clusterQueue"] == scenario.cq
    assert "memory" in answer["reason"] or "insufficient quota" in answer["reason"]


# -- errors -------------------------------------------------------------------------------


def test_unknown_workload_is_a_one_line_not_found(
    scenario: Scenario, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = scenario.run(capsys, "describe", "workload", "nope", "-n", scenario.namespace)
    assert code == 1
    assert out == ""
    assert err == 'Error from server (NotFound): workloads.kueue.x-k8s.io "nope" not found\n'

    code, _, err = scenario.run(
        capsys, "whatif", "--queue", "nowhere", "-n", scenario.namespace, "--requests", "cpu=1"
    )
    assert code == 1
    assert err == 'Error from server (NotFound): localqueues.kueue.x-k8s.io "nowhere" not found\n'


def test_unreachable_server_is_a_one_line_error(
    kubeconfig_path: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    port = free_port()  # nothing listens there
    config = yaml.safe_load(Path(kubeconfig_path).read_text())
    config["clusters"][0]["cluster"]["server"] = f"https://127.0.0.1:{port}"
    closed = tmp_path / "closed.kubeconfig"
    closed.write_text(yaml.safe_dump(config))
    assert main(["list", "clusterqueues", "--kubeconfig", str(closed)]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err == (
        f"error: the connection to the server 127.0.0.1:{port} was refused - "
        "did you specify the right host or port?\n"
    )
    assert main(["list", "cq", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert (
        capsys.readouterr().err
        == f"error: stat {tmp_path / 'missing'}: no such file or directory\n"
    )


def test_forbidden_is_a_one_line_error_from_server(
    scenario: Scenario,
    api_client: client.ApiClient,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    core = client.CoreV1Api(api_client)
    core.create_namespaced_service_account(scenario.namespace, {"metadata": {"name": "nobody"}})
    token = wait_for(lambda: _token(core, scenario.namespace), what="a token for nobody")
    config = yaml.safe_load(Path(scenario.kubeconfig).read_text())
    config["users"] = [{"name": "nobody", "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = "nobody"
    config["contexts"][0]["context"]["namespace"] = scenario.namespace
    path = tmp_path / "nobody.kubeconfig"
    path.write_text(yaml.safe_dump(config))
    assert main(["list", "workloads", "--kubeconfig", str(path)]) == 1
    err = capsys.readouterr().err
    assert err.startswith("Error from server (Forbidden): workloads.kueue.x-k8s.io is forbidden: ")
    assert f'in the namespace "{scenario.namespace}"' in err  # the context's namespace
    assert err.count("\n") == 1


def _token(core: client.CoreV1Api, namespace: str) -> str | None:
    try:
        answer = core.create_namespaced_service_account_token(
            "nobody", namespace, {"spec": {"expirationSeconds": 3600}}
        )
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise
    return str(answer.status.token)


# -- as kubectl runs it ---------------------------------------------------------------------


def test_console_script_and_kubectl_plugin_discovery(scenario: Scenario) -> None:
    script = VENV_BIN / "kubectl-quotagate"
    result = subprocess.run(
        [
            str(script),
            "list",
            "workloads",
            "-n",
            scenario.namespace,
            "--kubeconfig",
            scenario.kubeconfig,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 0, result.stderr
    assert _rows(result.stdout)["stuck"][4] == "Pending"

    env = {**os.environ, "PATH": f"{VENV_BIN}{os.pathsep}{os.environ.get('PATH', '')}"}
    result = subprocess.run(
        [
            str(bin_dir() / "kubectl"),
            "quotagate",
            "list",
            "clusterqueues",
            "--kubeconfig",
            scenario.kubeconfig,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )
    assert result.returncode == 0, result.stderr
    assert _rows(result.stdout)[scenario.cq][1:] == ["<none>", "2", "2", "2", "True"]

    started = time.monotonic()
    result = subprocess.run(
        [
            str(script),
            "describe",
            "workload",
            "ghost",
            "-n",
            scenario.namespace,
            "--kubeconfig",
            scenario.kubeconfig,
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert result.returncode == 1
    assert (
        result.stderr
        == 'Error from server (NotFound): workloads.kueue.x-k8s.io "ghost" not found\n'
    )
    assert "Traceback" not in result.stderr
    assert time.monotonic() - started < 30
