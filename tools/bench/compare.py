"""`make bench-compare`: Kueue's minimalkueue and quotagate on the same machine, one after
the other, each on a fresh local control plane (etcd + kube-apiserver, tests/cluster) with
its own CRDs, each driven by the same `quotagate bench --live` run of one scenario with
its CPU and kube-apiserver's measured; then one table with both columns and their ratio,
a JSON document and a plot.

    .venv/bin/python -m tools.bench.compare --minimalkueue PATH --kueue-crds DIR \\
        [--out DIR] [--timeout SECONDS] [--restart-apiserver-at SECONDS ...] SCENARIO.yaml

`--restart-apiserver-at` (repeatable) kills kube-apiserver (-9) that many seconds into each
run and starts it again with its command line (tests/cluster/faults.py): both controllers
and the live run go through the same outages, which each report shows (how long the API
server was unreachable, when admission resumed); its CPU and writes are counted over all
its processes.

Nothing from Kueue is in this repository: the minimalkueue binary and Kueue's CRDs come
from a Kueue checkout (docs/benchmark.md says how to build it). Exit status: 0 done, 1 a
run failed (or over-used quota), 2 bad arguments.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

from kubernetes import config

from controller.kube.process import run_on_uvloop
from tests.cluster.build import ensure_binaries
from tests.cluster.controlplane import ControlPlane
from tests.cluster.faults import READY_TIMEOUT, Faults, Outage
from tests.cluster.fixtures import install_crds
from tests.integration.kueue import ControllerProcess
from tools.bench.apiserver_requests import request_counts, requests_between
from tools.bench.comparison import (
    WRITES,
    comparison_json,
    plot_comparison,
    render_comparison,
)
from tools.bench.live import run_live
from tools.bench.report import Report, overuse_kinds, overuse_of
from tools.bench.scenario import Scenario, ScenarioError, load

REPO = Path(__file__).resolve().parents[2]
QUOTAGATE_CRDS = REPO / "config" / "crd" / "bases"
# The Kueue CRDs a live run uses, as named in Kueue's config/components/crd/bases.
KUEUE_CRD_FILES = tuple(
    f"kueue.x-k8s.io_{plural}.yaml"
    for plural in ("clusterqueues", "localqueues", "resourceflavors", "workloads")
)
KUEUE_TOPOLOGY_CRD = "kueue.x-k8s.io_topologies.yaml"  # a topology-aware scenario's


class CompareError(RuntimeError):
    """A run could not be made; the message says which controller and why."""


@dataclass(frozen=True)
class Contender:
    """A controller to run: its name in the table and the JSON, the CRDs it serves and its
    command line for a kubeconfig."""

    label: str
    crds: Path
    command: Callable[[Path], list[str]]


def minimalkueue(path: Path, crds: Path, *, tas: bool = False) -> Contender:
    """Kueue's scheduler-perf controller, started as Kueue's runner starts it; with
    `-enableTAS` for a topology-aware scenario (without it minimalkueue runs no TAS
    controllers and admits no TAS Workload)."""
    flags = ["-enableTAS"] if tas else []
    return Contender(
        "Kueue", crds, lambda kubeconfig: [str(path), "--kubeconfig", str(kubeconfig), *flags]
    )


def quotagate(label: str = "quotagate") -> Contender:
    """`quotagate run` from this checkout, without leader election (as minimalkueue)."""
    return Contender(
        label,
        QUOTAGATE_CRDS,
        lambda kubeconfig: [
            sys.executable,
            "-m",
            "controller.cli",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--metrics-port",
            "0",
            "--no-leader-election",
        ],
    )


# -- checking the arguments ----------------------------------------------------------------


def check_minimalkueue(value: str) -> Path:
    """The minimalkueue binary named by MINIMALKUEUE, or CompareError saying what is wrong."""
    if not value:
        raise CompareError(
            "MINIMALKUEUE is not set: give the path of a minimalkueue binary "
            "(docs/benchmark.md: how to build it from a Kueue checkout)"
        )
    path = Path(value).expanduser().resolve()
    if not path.is_file():
        raise CompareError(f"MINIMALKUEUE={value}: no such file")
    if not os.access(path, os.X_OK):
        raise CompareError(f"MINIMALKUEUE={value}: not executable")
    try:
        usage = subprocess.run(
            [str(path), "--help"], capture_output=True, text=True, timeout=30, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise CompareError(f"MINIMALKUEUE={value}: cannot run it: {exc}") from exc
    flags = usage.stdout + usage.stderr
    if "-kubeconfig" not in flags or "-metricsPort" not in flags:
        raise CompareError(
            f"MINIMALKUEUE={value}: not Kueue's minimalkueue (its --help lists no -kubeconfig "
            "and -metricsPort flags)"
        )
    return path


def check_kueue_crds(value: str, *, tas: bool = False) -> Path:
    """The directory of Kueue's CRDs named by KUEUE_CRDS (with the Topology CRD for a
    topology-aware scenario), or CompareError."""
    if not value:
        raise CompareError(
            "KUEUE_CRDS is not set: give the directory of Kueue's CRDs "
            "(config/components/crd/bases in a Kueue checkout)"
        )
    path = Path(value).expanduser().resolve()
    if not path.is_dir():
        raise CompareError(f"KUEUE_CRDS={value}: no such directory")
    wanted = KUEUE_CRD_FILES + ((KUEUE_TOPOLOGY_CRD,) if tas else ())
    missing = [name for name in wanted if not (path / name).is_file()]
    if missing:
        raise CompareError(
            f"KUEUE_CRDS={value}: not Kueue's CRD directory (no {', '.join(missing)}; "
            "expected config/components/crd/bases of a Kueue checkout)"
        )
    if "name: v1beta2" not in (path / "kueue.x-k8s.io_workloads.yaml").read_text():
        raise CompareError(
            f"KUEUE_CRDS={value}: its Workload CRD does not serve kueue.x-k8s.io/v1beta2, "
            "the API the bench speaks (an older Kueue?)"
        )
    return path


# -- one run -------------------------------------------------------------------------------


def _tail(path: Path, lines: int = 10) -> str:
    with contextlib.suppress(OSError):
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    return ""


def apiserver_writes(kubeconfig: Path) -> dict[str, int]:
    """kube-apiserver's write counters so far (tools/bench/apiserver_requests.py)."""
    api_client = config.new_client_from_config(str(kubeconfig))
    try:
        method, url, headers, body, _ = api_client.param_serialize(
            "GET", "/metrics", auth_settings=["BearerToken"]
        )
        response = api_client.call_api(method, url, header_params=headers, body=body)
        response.read()
        return request_counts(response.data.decode())
    finally:
        api_client.close()


async def _drive(controller: ControllerProcess, label: str, run: asyncio.Future[Report]) -> Report:
    """The live run's report, unless the controller exits first."""
    process = controller.process
    assert process is not None
    while not run.done():
        if process.poll() is not None:
            run.cancel()
            with contextlib.suppress(BaseException):
                await run
            raise CompareError(
                f"{label}: the controller exited with status {process.returncode} during the "
                f"run; the last lines of {controller.log_path}:\n{_tail(controller.log_path)}"
            )
        await asyncio.wait({run}, timeout=0.5)
    return run.result()


class ApiServerRestarts:
    """kube-apiserver killed (-9) and started again at `at` seconds after `start()`, in a
    thread; its write counters are read just before each kill and summed over its
    processes (`writes`)."""

    def __init__(self, plane: ControlPlane, at: Sequence[float], say: Callable[[str], None]):
        self.faults = Faults(plane)
        self.plane = plane
        self.at = sorted(at)
        self.say = say
        self.outages: list[Outage] = []
        self._counted: dict[str, int] = {}  # writes of the processes already restarted
        self._before = apiserver_writes(plane.kubeconfig)  # the current process's, at start
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="restarts")
        self.error: BaseException | None = None

    def start(self) -> ApiServerRestarts:
        self._started = time.monotonic()
        self._thread.start()
        return self

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(READY_TIMEOUT)
        if self.error is not None:
            raise CompareError(f"restarting kube-apiserver failed: {self.error}")

    def cpu(self) -> float | None:
        seconds: float | None = self.faults.cpu_seconds("kube-apiserver")
        return seconds

    def writes(self) -> dict[str, int]:
        """The writes of every kube-apiserver process since `start`, by request."""
        total = dict(self._counted)
        for key, count in requests_between(
            self._before, apiserver_writes(self.plane.kubeconfig)
        ).items():
            total[key] = total.get(key, 0) + count
        return dict(sorted(total.items()))

    def _run(self) -> None:
        try:
            for at in self.at:
                if self._stop.wait(max(0.0, self._started + at - time.monotonic())):
                    return
                for key, count in requests_between(
                    self._before, apiserver_writes(self.plane.kubeconfig)
                ).items():
                    self._counted[key] = self._counted.get(key, 0) + count
                self._before = {}
                outage = self.faults.restart("kube-apiserver")
                self.outages.append(outage)
                self.say(f"kube-apiserver restarted at {at:.0f} s: down {outage.seconds:.1f} s")
        except BaseException as exc:  # reported by stop()
            self.error = exc


def run_one(
    contender: Contender,
    scenario: Scenario,
    out: Path,
    *,
    progress: TextIO | None,
    step: str,
    timeout: float,
    setup_timeout: float,
    restart_apiserver_at: Sequence[float] = (),
) -> Report:
    """`contender` on a fresh control plane, measured by one live run of `scenario`
    (kube-apiserver restarted at each of `restart_apiserver_at` seconds into it)."""

    def say(text: str) -> None:
        if progress is not None:
            progress.write(f"[{step}] {contender.label}: {text}\n")
            progress.flush()

    say("starting a control plane (etcd, kube-apiserver)")
    plane = ControlPlane().start()
    try:
        say(f"installing the CRDs of {contender.crds}")
        api_client = config.new_client_from_config(str(plane.kubeconfig))
        try:
            install_crds(api_client, contender.crds)
        finally:
            api_client.close()
        argv = contender.command(plane.kubeconfig)
        controller = ControllerProcess(str(plane.kubeconfig), out, contender.label, argv=argv)
        controller.log_path.unlink(missing_ok=True)
        say(f"starting {' '.join(argv)} (log: {controller.log_path})")
        controller.start()
        assert controller.process is not None
        controller_pid = controller.process.pid
        restarts = ApiServerRestarts(plane, restart_apiserver_at, say)
        try:
            started = time.monotonic()

            async def measured() -> Report:
                run = asyncio.ensure_future(
                    run_live(
                        str(plane.kubeconfig),
                        scenario,
                        progress=progress,
                        timeout=timeout,
                        controller_pid=controller_pid,
                        apiserver_cpu=restarts.cpu,
                        setup_timeout=setup_timeout,
                        keep=True,  # the control plane is thrown away
                    )
                )
                return await _drive(controller, contender.label, run)

            restarts.start()
            try:
                report = run_on_uvloop(measured())
            finally:
                restarts.stop()
            report.extra[WRITES] = restarts.writes()
            if restart_apiserver_at:
                report.extra["apiserver_restarts"] = [
                    {"at_s": at, "down_s": round(o.seconds, 2)}
                    for at, o in zip(restarts.at, restarts.outages, strict=False)
                ]
            say(
                f"done in {time.monotonic() - started:.1f} s; stopping the controller and the "
                "control plane"
            )
            return report
        finally:
            controller.stop()
    finally:
        plane.stop()


def compare(
    scenario: Scenario,
    contenders: Sequence[Contender],
    out: Path,
    *,
    progress: TextIO | None = sys.stderr,
    timeout: float = 3600.0,
    setup_timeout: float = 120.0,
    restart_apiserver_at: Sequence[float] = (),
) -> dict[str, Report]:
    """Each contender's report, run one after the other, by label (in order)."""
    if len(contenders) != 2 or contenders[0].label == contenders[1].label:
        raise ValueError("compare needs two contenders with different labels")
    out.mkdir(parents=True, exist_ok=True)
    if progress is not None:
        progress.write(
            f"bench-compare: scenario {scenario.name} ({scenario.total_queues()} ClusterQueues, "
            f"{scenario.total_workloads()} Workloads): "
            f"{' then '.join(c.label for c in contenders)}\n"
        )
    return {
        contender.label: run_one(
            contender,
            scenario,
            out,
            progress=progress,
            step=f"{n}/{len(contenders)}",
            timeout=timeout,
            setup_timeout=setup_timeout,
            restart_apiserver_at=restart_apiserver_at,
        )
        for n, contender in enumerate(contenders, 1)
    }


def write(reports: dict[str, Report], out: Path, name: str) -> tuple[Path, Path]:
    """The JSON document and the plot of a comparison, under `out`; their paths."""
    document, picture = out / f"compare-{name}.json", out / f"compare-{name}.png"
    document.write_text(json.dumps(comparison_json(reports), indent=2) + "\n", encoding="utf-8")
    plot_comparison(reports, picture)
    return document, picture


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="make bench-compare",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("scenario", metavar="SCENARIO.yaml")
    parser.add_argument("--minimalkueue", default="", help="Kueue's minimalkueue binary")
    parser.add_argument("--kueue-crds", default="", help="Kueue's config/components/crd/bases")
    parser.add_argument("--out", default=".bench-compare", help="where the results go")
    parser.add_argument(
        "--timeout", type=float, default=3600.0, help="give up a run after this many seconds"
    )
    parser.add_argument(
        "--restart-apiserver-at",
        type=float,
        action="append",
        default=[],
        metavar="SECONDS",
        help="kill and start kube-apiserver again this many seconds into each run (repeatable)",
    )
    args = parser.parse_args(argv)
    try:
        scenario = load(Path(args.scenario))
        tas = scenario.tas is not None
        binary = check_minimalkueue(args.minimalkueue)
        crds = check_kueue_crds(args.kueue_crds, tas=tas)
    except (ScenarioError, CompareError) as exc:
        print(f"bench-compare: {exc}", file=sys.stderr)
        return 2
    out = Path(args.out)
    try:
        ensure_binaries()  # the control plane's, built once (minutes) if missing
        reports = compare(
            scenario,
            [minimalkueue(binary, crds, tas=tas), quotagate()],
            out,
            timeout=args.timeout,
            restart_apiserver_at=args.restart_apiserver_at,
        )
    except Exception as exc:  # a run failed: one line (the controller's log tail if it died)
        print(f"bench-compare: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    print(render_comparison(reports))
    document, picture = write(reports, out, scenario.name)
    print(f"\nJSON: {document}\nplot: {picture}")
    overused = [
        f"{label} ({overuse_kinds(report)})"
        for label, report in reports.items()
        if overuse_of(report)
    ]
    if overused:
        print(f"bench-compare: over-use by {', '.join(overused)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
