"""`quotagate plan`: run admission cycles over a YAML state and print what would happen
(the plan itself: controller/core/plan.py; this module reads the input and prints).

Reads multi-document YAML (ResourceFlavor, ClusterQueue, LocalQueue, WorkloadPriorityClass,
scheduling.k8s.io PriorityClass, Namespace, Workload), runs cycles until nothing changes
(evictions are treated as completed: the evicted Workload releases its quota and waits
again), and prints the Workloads admitted by the plan, the ones that would preempt and the
ones left pending with the reason. With `--config` carrying admissionFairSharing, each
LocalQueue's `status.fairSharing.admissionFairSharingStatus` seeds its recent usage, and the
plan ends with every LocalQueue of a usage-based ClusterQueue: its consumed usage, the
entry penalties of the plan's admissions, and the usage its Workloads were ordered by.
Bad input prints one line per problem and exits 2; there is never a partial plan. Kueue
fields quotagate does not implement yet are named in a warning on stderr (and under
`unsupported` in JSON/YAML); the plan is computed without them.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml

from api.objects import InvalidObjectError
from api.registry import load_object
from controller.config import ConfigError, ControllerConfig, configure_state, load_config
from controller.core.model.api_fields import parse_time
from controller.core.model.clusterqueues import LocalQueue
from controller.core.model.from_api import CoreObject, InvalidObject, Validated, convert
from controller.core.model.nodes import node_from_api
from controller.core.model.unsupported import unsupported_fields
from controller.core.model.workloads import Workload
from controller.core.plan import plan
from controller.core.state import ClusterState

__all__ = ["add_plan_command", "render"]


class PlanInputError(Exception):
    def __init__(self, problems: list[str]) -> None:
        super().__init__("\n".join(problems))
        self.problems = problems


def add_plan_command(commands: Any) -> None:
    sub = commands.add_parser(
        "plan", help="run admission cycles over a YAML state and print the plan"
    )
    sub.add_argument(
        "-f",
        "--filename",
        action="append",
        required=True,
        metavar="STATE.yaml",
        help="multi-document YAML with the cluster state (repeatable; - for stdin)",
    )
    sub.add_argument("--now", help="the time of the plan (RFC 3339; default: now)")
    sub.add_argument(
        "--config",
        metavar="CONFIG.yaml",
        help="the controller's configuration file (as `quotagate run --config`): its "
        "fairSharing, admissionFairSharing, waitForPodsReady and preemptibility apply",
    )
    sub.add_argument(
        "--cycles",
        type=_positive_int,
        default=100_000,
        metavar="N",
        help="stop after N admission cycles (default: run until nothing changes; 1 shows "
        "what one cycle of Kueue's scheduler decides)",
    )
    sub.add_argument(
        "--without-api-rules",
        action="store_true",
        help="plan objects that Kueue's API rules (its webhooks, its CRDs' rules) would "
        "refuse as they are written, as Kueue's own unit tests build them; by default such "
        "an object is an input error, naming the field and the rule",
    )
    sub.add_argument("-o", "--output", choices=("json", "yaml", "table"), default="json")
    sub.set_defaults(handler=_plan)


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, not {value}")
    return value


def _load(paths: Iterable[str]) -> list[tuple[str, int, Any]]:
    docs: list[tuple[str, int, Any]] = []
    problems: list[str] = []
    for path in paths:
        try:
            if path == "-":
                text = sys.stdin.read()
            else:
                with open(path, encoding="utf-8") as stream:
                    text = stream.read()
            loaded = list(yaml.safe_load_all(text))
        except OSError as exc:
            problems.append(f"{path}: cannot read: {exc.strerror or exc}")
            continue
        except yaml.YAMLError as exc:
            problems.append(f"{path}: invalid YAML: {' '.join(str(exc).split())}")
            continue
        docs.extend((path, i, doc) for i, doc in enumerate(loaded, 1) if doc is not None)
    if problems:
        raise PlanInputError(problems)
    return docs


def _name_of(doc: dict[str, Any]) -> str:
    """`namespace/name` (or `name`) of a manifest."""
    meta = doc.get("metadata") or {}
    return "/".join(str(p) for p in (meta.get("namespace"), meta.get("name")) if p)


def _unsupported(docs: list[tuple[str, int, Any]], state: ClusterState) -> list[dict[str, str]]:
    """Kueue fields in the input that quotagate does not implement yet (reported, and the
    plan is computed without them: controller/core/model/unsupported.py)."""
    found = []
    for path, index, doc in docs:
        if not isinstance(doc, dict):
            continue
        name = _name_of(doc)
        for field, message in unsupported_fields(
            doc,
            fair_sharing=state.fair_sharing is not None,
            admission_fair_sharing=state.admission_fair_sharing is not None,
        ):
            found.append(
                {
                    "where": f"{path}: document {index}",
                    "object": f"{doc.get('kind')} {name}",
                    "field": field,
                    "message": message,
                }
            )
    return found


def _convert(docs: list[tuple[str, int, Any]], api_rules: bool = True) -> list[CoreObject]:
    problems: list[str] = []
    objects: list[tuple[str, int, CoreObject]] = []
    for path, index, doc in docs:
        where = f"{path}: document {index}"
        if not isinstance(doc, dict):
            problems.append(f"{where}: expected a Kubernetes object, got {type(doc).__name__}")
            continue
        if doc.get("kind") == "ProvisioningRequestConfig":
            # The parameters of a check controller's checks: admission does not read them
            # (an AdmissionCheck's Active condition says whether its controller runs).
            try:
                load_object(doc)
            except InvalidObjectError as exc:
                problems.append(f"{where}: {exc}")
            continue
        try:
            obj = node_from_api(doc) if doc.get("kind") == "Node" else convert(doc)
        except InvalidObject as exc:
            problems.extend(
                f"{where}: {exc.kind} {exc.name}: {field or 'kind'}: {message}"
                for field, message in exc.problems
            )
            continue
        if isinstance(obj, Validated) and obj.invalid is not None:
            if api_rules:  # Kueue's API would refuse it
                problems.append(f"{where}: {doc.get('kind')} {_name_of(doc)}: {obj.invalid}")
                continue
            obj = replace(obj, invalid=None)
        objects.append((path, index, obj))
    local_queues = {obj.key for _, _, obj in objects if isinstance(obj, LocalQueue)}
    for path, index, obj in objects:
        if isinstance(obj, Workload) and f"{obj.namespace}/{obj.queue_name}" not in local_queues:
            problems.append(
                f"{path}: document {index}: Workload {obj.key}: spec.queueName: "
                f"LocalQueue {obj.namespace}/{obj.queue_name} not found"
            )
    if problems:
        raise PlanInputError(problems)
    return [obj for _, _, obj in objects]


def _count(pod_set: dict[str, Any]) -> str:
    """`x3`, or `x3 of 5` for a partial admission."""
    if "requestedCount" in pod_set:
        return f"x{pod_set['count']} of {pod_set['requestedCount']}"
    return f"x{pod_set['count']}"


def render(result: dict[str, Any], output: str) -> str:
    if output == "json":
        return json.dumps(result, indent=2)
    if output == "yaml":
        return yaml.safe_dump(result, sort_keys=False).rstrip("\n")
    rows = [("WORKLOAD", "CLUSTERQUEUE", "DECISION", "DETAIL")]
    for a in result["admitted"]:
        flavors = ", ".join(
            f"{ps['name']}{_count(ps)}: "
            + " ".join(f"{r}={f}" for r, f in ps["flavors"].items())
            + (f" [{ps['topology']}]" if "topology" in ps else "")
            for ps in a["podSets"]
        )
        rows.append(
            (
                a["workload"],
                a["clusterQueue"],
                ("reserve" if a.get("admissionChecks") else "admit")
                + (" (borrowing)" if a["borrowing"] else ""),
                flavors
                + (
                    f"; admitted once checks {', '.join(a['admissionChecks'])} are Ready"
                    if a.get("admissionChecks")
                    else ""
                ),
            )
        )
    for p in result["preempting"]:
        victims = ", ".join(
            f"{v['workload']} ({v['clusterQueue']}, {v['reason']}, {v['pods']} pods"
            + (", already evicting)" if v.get("alreadyEvicting") else ")")
            for v in p["victims"]
        )
        partial = "".join(f"; {ps['name']}{_count(ps)}" for ps in p.get("podSets", ()))
        rows.append((p["workload"], p["clusterQueue"], "preempt", f"victims: {victims}{partial}"))
    for e in result["evicted"]:
        rows.append((e["workload"], e["clusterQueue"], "evict", e["reason"]))
    for p in result["pending"]:
        rows.append((p["workload"], p["clusterQueue"] or "-", "pending", p["reason"]))
    widths = [max(len(row[i]) for row in rows) for i in range(3)]
    table = "\n".join(
        "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
        for row in rows
    ).rstrip()
    usage_rows = [("LOCALQUEUE", "CLUSTERQUEUE", "USAGE", "CONSUMED + PENDING PENALTY")]
    for u in result.get("localQueueUsage", ()):
        amounts = {**u["consumed"]}
        for name, value in u["pendingPenalty"].items():
            amounts[name] = amounts.get(name, 0.0) + value
        detail = " ".join(f"{name}={value:g}" for name, value in sorted(amounts.items()))
        usage = u["usage"] if isinstance(u["usage"], str) else f"{u['usage']:g}"
        usage_rows.append((u["localQueue"], u["clusterQueue"], usage, detail))
    if len(usage_rows) == 1:
        return table
    widths = [max(len(row[i]) for row in usage_rows) for i in range(3)]
    return (
        table
        + "\n\n"
        + "\n".join(
            (
                "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row[:3])) + "  " + row[3]
            ).rstrip()
            for row in usage_rows
        )
    )


def _plan(args: argparse.Namespace) -> int:
    try:
        now = parse_time(args.now) if args.now else datetime.now(UTC).timestamp()
    except ValueError:
        print(f"--now: not an RFC 3339 time: {args.now!r}", file=sys.stderr)
        return 2
    try:
        config = load_config(Path(args.config)) if args.config else ControllerConfig()
    except ConfigError as exc:
        print(f"--config: {exc}", file=sys.stderr)
        return 2
    try:
        docs = _load(args.filename)
        objects = _convert(docs, api_rules=not args.without_api_rules)
    except PlanInputError as exc:
        for line in exc.problems:
            print(line, file=sys.stderr)
        return 2
    state = configure_state(config, ClusterState())
    result = plan(objects, now, args.cycles, state)
    unsupported = _unsupported(docs, state)
    for item in unsupported:
        print(
            f"warning: {item['where']}: {item['object']}: {item['field']}: {item['message']}",
            file=sys.stderr,
        )
    if unsupported:
        result["unsupported"] = unsupported
    print(render(result, args.output))
    return 0
