"""`quotagate cost-controller` (and `python -m costcontroller`)."""

from __future__ import annotations

import argparse
import signal
import sys
from typing import Any

from controller.core.quantities import InvalidQuantity, Quantity
from costcontroller.policy import PolicyLoadError, load_policy


def add_cost_controller_command(commands: Any) -> None:
    sub = commands.add_parser(
        "cost-controller",
        help="run the reference preemption-cost controller (KEP-7990)",
        description="Watch Workloads and write status.preemptionCost computed by a cost policy.",
    )
    configure(sub)
    sub.set_defaults(handler=run)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--kubeconfig",
        help="path to a kubeconfig (default: $KUBECONFIG, ~/.kube/config, in-cluster)",
    )
    parser.add_argument(
        "--policy",
        default="eviction-count",
        help="eviction-count | time-since-reserved | module.path:Class | an entry point in quotagate.cost_policies",
    )
    parser.add_argument(
        "--policy-arg",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="constructor argument (repeatable)",
    )
    parser.add_argument(
        "--max-cost", default="1000000", help="largest cost accepted from the policy (a quantity)"
    )
    parser.add_argument(
        "--resync", type=float, default=30.0, help="seconds between full re-evaluations"
    )
    parser.add_argument("--metrics-port", type=int, default=0, help="port for /metrics (0 = off)")
    parser.add_argument(
        "--log-level", default="info", choices=["debug", "info", "warning", "error"]
    )


def run(args: argparse.Namespace) -> int:
    from kubernetes import config

    from controller.runtime.command import setup_logging
    from costcontroller.controller import CostController, CostMetrics, serve_metrics

    policy_args: dict[str, str] = {}
    for item in args.policy_arg:
        key, sep, value = item.partition("=")
        if not sep or not key:
            print(
                f"quotagate cost-controller: --policy-arg {item!r}: expected KEY=VALUE",
                file=sys.stderr,
            )
            return 2
        policy_args[key] = value
    try:
        policy = load_policy(args.policy, policy_args)
        max_cost = Quantity.parse(args.max_cost)
    except (PolicyLoadError, InvalidQuantity) as exc:
        print(f"quotagate cost-controller: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_level)
    try:
        api_client = (
            config.new_client_from_config(args.kubeconfig) if args.kubeconfig else _default_client()
        )
    except config.ConfigException as exc:
        print(f"quotagate cost-controller: error: {exc}", file=sys.stderr)
        return 1
    metrics = CostMetrics()
    serve_metrics(metrics, args.metrics_port)
    controller = CostController(api_client, policy, max_cost, resync=args.resync, metrics=metrics)
    signal.signal(signal.SIGTERM, lambda *_: controller.stop.set())
    signal.signal(signal.SIGINT, lambda *_: controller.stop.set())
    controller.run()
    return 0


def _default_client() -> Any:
    from kubernetes import client, config

    try:
        config.load_kube_config()
    except config.ConfigException:
        config.load_incluster_config()
    return client.ApiClient()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m costcontroller")
    configure(parser)
    return run(parser.parse_args(argv))
