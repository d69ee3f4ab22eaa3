"""`python -m tools.bench`: run a scenario simulated (the engine on a virtual clock) or live
(against an API server with a Kueue-compatible controller running) and report; or measure
the API server's floor for the scenario (its irreducible Workload writes, no controller).
A development tool, run from a quotagate checkout: it is not in the wheel or the image."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from controller.kube.process import run_on_uvloop
from tools.bench.report import NODE_OVERUSE, Report, overuse_of, plot, render
from tools.bench.scenario import ScenarioError, load

if TYPE_CHECKING:
    from tools.bench.floor import FloorReport

__all__ = ["LIVE_FAIR_SHARING", "PROG", "build_parser", "main"]

PROG = "python -m tools.bench"

LIVE_FAIR_SHARING = (
    "bench: the scenario's fairSharing applies to --simulate only; in a live run "
    "fair sharing is whatever the controller's own configuration says (e.g. `quotagate run "
    "--config FILE` with `fairSharing: {}`)"
)
"""Said at the start of a live run of a scenario with `fairSharing`: a live run cannot set
the controller's configuration, so fair sharing is never silently assumed."""

EPILOG = """\
scenarios: tools/bench/scenarios/{smoke,baseline,large-scale}.yaml (Kueue's generator
shape) and fair-tree.yaml (a tree of Cohorts with fair sharing, quotagate's extension of
the shape). Exit status: 0 done, 1 the run failed (or over-used quota), 2 bad arguments or
scenario. Kueue's minimalkueue and quotagate side by side on fresh local control planes:
`make bench-compare`. See docs/benchmark.md.
"""


def build_parser() -> argparse.ArgumentParser:
    sub = argparse.ArgumentParser(
        prog=PROG,
        description=__doc__,
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.add_argument("scenario", metavar="SCENARIO.yaml", help="a scenario file")
    mode = sub.add_mutually_exclusive_group(required=True)
    mode.add_argument(
        "--simulate", action="store_true", help="the real engine on a virtual clock, in-process"
    )
    mode.add_argument(
        "--live",
        action="store_true",
        help="against the API server of --kubeconfig, where a controller must be running",
    )
    mode.add_argument(
        "--api-floor",
        action="store_true",
        help="the scenario's irreducible Workload writes (create, admit, finish) as fast as "
        "the API server of --kubeconfig serves them, with no controller running",
    )
    sub.add_argument("--json", metavar="FILE", help="also write the report as JSON (- = stdout)")
    sub.add_argument("--plot", metavar="FILE.png", help="plot pending and usage over time")
    sub.add_argument("-q", "--quiet", action="store_true", help="no progress on stderr")
    sim = sub.add_argument_group("--simulate")
    sim.add_argument(
        "--ack-delay-ms",
        type=int,
        default=0,
        help="how long a preempted Workload takes to release its quota (default 0)",
    )
    sim.add_argument(
        "--decisions",
        metavar="FILE",
        help="write every cycle's decisions (admissions, preemptions and their victims, "
        "evictions, refusals), one JSON line per cycle: two runs decided alike when the "
        "files are equal",
    )
    cluster = sub.add_argument_group("--live and --api-floor")
    cluster.add_argument("--kubeconfig", help="kubeconfig of the cluster (default: $KUBECONFIG)")
    cluster.add_argument(
        "--parallelism", type=int, default=32, help="concurrent API requests (default 32)"
    )
    cluster.add_argument(
        "--timeout", type=float, default=1800.0, help="give up after this many seconds"
    )
    cluster.add_argument(
        "--keep", action="store_true", help="leave the run's objects in the cluster"
    )
    live = sub.add_argument_group("--live")
    live.add_argument(
        "--setup-timeout",
        type=float,
        default=120.0,
        help="how long to wait for the controller to mark the ClusterQueues Active",
    )
    live.add_argument(
        "--controller-pid", type=int, help="measure this process's CPU (the controller's)"
    )
    cluster.add_argument(
        "--apiserver-pid", type=int, help="measure this process's CPU (kube-apiserver's)"
    )
    return sub


def main(argv: Sequence[str] | None = None) -> int:
    return _bench(build_parser().parse_args(argv))


def _bench(args: argparse.Namespace) -> int:
    try:
        scenario = load(Path(args.scenario))
    except ScenarioError as exc:
        print(f"bench: {exc}", file=sys.stderr)
        return 2
    if args.ack_delay_ms < 0 or args.parallelism < 1 or args.timeout <= 0:
        print(
            "bench: --ack-delay-ms must be ≥ 0, --parallelism ≥ 1, --timeout > 0",
            file=sys.stderr,
        )
        return 2
    misplaced = _misplaced(args)
    if misplaced:
        print(f"bench: {misplaced}", file=sys.stderr)
        return 2
    if scenario.tas is not None and args.api_floor:
        print(
            "bench: a topology-aware scenario (topology:) runs with --simulate or --live: the "
            "API-floor bench creates no nodes",
            file=sys.stderr,
        )
        return 2
    progress = None if args.quiet else sys.stderr
    mode = "simulated" if args.simulate else "live" if args.live else "API server floor"
    if args.live and scenario.fair_sharing is not None:
        print(LIVE_FAIR_SHARING, file=sys.stderr)
    if progress is not None:
        print(
            f"scenario {scenario.name}: {scenario.total_queues()} ClusterQueues, "
            f"{scenario.total_workloads()} Workloads, {mode}",
            file=progress,
        )
    try:
        if args.api_floor:
            floor = _floor(args, scenario, progress)
        else:
            report = _run(args, scenario, progress)
    except Exception as exc:  # the run failed: one line, not a traceback
        print(f"bench: {type(exc).__name__}: {exc}", file=sys.stderr)
        return 1
    if args.api_floor:
        from tools.bench.floor import render_floor

        _write(render_floor(floor), floor.to_json(), args)
        return 0
    _output(report, args)
    if overuse_of(report):
        print(
            f"bench: {report.overuse_events} quota over-use events, "
            f"{report.extra.get(NODE_OVERUSE, 0)} node over-use events",
            file=sys.stderr,
        )
        return 1
    return 0


def _misplaced(args: argparse.Namespace) -> str | None:
    """An option given with a mode that would ignore it, said instead of ignored."""
    if args.api_floor and args.plot:
        return "--plot has nothing to draw with --api-floor"
    if args.api_floor and args.controller_pid is not None:
        return "--controller-pid is for --live (--api-floor runs with no controller)"
    if args.decisions and not args.simulate:
        return "--decisions is for --simulate (a live run's decisions are the controller's)"
    if args.simulate and args.apiserver_pid is not None:
        return "--apiserver-pid is for --live and --api-floor (--simulate has no API server)"
    return None


def _run(args: argparse.Namespace, scenario: Any, progress: Any) -> Report:
    if args.simulate:
        from tools.bench.simulate import simulate

        if args.decisions is None:
            return simulate(scenario, ack_delay_ms=args.ack_delay_ms, progress=progress)
        with open(args.decisions, "w", encoding="utf-8") as decisions:
            return simulate(
                scenario, ack_delay_ms=args.ack_delay_ms, progress=progress, decisions=decisions
            )
    from tools.bench.live import run_live

    return run_on_uvloop(
        run_live(
            args.kubeconfig,
            scenario,
            progress=progress,
            parallelism=args.parallelism,
            timeout=args.timeout,
            controller_pid=args.controller_pid,
            apiserver_pid=args.apiserver_pid,
            keep=args.keep,
            setup_timeout=args.setup_timeout,
        )
    )


def _floor(args: argparse.Namespace, scenario: Any, progress: Any) -> FloorReport:
    from tools.bench.floor import run_floor

    return run_on_uvloop(
        run_floor(
            args.kubeconfig,
            scenario,
            progress=progress,
            parallelism=args.parallelism,
            timeout=args.timeout,
            apiserver_pid=args.apiserver_pid,
            keep=args.keep,
        )
    )


def _write(text: str, document: dict[str, Any], args: argparse.Namespace) -> None:
    """The human report on stdout, or the JSON document with `--json -`; `--json FILE`
    writes both."""
    encoded = json.dumps(document, indent=2)
    if args.json == "-":
        print(encoded)
        return
    print(text)
    if args.json:
        Path(args.json).write_text(encoded + "\n", encoding="utf-8")
        print(f"\nJSON report: {args.json}")


def _output(report: Report, args: argparse.Namespace) -> None:
    _write(render(report), report.to_json(), args)
    if args.plot:
        plot(report, Path(args.plot))
        print(f"plot: {args.plot}", file=sys.stderr if args.json == "-" else sys.stdout)
