"""`quotagate run`: flags, config file, logging, then the operator."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path
from typing import Any

import yaml

from controller import collector
from controller.config import ConfigError, ControllerConfig, dotted_keys, dotted_value, load_config
from controller.config_report import not_implemented
from controller.kube.process import run_until_done, setup_logging

log = logging.getLogger("controller.config")


def add_run_command(commands: Any) -> None:
    sub = commands.add_parser(
        "run",
        help="run the admission controller against a Kubernetes API server",
        description="Run the quotagate admission controller (kopf operator). Credentials come "
        "from --kubeconfig, $KUBECONFIG, ~/.kube/config or the in-cluster ServiceAccount.",
    )
    sub.add_argument("--kubeconfig", help="path to a kubeconfig file")
    sub.add_argument(
        "--config", type=Path, help="YAML configuration file (see docs/configuration.md)"
    )
    sub.add_argument(
        "--overrides",
        type=Path,
        metavar="FILE",
        help="settings in quotagate's format applied over --config, as flags are (the chart "
        "passes its deployment's settings so when --config is a Kueue Configuration)",
    )
    sub.add_argument(
        "--namespace",
        action="append",
        dest="namespaces",
        help="namespace to manage (repeatable; default all)",
    )
    sub.add_argument("--metrics-port", type=int, help="port for /metrics (0 = off)")
    sub.add_argument(
        "--health-port", type=int, help="port for /healthz and /readyz (0 = off; default 8081)"
    )
    sub.add_argument("--write-parallelism", type=int, help="concurrent API writes")
    sub.add_argument(
        "--write-parallelism-max",
        type=int,
        help="the most concurrent decision writes, reached while the watch keeps up",
    )
    sub.add_argument(
        "--preemptibility-threshold", type=int, help="priority < N ⇒ preemptible (KAI: 100)"
    )
    sub.add_argument(
        "--no-leader-election", action="store_true", help="schedule without holding a Lease"
    )
    sub.add_argument("--lease-namespace", help="namespace of the leader-election Lease")
    sub.add_argument("--lease-name", help="name of the leader-election Lease")
    sub.add_argument(
        "--webhook-address",
        metavar="HOST:PORT",
        help="serve the webhooks (pods and Jobs; Kueue's kinds) on HOST:PORT (self-signed "
        "unless webhook.certDir is set)",
    )
    sub.add_argument(
        "--webhook-manage-config",
        action="store_true",
        help="register the Mutating- and ValidatingWebhookConfiguration `quotagate` pointing at "
        "--webhook-address (local runs)",
    )
    sub.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    sub.set_defaults(handler=_run)


def _overrides(args: argparse.Namespace) -> dict[str, Any]:
    """--overrides FILE, then the flags (which win), as dotted keys."""
    found: dict[str, Any] = {}
    if args.overrides is not None:
        try:
            loaded = yaml.safe_load(args.overrides.read_text()) or {}
        except (OSError, yaml.YAMLError) as exc:
            raise ConfigError(f"{args.overrides}: cannot read overrides: {exc}") from exc
        if not isinstance(loaded, dict):
            raise ConfigError(f"{args.overrides}: the overrides must be a mapping")
        found = {key: dotted_value(loaded, key) for key in dotted_keys(loaded)}
    flags = {
        "namespaces": args.namespaces,
        "metricsPort": args.metrics_port,
        "healthPort": args.health_port,
        "writeParallelism": args.write_parallelism,
        "writeParallelismMax": args.write_parallelism_max,
        "preemptibility.priorityThreshold": args.preemptibility_threshold,
        "leaderElection.leaseNamespace": args.lease_namespace,
        "leaderElection.leaseName": args.lease_name,
        "leaderElection.enabled": False if args.no_leader_election else None,
        "webhook.manageConfiguration": True if args.webhook_manage_config else None,
    }
    if args.webhook_address:
        host, _, port = args.webhook_address.rpartition(":")
        flags.update(
            {"webhook.enabled": True, "webhook.address": host or "0.0.0.0", "webhook.port": port}
        )
    found.update((key, value) for key, value in flags.items() if value is not None)
    return found


def report_not_implemented(config: ControllerConfig) -> None:
    """Log, once at start, each field of the configuration quotagate read but does not
    implement (never fatal: `quotagate config check` lists them too), and how some Kueue
    fields are read."""
    for path, why in not_implemented(config):
        log.warning("configuration field not implemented: %s: %s", path, why)
    for note in config.notes:
        log.info("configuration: %s", note)


def _run(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config, _overrides(args))
    except ConfigError as exc:
        print(f"quotagate run: {exc}", file=sys.stderr)
        return 2
    setup_logging(args.log_level)
    report_not_implemented(config)
    collector.tune()
    from controller.runtime.operator import run_operator

    return run_until_done(
        lambda stop: run_operator(config, args.kubeconfig, stop_flag=stop), "quotagate run"
    )
