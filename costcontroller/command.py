"""`quotagate cost-controller` (and `python -m costcontroller`): flags, logging, then the loop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import sys
from typing import Any

from api.quantities import InvalidQuantity, Quantity
from controller.kube.fatal import FatalError
from costcontroller.policy import CostPolicy, PolicyLoadError, load_policy

log = logging.getLogger(__name__)


def add_cost_controller_command(commands: Any) -> None:
    sub = commands.add_parser(
        "cost-controller",
        help="run the reference preemption-cost controller (KEP-7990)",
        description="Watch Workloads and write status.preemptionCost computed by a cost policy. "
        "Credentials come from --kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster "
        "ServiceAccount.",
    )
    configure(sub)
    sub.set_defaults(handler=run)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--kubeconfig", help="path to a kubeconfig file")
    parser.add_argument(
        "--policy",
        default="eviction-count",
        help="eviction-count (default) | time-since-reserved | module.path:Class | "
        "the name of an entry point in the group quotagate.cost_policies",
    )
    parser.add_argument(
        "--policy-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="keyword argument for the policy's constructor (repeatable)",
    )
    parser.add_argument(
        "--max-cost", default="1000000", help="largest cost accepted from the policy (a quantity)"
    )
    parser.add_argument(
        "--resync",
        type=float,
        default=30.0,
        help="seconds between re-evaluations of every Workload (time-based policies need it; 0 = off)",
    )
    parser.add_argument("--metrics-port", type=int, default=0, help="port for /metrics (0 = off)")
    parser.add_argument(
        "--health-port", type=int, default=0, help="port for /healthz and /readyz (0 = off)"
    )
    parser.add_argument(
        "--leader-elect",
        action="store_true",
        help="write only while holding a Lease (for more than one replica; off by default)",
    )
    parser.add_argument("--lease-namespace", default="quotagate-system")
    parser.add_argument("--lease-name", default="quotagate-cost-controller")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )


def parse_policy_args(items: list[str]) -> dict[str, str]:
    """`["a=1", "b=x=y"]` → `{"a": "1", "b": "x=y"}`; raises ValueError on a missing `=`."""
    result: dict[str, str] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise ValueError(f"--policy-arg {item!r}: expected KEY=VALUE")
        result[key] = value
    return result


def run(args: argparse.Namespace) -> int:
    from controller.kube.process import run_until_done, setup_logging

    try:
        policy = load_policy(args.policy, parse_policy_args(args.policy_arg))
        max_cost = Quantity.parse(args.max_cost)
    except (PolicyLoadError, InvalidQuantity, ValueError) as exc:
        print(f"quotagate cost-controller: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_level)
    return run_until_done(
        lambda stop: serve(args, policy, max_cost, stop), "quotagate cost-controller"
    )


async def serve(
    args: argparse.Namespace, policy: CostPolicy, max_cost: Quantity, stop: asyncio.Event
) -> None:
    """Run the controller until `stop` is set (SIGTERM/SIGINT); a FatalError when it cannot
    go on (no credentials, metrics port taken, no Lease namespace)."""
    from controller.kube.client import make_api_client
    from controller.kube.health import Readiness, serve_health
    from controller.kube.leader import LeaderElection, run_while_leading
    from costcontroller.controller import CostController, CostMetrics

    api_client = await make_api_client(args.kubeconfig)
    metrics = CostMetrics()
    metrics.serve(args.metrics_port)
    # Ready: leading with every Workload listed, or standing by (nothing to wait for).
    readiness = Readiness("the Workload informer has listed")
    health = await serve_health("0.0.0.0", args.health_port, readiness)
    controller = CostController(api_client, policy, max_cost, resync=args.resync, metrics=metrics)
    controller.on_synced = lambda: readiness.mark("the Workload informer has listed")

    def on_change(leading: bool) -> None:
        if leading and not controller.synced.is_set():
            readiness.require("the Workload informer has listed")
        else:
            readiness.mark("the Workload informer has listed")

    election = LeaderElection.model_validate(
        {
            "enabled": args.leader_elect,
            "leaseNamespace": args.lease_namespace,
            "leaseName": args.lease_name,
        }
    )
    log.info(
        "cost controller starting: policy %s (%s), max cost %s, resync %ss",
        args.policy,
        type(policy).__name__,
        max_cost,
        args.resync,
    )
    main = asyncio.ensure_future(run_while_leading(api_client, election, controller.run, on_change))
    stopping = asyncio.ensure_future(stop.wait())
    try:
        await asyncio.wait({main, stopping}, return_when=asyncio.FIRST_COMPLETED)
        if main.done():
            main.result()  # the election ended by itself: its error is fatal
            raise FatalError("leader election ended unexpectedly")
        log.info("cost controller stopping")
    finally:
        main.cancel()
        stopping.cancel()
        with contextlib.suppress(BaseException):
            await main
        if health is not None:
            await health.cleanup()
        with contextlib.suppress(Exception):
            await api_client.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m costcontroller",
        description="The reference preemption-cost controller (KEP-7990).",
    )
    configure(parser)
    return run(parser.parse_args(argv))
