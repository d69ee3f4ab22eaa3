"""`quotagate cost-controller` (and `python -m costcontroller`): flags, logging, then the loop."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import signal
import sys
from typing import Any

from api.quantities import InvalidQuantity, Quantity
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
    from controller.runtime.command import setup_logging

    try:
        policy = load_policy(args.policy, parse_policy_args(args.policy_arg))
        max_cost = Quantity.parse(args.max_cost)
    except (PolicyLoadError, InvalidQuantity, ValueError) as exc:
        print(f"quotagate cost-controller: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_level)
    try:
        return asyncio.run(serve(args, policy, max_cost))
    except KeyboardInterrupt:
        return 0


async def serve(args: argparse.Namespace, policy: CostPolicy, max_cost: Quantity) -> int:
    """Run the controller until SIGTERM/SIGINT; the exit status."""
    from controller.runtime.config import LeaderElection
    from controller.runtime.kube import make_api_client
    from controller.runtime.leader import run_while_leading
    from costcontroller.controller import CostController, CostMetrics

    try:
        api_client = await make_api_client(args.kubeconfig)
    except Exception as exc:  # no kubeconfig and not in a cluster
        print(f"quotagate cost-controller: error: {exc}", file=sys.stderr)
        return 1
    metrics = CostMetrics()
    metrics.serve(args.metrics_port)
    controller = CostController(api_client, policy, max_cost, resync=args.resync, metrics=metrics)
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
    main = asyncio.ensure_future(run_while_leading(api_client, election, controller.run))
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(signum, main.cancel)
    try:
        await main
    except asyncio.CancelledError:
        log.info("cost controller stopping")
    finally:
        with contextlib.suppress(Exception):
            await api_client.close()
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m costcontroller",
        description="The reference preemption-cost controller (KEP-7990).",
    )
    configure(parser)
    return run(parser.parse_args(argv))
