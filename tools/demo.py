"""`make demo`: a narrated tour of quotagate on a local control plane.

Starts (or reuses) the local control plane, installs quotagate's chart with real helm,
runs the controller and the cost controller from this checkout under the chart's
ServiceAccounts, applies the samples and walks through admission, a queued Job, a
preemption that picks the cheaper victim and the cost controller's patch.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from controller.integrations.framework.workload_names import workload_name
from tests.cluster.__main__ import REPO, STATE_DIR, WRAPPER_DIR, _read_state
from tests.cluster.__main__ import up as cluster_up
from tests.cluster.build import bin_dir
from tests.cluster.controlplane import free_port

NAMESPACE = "quotagate-system"
BOLD, DIM, RESET = ("\033[1m", "\033[2m", "\033[0m") if sys.stdout.isatty() else ("", "", "")


def say(text: str) -> None:
    print(f"\n{BOLD}== {text}{RESET}", flush=True)


def run(*args: str, check: bool = True, show: bool = True) -> str:
    if show:
        print(f"{DIM}$ {' '.join(a if ' ' not in a else repr(a) for a in args)}{RESET}", flush=True)
    result = subprocess.run(args, capture_output=True, text=True, cwd=REPO)
    if check and result.returncode != 0:
        raise SystemExit(f"demo: {' '.join(args)} failed:\n{result.stderr.strip()}")
    if show and result.stdout.strip():
        print(result.stdout.rstrip(), flush=True)
    return result.stdout


def kubectl(*args: str, show: bool = True, check: bool = True) -> str:
    return run(str(WRAPPER_DIR / "kubectl"), *args, show=show, check=check)


def wait(what: str, predicate: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.3)
    raise SystemExit(f"demo: timed out after {timeout:.0f}s waiting for {what}")


def job_workload(namespace: str, job: str) -> str:
    """The name of the Job's Workload (Kueue's: `job-<name>-<hash of its uid>`)."""
    uid = kubectl(
        "get", "job", job, "-n", namespace, "-o", "jsonpath={.metadata.uid}", show=False
    ).strip()
    return workload_name("Job", "batch", job, uid)


def workload(namespace: str, name: str) -> dict[str, Any]:
    out = kubectl(
        "get",
        "workloads.kueue.x-k8s.io",
        "-n",
        namespace,
        name,
        "-o",
        "json",
        show=False,
        check=False,
    )
    return json.loads(out) if out.strip() else {}


def condition(obj: dict[str, Any], type_: str) -> dict[str, Any]:
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == type_:
            return dict(c)
    return {}


def service_account_kubeconfig(kubeconfig: str, account: str, path: Path) -> str:
    token = kubectl(
        "create", "token", account, "-n", NAMESPACE, "--duration", "24h", show=False
    ).strip()
    config = yaml.safe_load(Path(kubeconfig).read_text())
    config["users"] = [{"name": account, "user": {"token": token}}]
    config["contexts"][0]["context"]["user"] = account
    path.write_text(yaml.safe_dump(config))
    return str(path)


def background(name: str, args: list[str]) -> None:
    log = (STATE_DIR / f"{name}.log").open("ab")
    process = subprocess.Popen(
        args,
        cwd=REPO,
        stdout=log,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        start_new_session=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    (STATE_DIR / f"{name}.pid").write_text(str(process.pid))


def main() -> int:
    say(
        "1. A local Kubernetes control plane (etcd, kube-apiserver, scheduler, controller-manager, 2 fake nodes)"
    )
    if cluster_up() != 0:
        return 1
    state = _read_state()
    assert state is not None
    kubeconfig = str(state["kubeconfig"])
    os.environ["KUBECONFIG"] = kubeconfig

    say(
        "2. Install quotagate with Helm (CRDs, RBAC, config); run the controllers from this checkout"
    )
    helm = str(bin_dir() / "helm")
    if "quotagate" not in run(helm, "list", "-n", NAMESPACE, "-q", show=False, check=False):
        run(
            helm,
            "install",
            "quotagate",
            str(REPO / "charts" / "quotagate"),
            "--namespace",
            NAMESPACE,
            "--create-namespace",
            "--set",
            "controller.replicas=0",
            "--set",
            "costController.replicas=0",
            "--set",
            "webhook.enabled=false",
            "--wait=false",
        )
    print(
        "(no image can be built here, so the Deployments run 0 replicas and the processes run from this"
    )
    print(
        " checkout: the cost controller with a token of the chart's ServiceAccount — only its KEP-7990 RBAC —"
    )
    print(
        " the controller as admin, because on this laptop-style setup it registers its own loopback webhook)"
    )
    cost_config = STATE_DIR / "cost.kubeconfig"
    service_account_kubeconfig(kubeconfig, "quotagate-cost-controller", cost_config)
    config_yaml = kubectl(
        "get",
        "configmap",
        "quotagate-config",
        "-n",
        NAMESPACE,
        "-o",
        "jsonpath={.data.config\\.yaml}",
        show=False,
    )
    (STATE_DIR / "controller.yaml").write_text(config_yaml)
    # The webhook runs on loopback with a self-signed certificate; the controller registers it.
    # (Creating a MutatingWebhookConfiguration needs cluster-admin, so that one process uses the admin kubeconfig.)
    port = free_port()
    if not (STATE_DIR / "controller.pid").exists():
        background(
            "controller",
            [
                sys.executable,
                "-m",
                "controller",
                "--kubeconfig",
                kubeconfig,
                "--config",
                str(STATE_DIR / "controller.yaml"),
                "--metrics-port",
                "0",
                "--health-port",
                str(free_port()),
                "--webhook-address",
                f"127.0.0.1:{port}",
                "--webhook-manage-config",
            ],
        )
        background(
            "cost-controller",
            [
                sys.executable,
                "-m",
                "costcontroller",
                "--kubeconfig",
                str(cost_config),
                "--resync",
                "2",
            ],
        )
    wait(
        "the controller to lead",
        lambda: "acquired lease" in (STATE_DIR / "controller.log").read_text(),
    )
    wait(
        "the webhook",
        lambda: (
            "quotagate" in kubectl("get", "mutatingwebhookconfigurations", "-o", "name", show=False)
        ),
    )
    print("controller: leading; webhook registered; cost controller: watching Workloads")

    say("3. Queues: two teams share a cohort; flavors map to node zones")
    for sample in (
        "00-flavors.yaml",
        "01-priorities.yaml",
        "02-clusterqueues.yaml",
        "03-localqueues.yaml",
    ):
        kubectl("apply", "-f", str(REPO / "config" / "samples" / sample))
    kubectl("get", "clusterqueues")

    say(
        "4. Quota admission: a Job in team-a (3 pods × 1 CPU) is created suspended, admitted, unsuspended"
    )
    kubectl("apply", "-f", str(REPO / "config" / "samples" / "10-job.yaml"))
    sample = job_workload("team-a", "sample-job")
    wait(
        "the Job's Workload admitted",
        lambda: condition(workload("team-a", sample), "Admitted").get("status") == "True",
    )
    kubectl("get", "workloads.kueue.x-k8s.io", "-n", "team-a")
    wait(
        "the Job unsuspended",
        lambda: (
            kubectl(
                "get",
                "job",
                "sample-job",
                "-n",
                "team-a",
                "-o",
                "jsonpath={.spec.suspend}",
                show=False,
            )
            == "false"
        ),
    )
    kubectl(
        "get",
        "job",
        "sample-job",
        "-n",
        "team-a",
        "-o",
        "jsonpath={.spec.suspend} {.spec.template.spec.nodeSelector}",
    )
    print()

    say(
        "5. A queued Job: team-a asks for 6 more CPUs; only borrowing could help, and it is not enough"
    )
    big = yaml.safe_load((REPO / "config" / "samples" / "10-job.yaml").read_text())
    big["metadata"]["name"] = "big-job"
    big["spec"]["parallelism"] = big["spec"]["completions"] = 6
    (STATE_DIR / "big-job.yaml").write_text(yaml.safe_dump(big))
    kubectl("apply", "-f", str(STATE_DIR / "big-job.yaml"))
    big_workload = job_workload("team-a", "big-job")
    reason = wait(
        "a pending reason",
        lambda: condition(workload("team-a", big_workload), "QuotaReserved").get("message"),
    )
    print(f"{big_workload} is pending: {reason}")
    kubectl("delete", "job", "big-job", "-n", "team-a", "--wait=false")

    say(
        "6. The cost controller writes status.preemptionCost (reference policy: evictions with reason Preempted)"
    )
    for name in ("batch-1", "batch-2"):
        body = {
            "apiVersion": "kueue.x-k8s.io/v1beta2",
            "kind": "Workload",
            "metadata": {"name": name, "namespace": "team-b"},
            "spec": {
                "queueName": "main",
                "priority": 100,
                "podSets": [
                    {
                        "name": "main",
                        "count": 2,
                        "template": {
                            "spec": {
                                "containers": [
                                    {
                                        "name": "work",
                                        "resources": {"requests": {"cpu": "1", "memory": "1Gi"}},
                                    }
                                ]
                            }
                        },
                    }
                ],
            },
        }
        (STATE_DIR / f"{name}.yaml").write_text(yaml.safe_dump(body))
        kubectl("apply", "-f", str(STATE_DIR / f"{name}.yaml"), show=False)
    for name in ("batch-1", "batch-2"):

        def admitted(n: str = name) -> bool:
            return bool(condition(workload("team-b", n), "Admitted").get("status") == "True")

        wait(f"{name} admitted", admitted)
    print("batch-1 was preempted twice before (as its eviction history says):")
    kubectl(
        "patch",
        "workloads.kueue.x-k8s.io",
        "batch-1",
        "-n",
        "team-b",
        "--subresource",
        "status",
        "--type",
        "merge",
        "-p",
        '{"status":{"schedulingStats":{"evictions":[{"reason":"Preempted","underlyingCause":"","count":2}]}}}',
    )
    wait(
        "the cost controller's patches",
        lambda: (
            workload("team-b", "batch-1").get("status", {}).get("preemptionCost") == "2"
            and workload("team-b", "batch-2").get("status", {}).get("preemptionCost") == "0"
        ),
    )
    kubectl("get", "workloads.kueue.x-k8s.io", "-n", "team-b", "-o", "wide")
    print("cost controller log:")
    for line in (STATE_DIR / "cost-controller.log").read_text().splitlines()[-2:]:
        print("  " + json.loads(line)["msg"] if line.startswith("{") else "  " + line)

    say(
        "7. Preemption picks the cheaper victim: an urgent Workload (priority 1000) needs 2 CPUs in team-b"
    )
    urgent = yaml.safe_load((STATE_DIR / "batch-1.yaml").read_text())
    urgent["metadata"]["name"] = "urgent"
    urgent["spec"]["priority"] = 1000
    urgent["spec"]["podSets"][0]["count"] = 2
    (STATE_DIR / "urgent.yaml").write_text(yaml.safe_dump(urgent))
    costs = {
        n: workload("team-b", n)["status"].get("preemptionCost") for n in ("batch-1", "batch-2")
    }
    kubectl("apply", "-f", str(STATE_DIR / "urgent.yaml"))
    victim = wait(
        "a victim",
        lambda: next(
            (
                n
                for n in ("batch-1", "batch-2")
                if condition(workload("team-b", n), "Evicted").get("status") == "True"
            ),
            None,
        ),
    )
    evicted = condition(workload("team-b", victim), "Evicted")
    other = "batch-1" if victim == "batch-2" else "batch-2"
    print(
        f"victim: {victim} (cost {costs[victim]}), not {other} (cost {costs[other]}): equal priority, lower cost goes"
    )
    print(f"  Evicted: {evicted['reason']}: {evicted['message']}")
    print(f"  urgent: {condition(workload('team-b', 'urgent'), 'QuotaReserved').get('message')}")
    print(
        "the owner of a bare Workload acknowledges the eviction by clearing its reservation,"
        " as Kueue's job side does (server-side apply as kueue-admission):"
    )
    from tools.bench.kueue_clients import runner_release

    release = STATE_DIR / "release.json"
    release.write_text(json.dumps(runner_release(workload("team-b", victim), time.time()).body))
    kubectl(
        "apply",
        "--server-side",
        "--subresource=status",
        "--field-manager=kueue-admission",
        "--force-conflicts",
        "-f",
        str(release),
        show=False,
    )
    wait(
        "urgent admitted",
        lambda: condition(workload("team-b", "urgent"), "Admitted").get("status") == "True",
    )
    kubectl("get", "workloads.kueue.x-k8s.io", "-n", "team-b", "-o", "wide")

    say("8. Everything is visible with kubectl")
    kubectl(
        "get",
        "workloads.kueue.x-k8s.io",
        "-n",
        "team-b",
        victim,
        "-o",
        'jsonpath={range .status.conditions[*]}{.type}={.status} ({.reason}){"\\n"}{end}',
    )
    kubectl("get", "events", "-n", "team-b", "--field-selector", f"involvedObject.name={victim}")

    say("9. kubectl quotagate: the same story from the engine's point of view")
    # kubectl finds the plugin as the `kubectl-quotagate` executable on PATH (this venv's bin).
    os.environ["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    kubectl("quotagate", "describe", "workload", victim, "-n", "team-b")
    print("what if team-b submitted 2 more CPUs at priority class high?")
    kubectl(
        "quotagate",
        "whatif",
        "-n",
        "team-b",
        "--queue",
        "main",
        "--priority-class",
        "high",
        "--requests",
        "cpu=1,memory=1Gi",
        "--count",
        "2",
    )

    say("Keep exploring")
    print(f"  export KUBECONFIG={kubeconfig}")
    print(
        "  bin/kubectl get clusterqueues,localqueues -A; bin/kubectl get workloads.kueue.x-k8s.io -A"
    )
    print("  .venv/bin/quotagate plan -f <state.yaml>   # what would the controller do?")
    print(
        "  PATH=$PWD/.venv/bin:$PATH bin/kubectl quotagate list workloads -A   # the kubectl plugin"
    )
    print(f"  logs: {STATE_DIR}/controller.log, {STATE_DIR}/cost-controller.log")
    print("  tear down: make cluster-down")
    return 0


if __name__ == "__main__":
    sys.exit(main())
