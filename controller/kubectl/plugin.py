"""`kubectl quotagate`: inspect queues and Workloads on a live cluster, and ask "what if".

    kubectl quotagate list workloads|clusterqueues|localqueues [-n NS | -A] [-o wide|json|yaml]
    kubectl quotagate describe workload NAME [-n NS] [-o json|yaml] [--estimate-cycles N]
    kubectl quotagate describe job|jobset|rayjob|raycluster|trainjob|mpijob|pod|deployment|
                               statefulset|leaderworkerset NAME [-n NS] [--config FILE]
    kubectl quotagate whatif --queue LQ [-n NS] [--priority N | --priority-class NAME]
                             --requests cpu=4,memory=8Gi [--count N] [--min-count M]
                             [-o json|yaml]

kubectl runs the `kubectl-quotagate` executable on PATH and passes every argument after
`quotagate`, so the usual `--kubeconfig`, `--context` and `-n/--namespace` flags work in
any position. Errors are one line on stderr, as kubectl's: exit 1 for an error from the
server or the connection, exit 2 for bad usage.
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from controller.config import ConfigError, load_config
from controller.core.model.from_api import InvalidObject, convert
from controller.core.model.workloads import Workload
from controller.kube.client import (
    CLUSTER_QUEUES,
    LOCAL_QUEUES,
    PRIORITY_CLASSES,
    WORKLOAD_PRIORITY_CLASSES,
    WORKLOADS,
)
from controller.kubectl.cluster import Cluster
from controller.kubectl.connection import ConnectionOptions, KubectlError, connect
from controller.kubectl.describe import (
    DEFAULT_ESTIMATE_CYCLES,
    describe_workload,
    render_description,
)
from controller.kubectl.listing import cluster_queue_table, local_queue_table, workload_table
from controller.kubectl.printing import dump, one_line
from controller.kubectl.snapshot import Snapshot
from controller.kubectl.whatif import (
    decide,
    hypothetical_workload,
    parse_requests,
    render_answer,
    unique_name,
)
from controller.kubectl.whatif import priority_class as whatif_priority_class

__all__ = ["build_parser", "main", "resource_type"]

Handler = Callable[[argparse.Namespace], int]

_RESOURCE_TYPES = {
    "workloads": ("workloads", "workload", "wl"),
    "clusterqueues": ("clusterqueues", "clusterqueue", "cq"),
    "localqueues": ("localqueues", "localqueue", "lq"),
}
_ALIASES = {
    alias: canonical
    for canonical, aliases in _RESOURCE_TYPES.items()
    for name in aliases
    for alias in (name, f"{name}.kueue.x-k8s.io")
}
_MAX_WARNINGS = 5


def resource_type(text: str) -> str:
    """A resource type or alias (wl, cq, lq, singular, plural, with the group) → plural."""
    try:
        return _ALIASES[text.lower()]
    except KeyError:
        raise argparse.ArgumentTypeError(
            f'unknown resource type "{text}" '
            "(expected workloads|wl, clusterqueues|cq or localqueues|lq)"
        ) from None


def _describe_type(text: str) -> str:
    """`workloads`, or the name of the integration whose kind `text` names (job, jobs,
    jobs.batch, jobset, rayjob, pod, ...)."""
    from controller.integrations.framework.registry import frameworks

    lowered = text.lower()
    if _ALIASES.get(lowered) == "workloads":
        return "workloads"
    for name, framework in frameworks().items():
        resource = framework.resource
        names = {resource.kind.lower(), resource.plural, name}
        names |= {f"{n}.{resource.group}" for n in (resource.kind.lower(), resource.plural)}
        if lowered in names:
            return name
    raise argparse.ArgumentTypeError(
        f"describe supports workloads and the kinds of the integrations "
        f'({", ".join(f.resource.kind.lower() for f in frameworks().values())}), not "{text}"'
    )


def _requests(text: str) -> dict[str, str]:
    try:
        return parse_requests(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _integer_at_least(least: int, text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < least:
        raise argparse.ArgumentTypeError(f"must be at least {least}, got {value}")
    return value


def _positive(text: str) -> int:
    return _integer_at_least(1, text)


def _non_negative(text: str) -> int:
    return _integer_at_least(0, text)


def _seconds(text: str) -> float:
    try:
        value = float(text.removesuffix("s"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a duration in seconds") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must not be negative, got {text}")
    return value


def _connection_flags() -> argparse.ArgumentParser:
    """kubectl's global flags, accepted before or after the subcommand."""
    flags = argparse.ArgumentParser(add_help=False)
    group = flags.add_argument_group("kubectl flags")
    suppress: Any = argparse.SUPPRESS
    group.add_argument("--kubeconfig", default=suppress, help="path to the kubeconfig file")
    group.add_argument("--context", default=suppress, help="the kubeconfig context to use")
    group.add_argument(
        "-n", "--namespace", default=suppress, help="namespace (default: the context's)"
    )
    group.add_argument(
        "--request-timeout",
        type=_seconds,
        default=suppress,
        metavar="SECONDS",
        help="give up on a request after this long (default 30; 0 waits forever)",
    )
    return flags


def build_parser() -> argparse.ArgumentParser:
    flags = _connection_flags()
    parser = argparse.ArgumentParser(
        prog="kubectl quotagate",
        description="Inspect quotagate's queues and Workloads, and ask what-if questions.",
        parents=[flags],
    )
    from controller.version import version

    parser.add_argument("--version", action="version", version=f"kubectl-quotagate {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    listing = commands.add_parser(
        "list", parents=[flags], help="list workloads, clusterqueues or localqueues"
    )
    listing.add_argument(
        "resource", type=resource_type, metavar="workloads|clusterqueues|localqueues"
    )
    listing.add_argument(
        "-A", "--all-namespaces", action="store_true", help="list across all namespaces"
    )
    listing.add_argument("-o", "--output", choices=("wide", "json", "yaml"))
    listing.set_defaults(handler=_list)

    describe = commands.add_parser(
        "describe",
        parents=[flags],
        help="a Workload's queue position, priority, preemptibility, admission, history; "
        "or whether a job object is managed, and why",
    )
    describe.add_argument("resource", type=_describe_type, metavar="workload|job|jobset|...")
    describe.add_argument("name")
    describe.add_argument("-o", "--output", choices=("json", "yaml"))
    _config_flag(describe)
    describe.add_argument(
        "--estimate-cycles",
        type=_non_negative,
        default=DEFAULT_ESTIMATE_CYCLES,
        metavar="N",
        help="simulated admission cycles the admission estimate of a pending Workload may "
        f"run (default {DEFAULT_ESTIMATE_CYCLES}; 0: no estimate)",
    )
    describe.set_defaults(handler=_describe)

    whatif = commands.add_parser(
        "whatif",
        parents=[flags],
        help="would a Workload with these requests be admitted now? whom would it preempt?",
    )
    whatif.add_argument("--queue", required=True, metavar="LOCALQUEUE")
    whatif.add_argument(
        "--requests",
        type=_requests,
        required=True,
        metavar="RES=QTY[,...]",
        help="per-pod requests, e.g. cpu=4,memory=8Gi",
    )
    whatif.add_argument("--count", type=_positive, default=1, help="number of pods (default 1)")
    whatif.add_argument(
        "--min-count",
        type=_positive,
        help="fewest pods it may run with (partial admission: Kueue's minCount)",
    )
    priority = whatif.add_mutually_exclusive_group()
    priority.add_argument("--priority", type=int)
    priority.add_argument(
        "--priority-class", metavar="NAME", help="a WorkloadPriorityClass or PriorityClass"
    )
    whatif.add_argument("-o", "--output", choices=("json", "yaml"))
    _config_flag(whatif)
    whatif.set_defaults(handler=_whatif)
    return parser


def _config_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--config",
        metavar="CONFIG.yaml",
        help="the controller's configuration file, to decide as it does (fairSharing, "
        "admissionFairSharing, waitForPodsReady, preemptibility); without it fair sharing "
        "is on when the ClusterQueues' status has shares",
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as exc:  # --help (0) or bad usage (2): argparse already printed
        return exc.code if isinstance(exc.code, int) else 0
    handler: Handler = args.handler
    # urllib3 logs each retry as a warning; the one error line below says it all.
    logging.getLogger("urllib3").setLevel(logging.ERROR)
    try:
        return handler(args)
    except KubectlError as exc:
        print(exc.message, file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return 130
    except Exception as exc:  # never a traceback: one line, like kubectl
        print(f"error: {type(exc).__name__}: {one_line(exc)}", file=sys.stderr)
        return 1


# -- commands -----------------------------------------------------------------------------


def _open(args: argparse.Namespace) -> tuple[Cluster, str]:
    """Connect as kubectl would; returns the cluster and the namespace to use."""
    options = ConnectionOptions(
        kubeconfig=getattr(args, "kubeconfig", None),
        context=getattr(args, "context", None),
        namespace=getattr(args, "namespace", None),
        request_timeout=getattr(args, "request_timeout", 30.0) or None,
    )
    connection = connect(options)
    return Cluster(connection), options.namespace or connection.default_namespace


def _warn(warnings: list[str]) -> None:
    for warning in warnings[:_MAX_WARNINGS]:
        print(f"Warning: {warning}", file=sys.stderr)
    if len(warnings) > _MAX_WARNINGS:
        print(f"Warning: ... and {len(warnings) - _MAX_WARNINGS} more", file=sys.stderr)


def _list(args: argparse.Namespace) -> int:
    cluster, namespace = _open(args)
    scope = None if args.all_namespaces else namespace
    now = time.time()
    if args.resource == "clusterqueues":
        items = cluster.list_objects(CLUSTER_QUEUES)
    else:
        items = cluster.list_objects(
            WORKLOADS if args.resource == "workloads" else LOCAL_QUEUES, scope
        )
    if args.output in ("json", "yaml"):
        print(dump({"apiVersion": "v1", "kind": "List", "items": items}, args.output))
        return 0
    if not items:
        where = "" if scope is None or args.resource == "clusterqueues" else f" in {scope}"
        print(f"No resources found{where}{' namespace' if where else ''}.", file=sys.stderr)
        return 0
    wide = args.output == "wide"
    if args.resource == "clusterqueues":
        print(cluster_queue_table(items, wide))
    elif args.resource == "localqueues":
        print(local_queue_table(items, args.all_namespaces, wide))
    else:
        print(_workload_table(cluster, items, scope, now, args.all_namespaces, wide))
    return 0


def _workload_table(
    cluster: Cluster,
    workloads: list[dict[str, Any]],
    scope: str | None,
    now: float,
    all_namespaces: bool,
    wide: bool,
) -> str:
    """Workloads with their ClusterQueue (through the LocalQueue while pending) and their
    effective priority (through their priority class)."""
    local_queues, _ = cluster.list_objects_tolerant(LOCAL_QUEUES, scope)
    classes, _ = cluster.list_objects_tolerant(WORKLOAD_PRIORITY_CLASSES)
    pod_classes, _ = cluster.list_objects_tolerant(PRIORITY_CLASSES)
    cluster_queue_of = {
        f"{lq['metadata'].get('namespace')}/{lq['metadata'].get('name')}": str(
            (lq.get("spec") or {}).get("clusterQueue")
        )
        for lq in local_queues
    }
    snapshot = Snapshot.convert([*classes, *pod_classes])
    return workload_table(
        workloads, cluster_queue_of, snapshot.priority_classes(), now, all_namespaces, wide
    )


def _snapshot(cluster: Cluster, config_path: str | None) -> Snapshot:
    config = None
    if config_path is not None:
        try:
            config = load_config(Path(config_path))
        except ConfigError as exc:
            raise KubectlError(f"error: --config: {exc}", exit_code=2) from None
    inputs, warnings = cluster.engine_inputs()
    snapshot = Snapshot.convert(inputs, warnings, config, config_path)
    _warn(snapshot.warnings)
    return snapshot


def _describe(args: argparse.Namespace) -> int:
    if args.resource != "workloads":
        return _describe_job(args)
    cluster, namespace = _open(args)
    obj = cluster.get(WORKLOADS, args.name, namespace)
    now = time.time()
    description = describe_workload(obj, _snapshot(cluster, args.config), now, args.estimate_cycles)
    if args.output:
        print(dump(description, args.output))
    else:
        print(render_description(description, now))
    return 0


def _describe_job(args: argparse.Namespace) -> int:
    """Whether quotagate manages a job object, and why (controller/kubectl/managed.py)."""
    from controller.config import ControllerConfig
    from controller.integrations.framework.registry import frameworks
    from controller.kube.client import NAMESPACES
    from controller.kubectl.managed import describe_management, render_management

    framework = frameworks()[args.resource]
    cluster, namespace = _open(args)
    obj = cluster.get(framework.resource, args.name, namespace)
    if args.config is not None:
        try:
            config = load_config(Path(args.config))
        except ConfigError as exc:
            raise KubectlError(f"error: --config: {exc}", exit_code=2) from None
        source = f"from --config {args.config}"
    else:
        config, source = ControllerConfig(), "the controller's defaults: no --config"
    try:
        namespace_labels = (cluster.get(NAMESPACES, namespace).get("metadata") or {}).get("labels")
    except KubectlError:
        namespace_labels = None
    workloads = cluster.list_objects_tolerant(WORKLOADS, namespace)[0]
    description = describe_management(obj, framework, config, source, namespace_labels, workloads)
    if args.output:
        print(dump(description, args.output))
    else:
        print(render_management(description))
    return 0


def _whatif(args: argparse.Namespace) -> int:
    cluster, namespace = _open(args)
    cluster.get(LOCAL_QUEUES, args.queue, namespace)  # NotFound reads like kubectl's
    snapshot = _snapshot(cluster, args.config)
    priority_class, priority = None, args.priority
    if args.priority_class:
        found = whatif_priority_class(args.priority_class, snapshot.objects)
        if found is None:
            raise KubectlError(
                f'error: no WorkloadPriorityClass or PriorityClass named "{args.priority_class}"'
            )
        priority_class = found[0]
        priority = found[1] if priority is None else priority
    now = time.time()
    taken = {obj.key for obj in snapshot.objects if isinstance(obj, Workload)}
    name = unique_name(taken, namespace)
    if args.min_count is not None and args.min_count > args.count:
        raise KubectlError(
            f"error: --min-count {args.min_count} is more than --count {args.count}", exit_code=2
        )
    body = hypothetical_workload(
        namespace,
        name,
        args.queue,
        args.requests,
        args.count,
        now,
        priority,
        priority_class,
        args.min_count,
    )
    try:
        workload = convert(body)
    except InvalidObject as exc:
        raise KubectlError(f"error: {exc}", exit_code=2) from None
    assert isinstance(workload, Workload)
    answer = {
        "workload": workload.key,
        "localQueue": f"{namespace}/{args.queue}",
        "requests": args.requests,
        "count": args.count,
        **({"minCount": args.min_count} if args.min_count is not None else {}),
        "priority": snapshot.priority_classes().resolve(workload).value,
        **decide([*snapshot.objects, workload], workload.key, now, snapshot.new_state()),
        "engineSettings": snapshot.settings,
    }
    print(dump(answer, args.output) if args.output else render_answer(answer))
    return 0


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
