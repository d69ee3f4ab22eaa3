"""The pure parts of `kubectl quotagate` (controller/kubectl/, controller/kubectl/plugin.py):
argument parsing, status derivation, tables, kubectl-style errors, describe and whatif on
in-memory objects. The live-cluster behaviour is in tests/integration/test_kubectl_plugin.py."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import urllib3
from kubernetes.client.exceptions import ApiException

from api.constants import MINIMUM_RUNTIME_ANNOTATION
from controller.config import load_config
from controller.core.model.from_api import convert
from controller.core.model.priorities import ResolvedPriority
from controller.kubectl.connection import (
    ConnectionOptions,
    KubectlError,
    connect,
    server_error,
    transport_error,
)
from controller.kubectl.describe import describe_workload, format_quantity, render_description
from controller.kubectl.listing import cluster_queue_table, local_queue_table, workload_table
from controller.kubectl.plugin import main, resource_type
from controller.kubectl.printing import age, format_table, human_duration
from controller.kubectl.snapshot import Snapshot
from controller.kubectl.whatif import (
    decide,
    hypothetical_workload,
    parse_requests,
    priority_class,
    priority_class_ref,
    render_answer,
)
from controller.kubectl.workload_view import describe_priority, status_of

NOW = 1_800_000_000.0  # 2027-01-15T08:00:00Z
CREATED = "2027-01-15T07:59:00Z"  # one minute before NOW


# -- builders -------------------------------------------------------------------------------


def flavor(name: str = "rf") -> dict[str, Any]:
    return {"kind": "ResourceFlavor", "metadata": {"name": name}, "spec": {}}


def cluster_queue(name: str = "cq", cpu: str = "4", **spec: Any) -> dict[str, Any]:
    return {
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {
            "namespaceSelector": {},
            "resourceGroups": [
                {
                    "coveredResources": ["cpu"],
                    "flavors": [
                        {"name": "rf", "resources": [{"name": "cpu", "nominalQuota": cpu}]}
                    ],
                }
            ],
            **spec,
        },
    }


def local_queue(name: str = "lq", cq: str = "cq", namespace: str = "ns") -> dict[str, Any]:
    return {
        "kind": "LocalQueue",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"clusterQueue": cq},
    }


def workload(
    name: str,
    cpu: str = "1",
    priority: int | None = None,
    conditions: list[dict[str, Any]] | None = None,
    admitted_in: str | None = None,
    created: str = CREATED,
    **spec: Any,
) -> dict[str, Any]:
    body: dict[str, Any] = {
        "kind": "Workload",
        "metadata": {
            "name": name,
            "namespace": "ns",
            "uid": f"uid-{name}",
            "creationTimestamp": created,
        },
        "spec": {
            "queueName": "lq",
            "podSets": [
                {
                    "name": "main",
                    "count": 1,
                    "template": {
                        "spec": {
                            "containers": [{"name": "c", "resources": {"requests": {"cpu": cpu}}}]
                        }
                    },
                }
            ],
            **spec,
        },
        "status": {"conditions": conditions or []},
    }
    if priority is not None:
        body["spec"]["priority"] = priority
    if admitted_in:
        body["status"]["admission"] = {
            "clusterQueue": admitted_in,
            "podSetAssignments": [
                {
                    "name": "main",
                    "count": 1,
                    "flavors": {"cpu": "rf"},
                    "resourceUsage": {"cpu": cpu},
                }
            ],
        }
        body["status"]["conditions"] = [
            cond("QuotaReserved", "True", "QuotaReserved"),
            cond("Admitted", "True", "Admitted"),
            *(conditions or []),
        ]
    return body


def cond(type_: str, status: str, reason: str = "", message: str = "") -> dict[str, Any]:
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "lastTransitionTime": CREATED,
    }


def snapshot(*objects: dict[str, Any]) -> Snapshot:
    return Snapshot.convert([flavor(), cluster_queue(), local_queue(), *objects])


# -- arguments ------------------------------------------------------------------------------


def test_parse_requests_reads_resource_quantity_pairs() -> None:
    assert parse_requests("cpu=4,memory=8Gi") == {"cpu": "4", "memory": "8Gi"}
    assert parse_requests(" cpu = 500m , nvidia.com/gpu=1") == {
        "cpu": "500m",
        "nvidia.com/gpu": "1",
    }


@pytest.mark.parametrize(
    ("text", "complaint"),
    [
        ("cpu", "'cpu' is not RESOURCE=QUANTITY"),
        ("cpu=", "'cpu=' is not RESOURCE=QUANTITY"),
        ("=4", "'=4' is not RESOURCE=QUANTITY"),
        ("cpu=4,,memory=1Gi", "'' is not RESOURCE=QUANTITY"),
        ("cpu=lots", "cpu: invalid quantity"),
        ("cpu=1,cpu=2", "cpu is given twice"),
        ("cpu=-1", "must not be negative"),
        ("c p u=1", "'c p u' is not a resource name"),
    ],
)
def test_parse_requests_names_the_bad_item(text: str, complaint: str) -> None:
    with pytest.raises(ValueError) as raised:
        parse_requests(text)
    assert complaint in str(raised.value)


def test_bad_requests_are_a_usage_error_before_any_connection(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["whatif", "--queue", "lq", "--requests", "cpu"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: kubectl quotagate whatif")
    assert "error: argument --requests: 'cpu' is not RESOURCE=QUANTITY" in err
    assert "Traceback" not in err


def test_resource_types_and_aliases() -> None:
    for alias in ("wl", "workload", "workloads", "Workloads", "workloads.kueue.x-k8s.io"):
        assert resource_type(alias) == "workloads"
    for alias in ("cq", "clusterqueue", "clusterqueues"):
        assert resource_type(alias) == "clusterqueues"
    for alias in ("lq", "localqueue", "localqueues.kueue.x-k8s.io"):
        assert resource_type(alias) == "localqueues"


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["list", "pods"], 'unknown resource type "pods"'),
        (
            ["describe", "clusterqueue", "x"],
            "describe supports workloads and the kinds of the integrations (job, deployment, "
            "jobset, mpijob, leaderworkerset, pod, raycluster, rayjob, statefulset, trainjob), "
            'not "clusterqueue"',
        ),
        (["whatif", "--queue", "lq", "--requests", "cpu=1", "--count", "0"], "must be at least 1"),
        (
            [
                "whatif",
                "--queue",
                "q",
                "--requests",
                "cpu=1",
                "--priority",
                "1",
                "--priority-class",
                "x",
            ],
            "not allowed with argument",
        ),
        ([], "the following arguments are required: COMMAND"),
    ],
)
def test_bad_usage_exits_2_like_argparse(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert complaint in captured.err


def test_help_lists_the_commands_and_kubectl_flags(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--help"]) == 0
    out = capsys.readouterr().out
    for word in ("list", "describe", "whatif", "--kubeconfig", "--context", "--namespace"):
        assert word in out


# -- connection and errors ------------------------------------------------------------------


def _api_exception(status: int, body: Any, reason: str = "") -> ApiException:
    exc = ApiException(status=status, reason=reason)
    exc.body = body if isinstance(body, str) else json.dumps(body)
    return exc


def test_errors_from_the_server_read_like_kubectl() -> None:
    not_found = {
        "kind": "Status",
        "status": "Failure",
        "reason": "NotFound",
        "message": 'workloads.kueue.x-k8s.io "x" not found',
        "code": 404,
    }
    error = server_error(_api_exception(404, not_found, "Not Found"))
    assert error.message == 'Error from server (NotFound): workloads.kueue.x-k8s.io "x" not found'
    assert (error.status, error.exit_code) == (404, 1)
    forbidden = {**not_found, "reason": "Forbidden", "message": "workloads is forbidden:\nUser x"}
    assert server_error(_api_exception(403, forbidden)).message == (
        "Error from server (Forbidden): workloads is forbidden: User x"
    )
    assert server_error(_api_exception(401, "")).message == (
        "error: You must be logged in to the server (Unauthorized)"
    )
    assert server_error(_api_exception(503, "upstream\nbusy", "Service Unavailable")).message == (
        "Error from server (Service Unavailable): upstream busy"
    )
    tls = ApiException(status=0, reason="SSLError\ncertificate verify failed")
    assert server_error(tls).message == "error: SSLError certificate verify failed"


def test_transport_errors_are_one_line() -> None:
    refused = urllib3.exceptions.MaxRetryError(
        None,  # type: ignore[arg-type]
        "/api",
        urllib3.exceptions.NewConnectionError(
            None,  # type: ignore[arg-type]
            "Failed to establish a new connection: [Errno 111] Connection refused",
        ),
    )
    assert transport_error(refused, "127.0.0.1:6443", 30).message == (
        "error: the connection to the server 127.0.0.1:6443 was refused - "
        "did you specify the right host or port?"
    )
    slow = urllib3.exceptions.ReadTimeoutError(None, "/api", "read timed out")  # type: ignore[arg-type]
    assert transport_error(slow, "10.0.0.1:443", 30).message == (
        "error: the server 10.0.0.1:443 did not answer within 30s (see --request-timeout)"
    )
    reset = ConnectionResetError(104, "Connection reset by peer")
    assert transport_error(reset, "h:1", None).message.startswith(
        "error: cannot reach the server h:1"
    )


def _kubeconfig(path: Path, namespace: str | None = None) -> Path:
    context: dict[str, Any] = {"cluster": "c", "user": "u"}
    if namespace:
        context["namespace"] = namespace
    path.write_text(
        json.dumps(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": "https://127.0.0.1:1"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [
                    {"name": "main", "context": context},
                    {"name": "other", "context": {"cluster": "c", "user": "u", "namespace": "o"}},
                ],
                "current-context": "main",
            }
        )
    )
    return path


def test_connect_uses_the_contexts_namespace(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config", namespace="team-a")
    connection = connect(ConnectionOptions(kubeconfig=str(path)), environ={})
    assert connection.default_namespace == "team-a"
    assert connection.server == "127.0.0.1:1"
    other = connect(ConnectionOptions(kubeconfig=str(path), context="other"), environ={})
    assert other.default_namespace == "o"
    # $KUBECONFIG may list several files; missing ones are skipped, as kubectl does.
    listed = f"{tmp_path / 'missing'}:{_kubeconfig(tmp_path / 'b')}"
    bare = connect(ConnectionOptions(), environ={"KUBECONFIG": listed})
    assert bare.default_namespace == "default"


def test_connect_errors_are_kubectls(tmp_path: Path) -> None:
    path = _kubeconfig(tmp_path / "config")
    with pytest.raises(KubectlError) as raised:
        connect(ConnectionOptions(kubeconfig=str(path), context="nope"), environ={})
    assert raised.value.message == "error: context was not found for specified context: nope"
    with pytest.raises(KubectlError) as raised:
        connect(ConnectionOptions(kubeconfig=str(tmp_path / "missing")), environ={})
    assert raised.value.message == f"error: stat {tmp_path / 'missing'}: no such file or directory"
    with pytest.raises(KubectlError) as raised:
        connect(ConnectionOptions(), environ={"HOME": str(tmp_path)})
    assert raised.value.message.startswith("error: no configuration has been provided")


def test_no_kubeconfig_is_one_line_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("KUBECONFIG", raising=False)
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert main(["list", "clusterqueues"]) == 1
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("error: no configuration has been provided")


# -- printing -------------------------------------------------------------------------------


def test_format_table_aligns_like_kubectl() -> None:
    assert format_table(["NAME", "AGE"], [["a-long-name", "5s"], ["b", "10m"]]) == (
        "NAME          AGE\na-long-name   5s\nb             10m"
    )


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (180, "3m"),
        (15 * 60, "15m"),
        (3 * 3600 + 60, "3h1m"),
        (10 * 3600, "10h"),
        (3 * 86400 + 4 * 3600, "3d4h"),
        (40 * 86400, "40d"),
        (3 * 365 * 86400 + 10 * 86400, "3y10d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_human_duration_matches_kubectl(seconds: int, text: str) -> None:
    assert human_duration(seconds) == text


def test_age_of_a_timestamp() -> None:
    assert age(CREATED, NOW) == "60s"
    assert age(None, NOW) == "<unknown>"
    assert age("yesterday", NOW) == "<unknown>"


def test_format_quantity_prints_bytes_in_binary() -> None:
    assert format_quantity(8 * 1024**3 * 1000) == "8Gi"
    assert format_quantity(4000) == "4"
    assert format_quantity(500) == "500m"


# -- status and lists -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "status"),
    [
        ([], "Pending"),
        ([cond("QuotaReserved", "False", "WaitingForQuota")], "Pending"),
        ([cond("QuotaReserved", "True")], "QuotaReserved"),
        ([cond("QuotaReserved", "True"), cond("Admitted", "True")], "Admitted"),
        ([cond("QuotaReserved", "True"), cond("Evicted", "True", "Preempted")], "Evicted"),
        ([cond("QuotaReserved", "False"), cond("Evicted", "True", "Preempted")], "Evicted"),
        ([cond("Admitted", "True"), cond("Evicted", "False")], "Admitted"),
        ([cond("Admitted", "True"), cond("Finished", "True")], "Finished"),
    ],
)
def test_status_from_conditions(conditions: list[dict[str, Any]], status: str) -> None:
    assert status_of({"status": {"conditions": conditions}}) == status


def test_workload_table_resolves_queue_and_priority() -> None:
    classes = Snapshot.convert(
        [{"kind": "WorkloadPriorityClass", "metadata": {"name": "high"}, "value": 1000}]
    ).priority_classes()
    running = workload("running", admitted_in="cq", priority=5)
    running["status"]["preemptionCost"] = "3"
    waiting = workload("waiting", priorityClassRef={"group": "kueue.x-k8s.io", "name": "high"})
    table = workload_table([waiting, running], {"ns/lq": "cq"}, classes, NOW)
    assert table.splitlines() == [
        "NAME      QUEUE   CLUSTERQUEUE   PRIORITY   STATUS     COST   AGE",
        "running   lq      cq             5          Admitted   3      60s",
        "waiting   lq      cq             1000       Pending    0      60s",
    ]
    wide = workload_table([waiting], {}, classes, NOW, all_namespaces=True, wide=True)
    assert wide.splitlines()[0].split() == [
        "NAMESPACE",
        "NAME",
        "QUEUE",
        "CLUSTERQUEUE",
        "PRIORITY",
        "STATUS",
        "COST",
        "AGE",
        "PREEMPTIBILITY",
        "MESSAGE",
    ]
    assert wide.splitlines()[1].split()[:4] == ["ns", "waiting", "lq", "<none>"]


def test_queue_tables_show_the_controllers_counts() -> None:
    cq = cluster_queue(cohortName="team")
    cq["status"] = {
        "pendingWorkloads": 3,
        "reservingWorkloads": 2,
        "admittedWorkloads": 1,
        "conditions": [cond("Active", "True", "Ready")],
    }
    assert cluster_queue_table([cq]).splitlines()[1].split() == [
        "cq",
        "team",
        "3",
        "2",
        "1",
        "True",
    ]
    assert cluster_queue_table([cq], wide=True).splitlines()[1].split()[-2:] == [
        "BestEffortFIFO",
        "rf",
    ]
    lq = local_queue()
    lq["status"] = {"pendingWorkloads": 3, "admittedWorkloads": 1}
    assert local_queue_table([lq]).splitlines() == [
        "NAME   CLUSTERQUEUE   PENDING   ADMITTED",
        "lq     cq             3         1",
    ]
    assert local_queue_table([lq], all_namespaces=True).splitlines()[1].split()[:2] == ["ns", "lq"]


def test_describe_priority_names_its_origin() -> None:
    ref = {
        "priorityClassRef": {
            "group": "kueue.x-k8s.io",
            "kind": "WorkloadPriorityClass",
            "name": "hi",
        }
    }
    obj: dict[str, Any] = {"spec": ref}
    assert describe_priority(obj, ResolvedPriority(9, "", "workloadPriorityClass")) == (
        "9 (WorkloadPriorityClass hi)"
    )
    assert describe_priority(obj, ResolvedPriority(9, "", "spec")) == (
        "9 (spec.priority, set from WorkloadPriorityClass hi)"
    )
    assert describe_priority(obj, ResolvedPriority(0, "", "default")) == (
        "0 (default: no priority or class; WorkloadPriorityClass hi not found)"
    )
    assert describe_priority({"spec": {}}, ResolvedPriority(7, "", "globalDefault")) == (
        "7 (the globalDefault PriorityClass)"
    )


# -- describe -------------------------------------------------------------------------------


def test_describe_a_pending_workload_without_a_written_reason_asks_the_engine() -> None:
    holder = workload("holder", cpu="3", admitted_in="cq", priority=5)
    waiting = workload("waiting", cpu="2", created="2027-01-15T07:59:30Z")
    earlier = workload("earlier", cpu="2")
    d = describe_workload(waiting, snapshot(holder, waiting, earlier), NOW)
    assert d["status"] == "Pending"
    assert d["clusterQueue"] == "cq"
    assert d["position"] == {
        "clusterQueue": "cq",
        "position": 2,
        "pending": 2,
        "localQueuePosition": 2,
        "localQueuePending": 2,
    }
    assert d["pendingReason"]["source"] == "engine"
    assert d["pendingReason"]["message"].startswith("insufficient quota for cpu in flavor rf")
    assert d["priority"]["text"] == "0 (default: no priority or class)"
    assert d["preemptibility"]["value"] == "preemptible"
    text = render_description(d, NOW)
    assert "Position:         2 of 2 pending in ClusterQueue cq; 2 of 2 in LocalQueue ns/lq" in text
    assert "(computed by the engine; the controller has written no reason yet)" in text
    assert "computed here: the controller has not written it yet" in text


def test_describe_an_evicted_workload_shows_history_and_the_written_reason() -> None:
    evicted = workload(
        "victim",
        conditions=[
            cond("QuotaReserved", "False", "WaitingForQuota", "insufficient quota for cpu"),
            cond("Evicted", "True", "Preempted", "Preempted to accommodate ns/urgent"),
        ],
    )
    evicted["status"]["schedulingStats"] = {
        "evictions": [{"reason": "Preempted", "underlyingCause": "", "count": 2}]
    }
    evicted["status"]["resolvedPreemptibility"] = {"value": "preemptible", "source": "spec"}
    evicted["status"]["preemptionCost"] = "2"
    d = describe_workload(evicted, snapshot(evicted), NOW)
    text = render_description(d, NOW)
    assert "Status:           Evicted" in text
    assert "Preemption cost:  2" in text
    assert "preemptible (source: spec.preemptibility; from status.resolvedPreemptibility)" in text
    assert "Pending reason:   insufficient quota for cpu (WaitingForQuota)" in text
    history = text.split("Eviction history:\n")[1].splitlines()
    assert history == [
        "  REASON      UNDERLYING CAUSE   COUNT",
        "  Preempted   <none>             2",
    ]


def test_describe_an_admitted_workload_shows_its_admission() -> None:
    running = workload("running", cpu="2", admitted_in="cq", priority=5)
    text = render_description(describe_workload(running, snapshot(running), NOW), NOW)
    assert "Position:         <none> (not waiting in a queue)" in text
    assert "Pending reason" not in text
    assert "  main     1       cpu=rf    cpu=2" in text
    assert "Pods ready:       <none> (no PodsReady condition: waitForPodsReady is off)" in text


def test_describe_an_admitted_workload_shows_whether_its_pods_are_ready() -> None:
    waiting = workload(
        "waiting",
        admitted_in="cq",
        conditions=[
            cond("PodsReady", "False", "WaitForRecovery", "At least one pod has failed, waiting")
        ],
    )
    d = describe_workload(waiting, snapshot(waiting), NOW)
    assert d["podsReady"] == {
        "status": "False",
        "reason": "WaitForRecovery",
        "message": "At least one pod has failed, waiting",
        "since": CREATED,
    }
    text = render_description(d, NOW)
    assert (
        f"Pods ready:       False (WaitForRecovery) since {CREATED} (60s ago): "
        "At least one pod has failed, waiting"
    ) in text


def test_describe_a_pending_workload_has_no_pods_ready_line() -> None:
    pending = workload(
        "pending", conditions=[cond("PodsReady", "False", "WaitForStart", "Not all pods")]
    )
    d = describe_workload(pending, snapshot(pending), NOW)
    assert d["podsReady"] is None
    assert "Pods ready" not in render_description(d, NOW)


# -- whatif ---------------------------------------------------------------------------------


def _ask(objects: Snapshot, **kwargs: Any) -> dict[str, Any]:
    body = hypothetical_workload("ns", "whatif-1", "lq", now=NOW, **kwargs)
    hypothetical = convert(body)
    return decide([*objects.objects, hypothetical], "ns/whatif-1", NOW, objects.new_state())


def _sharing_pair(shares_written: bool) -> list[dict[str, Any]]:
    """a and b (2 cpus each, may reclaim) in one cohort; b holds 4 with one Workload. The
    ClusterQueues' status has shares when the controller runs with fair sharing."""
    preemption = {"withinClusterQueue": "LowerPriority", "reclaimWithinCohort": "Any"}
    queues = [
        cluster_queue(n, cpu="2", cohortName="co", preemption=preemption) for n in ("cq", "b")
    ]
    if shares_written:
        for queue in queues:
            queue["status"] = {"fairSharing": {"weightedShare": 0}}
    big = workload("big", cpu="4", admitted_in="b")
    big["spec"]["queueName"] = "lq-b"
    return [flavor(), *queues, local_queue(), local_queue("lq-b", "b"), big]


def test_whatif_decides_with_fair_sharing_when_the_controller_writes_shares(
    tmp_path: Path,
) -> None:
    """3 cpus in cq (nominal 2): without fair sharing nothing may be preempted for a request
    beyond nominal quota; with it, cq's share once admitted (250) is below b's now (500),
    so b's Workload goes (rule S2-b). The plugin infers fair sharing from the shares in
    the ClusterQueues' status, or is told by --config."""
    plain = Snapshot.convert(_sharing_pair(shares_written=False))
    assert _ask(plain, requests={"cpu": "3"}, count=1)["decision"] == "pending"
    assert plain.settings == "the controller's defaults (no --config)"
    inferred = Snapshot.convert(_sharing_pair(shares_written=True))
    answer = _ask(inferred, requests={"cpu": "3"}, count=1)
    assert answer["decision"] == "preempt"
    assert answer["victims"] == [
        {"workload": "ns/big", "clusterQueue": "b", "reason": "InCohortFairSharing", "pods": 1}
    ]
    assert inferred.settings.startswith("fair sharing on (the ClusterQueues' status has shares)")
    config = tmp_path / "config.yaml"
    config.write_text("fairSharing: {preemptionStrategies: [LessThanOrEqualToFinalShare]}\n")
    told = Snapshot.convert(
        _sharing_pair(shares_written=False), config=load_config(config), config_path=str(config)
    )
    assert told.settings == f"--config {config}"
    assert _ask(told, requests={"cpu": "3"}, count=1)["decision"] == "pending"  # S2-a only


def test_hypothetical_workload_is_a_v1beta2_workload_created_now() -> None:
    body = hypothetical_workload(
        "ns", "whatif-1", "lq", {"cpu": "4", "memory": "8Gi"}, 3, NOW, priority=7
    )
    assert body["apiVersion"] == "kueue.x-k8s.io/v1beta2"
    assert body["metadata"]["creationTimestamp"] == "2027-01-15T08:00:00Z"
    pod_set = body["spec"]["podSets"][0]
    assert pod_set["count"] == 3
    assert pod_set["template"]["spec"]["containers"][0]["resources"]["requests"] == {
        "cpu": "4",
        "memory": "8Gi",
    }
    workload_ = convert(body)
    assert workload_.priority == 7  # type: ignore[union-attr]


def test_whatif_fits() -> None:
    answer = _ask(snapshot(), requests={"cpu": "2"}, count=2)
    assert answer == {
        "decision": "admit",
        "clusterQueue": "cq",
        "borrowing": False,
        "podSets": [{"name": "main", "count": 2, "flavors": {"cpu": "rf"}}],
    }


def test_whatif_preempts_the_lower_priority_victim() -> None:
    objects = Snapshot.convert(
        [
            flavor(),
            cluster_queue(preemption={"withinClusterQueue": "LowerPriority"}),
            local_queue(),
            workload("low", cpu="3", admitted_in="cq", priority=1),
        ]
    )
    answer = _ask(objects, requests={"cpu": "2"}, count=1, priority=10)
    assert answer["decision"] == "preempt"
    assert answer["victims"] == [
        {"workload": "ns/low", "clusterQueue": "cq", "reason": "InClusterQueue", "pods": 1}
    ]


def test_whatif_waits_for_a_victim_already_evicting() -> None:
    """The lower-priority Workload is already being evicted (it still holds its quota): the
    answer waits for it rather than evicting something else, and says it is leaving."""
    low = workload("low", cpu="3", admitted_in="cq", priority=1)
    low["status"]["conditions"].append(
        {"type": "Evicted", "status": "True", "reason": "Preempted", "message": "x"}
    )
    objects = Snapshot.convert(
        [
            flavor(),
            cluster_queue(preemption={"withinClusterQueue": "LowerPriority"}),
            local_queue(),
            low,
        ]
    )
    answer = _ask(objects, requests={"cpu": "2"}, count=1, priority=10)
    assert answer["decision"] == "preempt"
    assert answer["victims"] == [
        {
            "workload": "ns/low",
            "clusterQueue": "cq",
            "reason": "InClusterQueue",
            "pods": 1,
            "alreadyEvicting": True,
        }
    ]


def _protected_queue(seconds: str) -> dict[str, Any]:
    queue = cluster_queue(preemption={"withinClusterQueue": "LowerPriority"})
    queue["metadata"]["annotations"] = {MINIMUM_RUNTIME_ANNOTATION: seconds}
    return queue


def test_whatif_honours_the_minimum_runtime_of_the_victims_queue() -> None:
    low = workload("low", cpu="3", admitted_in="cq", priority=1)  # reserved a minute ago
    young = Snapshot.convert([flavor(), _protected_queue("300"), local_queue(), low])
    answer = _ask(young, requests={"cpu": "2"}, count=1, priority=10)
    assert answer["decision"] == "pending"
    assert "1 preemption candidate within its ClusterQueue's minimum runtime" in (answer["reason"])
    assert "the first preemptible at 2027-01-15T08:04:00Z" in answer["reason"]
    old = Snapshot.convert([flavor(), _protected_queue("60"), local_queue(), low])
    answer = _ask(old, requests={"cpu": "2"}, count=1, priority=10)
    assert answer["decision"] == "preempt"


def test_describe_says_when_an_admitted_workload_becomes_preemptible() -> None:
    running = workload("running", cpu="2", admitted_in="cq")
    objects = Snapshot.convert([flavor(), _protected_queue("300"), local_queue(), running])
    d = describe_workload(running, objects, NOW)
    assert d["minimumRuntime"] == {
        "clusterQueue": "cq",
        "seconds": 300,
        "at": "2027-01-15T08:04:00Z",
        "inSeconds": 240,
    }
    assert (
        "Preemptible from: 2027-01-15T08:04:00Z (in 4m; minimum runtime 300s of ClusterQueue cq;"
        " reclaiming quota its queue borrowed may preempt it sooner)"
    ) in render_description(d, NOW)
    later = describe_workload(running, objects, NOW + 600)
    assert "Preemptible from: now (it has run its minimum runtime 300s of ClusterQueue cq)" in (
        render_description(later, NOW + 600)
    )
    plain = describe_workload(running, snapshot(running), NOW)
    assert plain["minimumRuntime"] is None
    assert "Preemptible from" not in render_description(plain, NOW)


def test_whatif_queues_behind_equal_priority_and_stays_pending_with_the_reason() -> None:
    waiting = workload("waiting", cpu="2", created="2027-01-15T08:00:00Z")
    answer = _ask(
        snapshot(workload("holder", cpu="3", admitted_in="cq"), waiting),
        requests={"cpu": "2"},
        count=1,
    )
    assert answer["decision"] == "pending"
    assert answer["reason"].startswith("insufficient quota for cpu in flavor rf")


def test_priority_class_ref_prefers_the_workload_priority_class() -> None:
    objects = Snapshot.convert(
        [
            {"kind": "WorkloadPriorityClass", "metadata": {"name": "both"}, "value": 1},
            {"kind": "PriorityClass", "metadata": {"name": "both"}, "value": 2},
            {"kind": "PriorityClass", "metadata": {"name": "pod"}, "value": 3},
        ]
    ).objects
    assert priority_class_ref("both", objects) == {
        "group": "kueue.x-k8s.io",
        "kind": "WorkloadPriorityClass",
        "name": "both",
    }
    assert priority_class_ref("pod", objects) == {
        "group": "scheduling.k8s.io",
        "kind": "PriorityClass",
        "name": "pod",
    }
    assert priority_class_ref("none", objects) is None
    # With its value: Kueue's API wants a Workload's priority beside its priorityClassRef.
    assert priority_class("both", objects) == (
        {"group": "kueue.x-k8s.io", "kind": "WorkloadPriorityClass", "name": "both"},
        1,
    )


def test_render_answer() -> None:
    base = {
        "workload": "ns/whatif-1",
        "localQueue": "ns/lq",
        "requests": {"cpu": "2"},
        "count": 2,
        "priority": 0,
    }
    admitted = render_answer(
        {
            **base,
            "decision": "admit",
            "clusterQueue": "cq",
            "borrowing": True,
            "podSets": [{"name": "main", "count": 2, "flavors": {"cpu": "rf"}}],
        }
    )
    assert admitted.splitlines() == [
        "Workload ns/whatif-1 (2 pods × cpu=2; priority 0) in LocalQueue ns/lq:",
        "  would be admitted by ClusterQueue cq",
        "  borrowing: yes",
        "  flavors: cpu=rf",
    ]
    victims = [{"workload": "ns/low", "clusterQueue": "cq", "reason": "InClusterQueue", "pods": 1}]
    preempting = render_answer(
        {**base, "decision": "preempt", "clusterQueue": "cq", "victims": victims}
    )
    assert preempting.splitlines()[1:] == [
        "  would be admitted by ClusterQueue cq after preempting 1 workload:",
        "    VICTIM   CLUSTERQUEUE   REASON           PODS",
        "    ns/low   cq             InClusterQueue   1",
    ]
    leaving = [{**victims[0], "alreadyEvicting": True}]
    waiting = render_answer(
        {**base, "decision": "preempt", "clusterQueue": "cq", "victims": leaving}
    )
    assert (
        waiting.splitlines()[-1]
        == "    ns/low   cq             InClusterQueue (already evicting)   1"
    )
    pending = render_answer({**base, "decision": "pending", "clusterQueue": None, "reason": "why"})
    assert pending.splitlines()[1:] == [
        "  would stay pending in ClusterQueue <none>",
        "  reason: why",
    ]
