"""One bad manifest per rule Kueue's API applies to its kinds, and the objects it accepts.

Each case is written from Kueue's code (the CRD rules in `apis/kueue/v1beta2/*_types.go`,
the checks in `pkg/webhooks/*_webhook.go` and the apimachinery helpers they call): the
object, and each field error Kueue answers, as `field.Error` prints it. The same table is
run on the rules in Python (tests/unit/api/test_validation.py) and on the real API server
with the validating webhook registered (tests/integration/test_validation.py); the rule
ids are docs/validation.md's.

`by` says who refuses it: "cel" a CRD rule (the API server; api/validation checks it too),
"schema" the CRD's structural schema (the API server only), "webhook" the validating
webhook. `old` makes an update case: `old` is created first (it must be valid), then
replaced by `obj`; `reserved` gives `old` a quota reservation (QuotaReserved=True and an
admission, written through the status subresource) before the update.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field
from typing import Any

API = "kueue.x-k8s.io/v1beta2"
NAMESPACE = "validation"
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
GATES = "kueue.x-k8s.io/admission-gated-by"

# How Kubernetes words two of its own checks (apimachinery's validation helpers).
LABEL_NAME = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and "
    "end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex "
    "used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
LABEL_VALUE = (
    "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'MyValue',  or "
    "'my_value',  or '12345', regex used for validation is "
    "'(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)
NEGATIVE = "must be greater than or equal to 0"
IMMUTABLE = "field is immutable"


@dataclass(frozen=True)
class Case:
    rule: str
    name: str
    obj: dict[str, Any]
    errors: tuple[str, ...] = ()
    by: str = "webhook"
    old: dict[str, Any] | None = None
    reserved: bool = False
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def kind(self) -> str:
        return str(self.obj["kind"])

    @property
    def accepted(self) -> bool:
        return not self.errors


def _meta(name: str, namespaced: bool, annotations: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if namespaced:
        meta["namespace"] = NAMESPACE
    if annotations:
        meta["annotations"] = annotations
    return meta


def rf(spec: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ResourceFlavor",
        "metadata": _meta("x", False, None),
        "spec": spec or {},
    }


def quota(name: str, nominal: Any, borrowing: Any = None, lending: Any = None) -> dict[str, Any]:
    out: dict[str, Any] = {"name": name, "nominalQuota": nominal}
    if borrowing is not None:
        out["borrowingLimit"] = borrowing
    if lending is not None:
        out["lendingLimit"] = lending
    return out


def group(covered: list[str], *flavors: tuple[str, list[dict[str, Any]]]) -> dict[str, Any]:
    return {
        "coveredResources": covered,
        "flavors": [{"name": name, "resources": resources} for name, resources in flavors],
    }


CPU = group(["cpu"], ("default", [quota("cpu", "4")]))


def topology(*labels: str) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "Topology",
        "metadata": _meta("x", False, None),
        "spec": {"levels": [{"nodeLabel": label} for label in labels]},
    }


HOST = "kubernetes.io/hostname"


def cq(**spec: Any) -> dict[str, Any]:
    body = {"namespaceSelector": {}, "resourceGroups": [CPU], **spec}
    return {
        "apiVersion": API,
        "kind": "ClusterQueue",
        "metadata": _meta("x", False, None),
        "spec": body,
    }


def cohort(**spec: Any) -> dict[str, Any]:
    return {"apiVersion": API, "kind": "Cohort", "metadata": _meta("x", False, None), "spec": spec}


def lq(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "LocalQueue",
        "metadata": _meta("x", True, None),
        "spec": spec,
    }


def ac(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "AdmissionCheck",
        "metadata": _meta("x", False, None),
        "spec": {"controllerName": "example.com/budget", **spec},
    }


def prc(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": API,
        "kind": "ProvisioningRequestConfig",
        "metadata": _meta("x", False, None),
        "spec": {"provisioningClassName": "check-capacity.autoscaling.x-k8s.io", **spec},
    }


def pod_set(name: str = "main", count: int = 1, **spec: Any) -> dict[str, Any]:
    pod = {
        "containers": [{"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "1"}}}]
    }
    pod.update(spec)
    return {"name": name, "count": count, "template": {"spec": pod}}


def wl(
    pod_sets: list[dict[str, Any]] | None = None,
    annotations: dict[str, str] | None = None,
    **spec: Any,
) -> dict[str, Any]:
    body = {"queueName": "lq", "podSets": pod_sets or [pod_set()], **spec}
    return {
        "apiVersion": API,
        "kind": "Workload",
        "metadata": _meta("x", True, annotations),
        "spec": body,
    }


def changed(obj: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    """A deep copy of `obj` with the field at `path` set (or removed, for value None)."""
    out = copy.deepcopy(obj)
    target = out
    for part in path[:-1]:
        target = target[part]
    if value is None:
        del target[path[-1]]
    else:
        target[path[-1]] = value
    return out


RG = ("spec", "resourceGroups")
Q0 = "spec.resourceGroups[0].flavors[0].resources[0]"
PS0 = "spec.podSets[0].template"
TOLERATION_RULE = "spec.tolerations: Invalid value: "

CASES: list[Case] = [
    # --- ResourceFlavor: resourceflavor_types.go (CEL), resourceflavor_webhook.go --------
    Case(
        "RF-1",
        "topologyName without nodeLabels",
        rf({"topologyName": "t"}),
        ("spec: Invalid value: at least one nodeLabel is required when topology is set",),
        "cel",
    ),
    Case(
        "RF-2",
        "topologyName changed once set",
        rf({"topologyName": "u", "nodeLabels": {"a": "b"}}),
        ("spec: Invalid value: topologyName is immutable when topologyName is set",),
        "cel",
        old=rf({"topologyName": "t", "nodeLabels": {"a": "b"}}),
    ),
    Case(
        "RF-3",
        "taint effect unknown",
        rf({"nodeTaints": [{"key": "k", "effect": "Sometimes"}]}),
        (
            "spec.nodeTaints: Invalid value: supported taint effect values: 'NoSchedule', "
            "'PreferNoSchedule', 'NoExecute'",
        ),
        "cel",
    ),
    Case(
        "RF-4",
        "toleration Equal without key",
        rf({"tolerations": [{"operator": "Equal", "value": "x"}]}),
        (
            TOLERATION_RULE + "operator must be Exists when 'key' is empty, which means 'match all "
            "values and all keys'",
        ),
        "cel",
    ),
    Case(
        "RF-5",
        "tolerationSeconds without NoExecute",
        rf(
            {
                "tolerations": [
                    {
                        "key": "k",
                        "operator": "Exists",
                        "effect": "NoSchedule",
                        "tolerationSeconds": 5,
                    }
                ]
            }
        ),
        (TOLERATION_RULE + "effect must be 'NoExecute' when 'tolerationSeconds' is set",),
        "cel",
    ),
    Case(
        "RF-6",
        "toleration operator unknown",
        rf({"tolerations": [{"key": "k", "operator": "Near"}]}),
        (TOLERATION_RULE + "supported toleration values: 'Equal'(default), 'Exists'",),
        "cel",
    ),
    Case(
        "RF-7",
        "toleration value with Exists",
        rf({"tolerations": [{"key": "k", "operator": "Exists", "value": "v"}]}),
        (TOLERATION_RULE + "a value must be empty when 'operator' is 'Exists'",),
        "cel",
    ),
    Case(
        "RF-8",
        "toleration effect unknown",
        rf({"tolerations": [{"key": "k", "effect": "NoRun"}]}),
        (
            TOLERATION_RULE + "supported taint effect values: 'NoSchedule', 'PreferNoSchedule', "
            "'NoExecute'",
        ),
        "cel",
    ),
    Case(
        "RF-9",
        "nodeLabels key and value",
        rf({"nodeLabels": {"zone a": "x y"}}),
        (
            f'spec.nodeLabels: Invalid value: "zone a": {LABEL_NAME}',
            f'spec.nodeLabels: Invalid value: "x y": {LABEL_VALUE}',
        ),
    ),
    Case(
        "RF-10",
        "taint key",
        rf({"nodeTaints": [{"key": "bad key", "effect": "NoSchedule"}]}),
        (f'spec.nodeTaints[0].key: Invalid value: "bad key": {LABEL_NAME}',),
    ),
    Case(
        "RF-11",
        "taint value",
        rf({"nodeTaints": [{"key": "k", "value": "a b", "effect": "NoSchedule"}]}),
        (f'spec.nodeTaints[0].value: Invalid value: "a b": {LABEL_VALUE}',),
    ),
    Case(
        "RF-12",
        "taints repeat key and effect",
        rf(
            {
                "nodeTaints": [
                    {"key": "k", "value": "a", "effect": "NoSchedule"},
                    {"key": "k", "value": "b", "effect": "NoSchedule"},
                ]
            }
        ),
        (
            'spec.nodeTaints[1]: Duplicate value: {"key":"k","value":"b","effect":"NoSchedule"}: '
            "taints must be unique by key and effect pair",
        ),
    ),
    Case(
        "RF-13",
        "toleration key",
        rf({"tolerations": [{"key": "a/b/c", "operator": "Exists"}]}),
        (
            'spec.tolerations[0].key: Invalid value: "a/b/c": a valid label key must consist of '
            "alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
            "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
            "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and "
            "'/' (e.g. 'example.com/MyName')",
        ),
    ),
    Case(
        "RF-S1",
        "nine nodeLabels",
        rf({"nodeLabels": {f"k{i}": "v" for i in range(9)}}),
        ("spec.nodeLabels: Too many: 9: must have at most 8 items",),
        "schema",
    ),
    Case(
        "RF-S2",
        "topologyName not a name",
        rf({"topologyName": "Not_A_Name", "nodeLabels": {"a": "b"}}),
        ('spec.topologyName: Invalid value: "Not_A_Name": spec.topologyName in body should match',),
        "schema",
    ),
    Case(
        "RF-S3",
        "unknown field",
        rf({"nodeLabel": {"a": "b"}}),
        ('unknown field "spec.nodeLabel"',),
        "schema",
    ),
    Case(
        "RF-OK",
        "taints, tolerations, labels and a topology",
        rf(
            {
                "nodeLabels": {"example.com/zone": "a"},
                "topologyName": "t",
                "nodeTaints": [
                    {"key": "k", "value": "v", "effect": "NoSchedule"},
                    {"key": "k", "value": "v", "effect": "NoExecute"},
                ],
                "tolerations": [
                    {"operator": "Exists"},
                    {
                        "key": "k",
                        "operator": "Exists",
                        "effect": "NoExecute",
                        "tolerationSeconds": 5,
                    },
                    {"key": "example.com/k", "value": "v"},
                ],
            }
        ),
    ),
    # --- ClusterQueue: clusterqueue_types.go (CEL), clusterqueue_webhook.go --------------
    Case(
        "CQ-1",
        "borrowingLimit without a cohort",
        cq(resourceGroups=[group(["cpu"], ("default", [quota("cpu", "4", borrowing="1")]))]),
        ("spec: Invalid value: borrowingLimit must be nil when cohort is empty",),
        "cel",
    ),
    Case(
        "CQ-2",
        "fungibility preference with MayStopSearch",
        cq(
            flavorFungibility={
                "whenCanBorrow": "MayStopSearch",
                "preference": "BorrowingOverPreemption",
            }
        ),
        (
            "spec.flavorFungibility: Invalid value: preference can only be set when both whenCanBorrow "
            "and whenCanPreempt are TryNextFlavor",
        ),
        "cel",
    ),
    Case(
        "CQ-3",
        "borrowWithinCohort without reclaimWithinCohort",
        cq(
            cohortName="c",
            preemption={
                "reclaimWithinCohort": "Never",
                "borrowWithinCohort": {"policy": "LowerPriority"},
            },
        ),
        (
            "spec.preemption: Invalid value: reclaimWithinCohort=Never and "
            "borrowWithinCohort.Policy!=Never",
        ),
        "cel",
    ),
    Case(
        "CQ-4",
        "flavor resources differ in number from coveredResources",
        cq(resourceGroups=[group(["cpu", "memory"], ("default", [quota("cpu", "4")]))]),
        (
            "spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources "
            "as the coveredResources",
        ),
        "cel",
    ),
    Case(
        "CQ-5",
        "coveredResources name",
        cq(resourceGroups=[group(["@cpu"], ("default", [quota("@cpu", "4")]))]),
        ('spec.resourceGroups[0].coveredResources[0]: Invalid value: "@cpu": ' + LABEL_NAME,),
    ),
    Case(
        "CQ-6",
        "a resource in two groups",
        cq(resourceGroups=[CPU, group(["cpu"], ("spot", [quota("cpu", "4")]))]),
        ('spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"',),
    ),
    Case(
        "CQ-7",
        "a flavor in two groups",
        cq(resourceGroups=[CPU, group(["memory"], ("default", [quota("memory", "1Gi")]))]),
        ('spec.resourceGroups[1].flavors[0].name: Duplicate value: "default"',),
    ),
    Case(
        "CQ-8",
        "resources out of coveredResources' order",
        cq(
            resourceGroups=[
                group(["cpu", "memory"], ("default", [quota("memory", "1Gi"), quota("cpu", "4")]))
            ]
        ),
        (
            'spec.resourceGroups[0].flavors[0].resources[0].name: Invalid value: "memory": must '
            "match the name in coveredResources",
            'spec.resourceGroups[0].flavors[0].resources[1].name: Invalid value: "cpu": must '
            "match the name in coveredResources",
        ),
    ),
    Case(
        "CQ-9",
        "negative nominalQuota",
        cq(resourceGroups=[group(["cpu"], ("default", [quota("cpu", "-1")]))]),
        (f'{Q0}.nominalQuota: Invalid value: "-1": {NEGATIVE}',),
    ),
    Case(
        "CQ-10",
        "negative borrowingLimit",
        cq(
            cohortName="c",
            resourceGroups=[group(["cpu"], ("default", [quota("cpu", "4", borrowing="-1")]))],
        ),
        (f'{Q0}.borrowingLimit: Invalid value: "-1": {NEGATIVE}',),
    ),
    Case(
        "CQ-11",
        "negative lendingLimit",
        cq(
            cohortName="c",
            resourceGroups=[group(["cpu"], ("default", [quota("cpu", "4", lending="-1")]))],
        ),
        (f'{Q0}.lendingLimit: Invalid value: "-1": {NEGATIVE}',),
    ),
    Case(
        "CQ-12",
        "lendingLimit without a cohort",
        cq(resourceGroups=[group(["cpu"], ("default", [quota("cpu", "4", lending="1")]))]),
        (f'{Q0}.lendingLimit: Invalid value: "1": must be nil when cohort is empty',),
    ),
    Case(
        "CQ-13",
        "lendingLimit above nominalQuota",
        cq(
            cohortName="c",
            resourceGroups=[group(["cpu"], ("default", [quota("cpu", "4", lending="5")]))],
        ),
        (f'{Q0}.lendingLimit: Invalid value: "5": must be less than or equal to the nominalQuota',),
    ),
    Case(
        "CQ-14",
        "namespaceSelector",
        cq(
            namespaceSelector={
                "matchLabels": {"a": "b c"},
                "matchExpressions": [
                    {"key": "k", "operator": "In"},
                    {"key": "k", "operator": "Exists", "values": ["v"]},
                    {"key": "k", "operator": "Near", "values": ["v"]},
                ],
            }
        ),
        (
            f'spec.namespaceSelector.matchLabels: Invalid value: "b c": {LABEL_VALUE}',
            "spec.namespaceSelector.matchExpressions[0].values: Required value: must be specified "
            "when `operator` is 'In' or 'NotIn'",
            "spec.namespaceSelector.matchExpressions[1].values: Forbidden: may not be specified when "
            "`operator` is 'Exists' or 'DoesNotExist'",
            'spec.namespaceSelector.matchExpressions[2].operator: Invalid value: "Near": not a valid '
            "selector operator",
        ),
    ),
    Case(
        "CQ-15a",
        "negative fair-sharing weight",
        cq(fairSharing={"weight": "-1"}),
        (f'spec.fairSharing: Invalid value: "-1": {NEGATIVE}',),
    ),
    Case(
        "CQ-15b",
        "fair-sharing weight of 1n",
        cq(fairSharing={"weight": "1n"}),
        ('spec.fairSharing: Invalid value: "1n": When not 0, weight must be > 10e-9',),
    ),
    Case(
        "CQ-16",
        "257 flavors",
        cq(
            resourceGroups=[
                group(["r"], *((f"f{i}", [quota("r", "1")]) for i in range(64))),
                group(["s"], *((f"g{i}", [quota("s", "1")]) for i in range(64))),
                group(["t"], *((f"h{i}", [quota("t", "1")]) for i in range(64))),
                group(["u"], *((f"j{i}", [quota("u", "1")]) for i in range(64))),
                group(["v"], ("k", [quota("v", "1")])),
            ]
        ),
        (
            "spec.resourceGroups: Invalid value: 257: total number of flavors across all "
            "resourceGroups must be ≤ 256, got 257",
        ),
    ),
    Case(
        "CQ-17",
        "257 covered resources",
        cq(
            resourceGroups=[
                group(
                    [f"r{g}-{i}" for i in range(64)],
                    (f"f{g}", [quota(f"r{g}-{i}", "1") for i in range(64)]),
                )
                for g in range(4)
            ]
            + [group(["last"], ("f4", [quota("last", "1")]))]
        ),
        (
            "spec.resourceGroups: Invalid value: 257: total number of covered resources across all "
            "resourceGroups must be ≤ 256, got 257",
        ),
    ),
    Case(
        "CQ-18",
        "513 flavor-resource combinations in a group",
        cq(
            resourceGroups=[
                group(
                    [f"r{i}" for i in range(57)],
                    *((f"f{j}", [quota(f"r{i}", "1") for i in range(57)]) for j in range(9)),
                )
            ]
        ),
        (
            "spec.resourceGroups[0]: Invalid value: 513: number of flavor-resource combinations in a "
            "resourceGroup must be ≤ 512, got 513",
        ),
    ),
    Case(
        "CQ-19",
        "admission check on a flavor not in quota",
        cq(
            admissionChecksStrategy={"admissionChecks": [{"name": "check", "onFlavors": ["ghost"]}]}
        ),
        (
            "spec.admissionChecksStrategy.admissionChecks[0].onFlavors[0]: Unsupported value: "
            '"ghost": supported values: "default"',
        ),
    ),
    Case(
        "CQ-20",
        "concurrentAdmissionPolicy added",
        cq(concurrentAdmissionPolicy={"migration": {"mode": "RetainFirstAdmission"}}),
        (
            'spec.concurrentAdmissionPolicy: Invalid value: {"migration":{"mode":'
            '"RetainFirstAdmission"}}: field is immutable',
        ),
        old=cq(),
    ),
    Case(
        "CQ-S1",
        "seventeen resource groups",
        cq(resourceGroups=[group([f"r{i}"], (f"f{i}", [quota(f"r{i}", "1")])) for i in range(17)]),
        ("spec.resourceGroups: Too many: 17: must have at most 16 items",),
        "schema",
    ),
    Case(
        "CQ-S2",
        "cohortName not a name",
        cq(cohortName="Not_A_Name"),
        ('spec.cohortName: Invalid value: "Not_A_Name": spec.cohortName in body should match',),
        "schema",
    ),
    Case(
        "CQ-S3",
        "a misspelt field (namespaceSelecter)",
        cq(namespaceSelecter={}),
        ('unknown field "spec.namespaceSelecter"',),
        "schema",
    ),
    Case(
        "CQ-S4",
        "queueingStrategy unknown",
        cq(queueingStrategy="Fastest"),
        ('spec.queueingStrategy: Unsupported value: "Fastest"',),
        "schema",
    ),
    Case(
        "CQ-OK",
        "a cohort, limits, lending equal to nominal, admission checks on its flavor",
        cq(
            cohortName="c",
            fairSharing={"weight": "0"},
            resourceGroups=[
                group(
                    ["cpu", "memory"],
                    ("default", [quota("cpu", "4", "2", "4"), quota("memory", "8Gi", "0", "0")]),
                    ("spot", [quota("cpu", "0"), quota("memory", "0")]),
                )
            ],
            admissionChecksStrategy={"admissionChecks": [{"name": "check", "onFlavors": ["spot"]}]},
            preemption={
                "reclaimWithinCohort": "Any",
                "borrowWithinCohort": {"policy": "LowerPriority"},
                "withinClusterQueue": "LowerPriority",
            },
            flavorFungibility={
                "whenCanBorrow": "TryNextFlavor",
                "whenCanPreempt": "TryNextFlavor",
                "preference": "PreemptionOverBorrowing",
            },
            namespaceSelector={
                "matchExpressions": [{"key": "team", "operator": "In", "values": ["a"]}]
            },
        ),
    ),
    Case(
        "CQ-OK2", "queueing strategy changed on update", cq(queueingStrategy="StrictFIFO"), old=cq()
    ),
    # --- Cohort: cohort_webhook.go and the ResourceGroup rule ----------------------------
    Case(
        "CO-1",
        "flavor resources differ in number from coveredResources",
        cohort(
            parentName="p",
            resourceGroups=[group(["cpu", "memory"], ("default", [quota("cpu", "4")]))],
        ),
        (
            "spec.resourceGroups[0]: Invalid value: flavors must have the same number of resources "
            "as the coveredResources",
        ),
        "cel",
    ),
    Case(
        "CO-2",
        "limits without a parent",
        cohort(resourceGroups=[group(["cpu"], ("default", [quota("cpu", "4", "1", "2")]))]),
        (
            f'{Q0}.borrowingLimit: Invalid value: "1": must be nil when parent is empty',
            f'{Q0}.lendingLimit: Invalid value: "2": must be nil when parent is empty',
        ),
    ),
    Case(
        "CO-3",
        "a resource in two groups",
        cohort(resourceGroups=[CPU, group(["cpu"], ("spot", [quota("cpu", "4")]))]),
        ('spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"',),
    ),
    Case(
        "CO-4",
        "negative nominalQuota",
        cohort(resourceGroups=[group(["cpu"], ("default", [quota("cpu", "-2")]))]),
        (f'{Q0}.nominalQuota: Invalid value: "-2": {NEGATIVE}',),
    ),
    Case(
        "CO-5",
        "negative weight",
        cohort(fairSharing={"weight": "-1"}),
        (f'spec.fairSharing: Invalid value: "-1": {NEGATIVE}',),
    ),
    Case(
        "CO-OK",
        "a lendingLimit above its own nominal quota (its subtree lends)",
        cohort(
            parentName="p",
            resourceGroups=[group(["cpu"], ("default", [quota("cpu", "1", "2", "8")]))],
        ),
    ),
    # --- LocalQueue: localqueue_types.go ------------------------------------------------
    Case(
        "LQ-1",
        "clusterQueue changed",
        lq(clusterQueue="b"),
        ('spec.clusterQueue: Invalid value: "b": field is immutable',),
        "cel",
        old=lq(clusterQueue="a"),
    ),
    Case(
        "LQ-S1",
        "clusterQueue not a name",
        lq(clusterQueue="Not_A_Name"),
        ('spec.clusterQueue: Invalid value: "Not_A_Name": spec.clusterQueue in body should match',),
        "schema",
    ),
    Case("LQ-OK", "no clusterQueue (optional in Kueue's schema)", lq()),
    # --- AdmissionCheck, ProvisioningRequestConfig: admissioncheck_types.go,
    # provisioningrequestconfig_types.go (no webhook) -------------------------------------
    Case(
        "AC-1",
        "controllerName changed",
        ac(controllerName="example.com/other"),
        ('spec.controllerName: Invalid value: "example.com/other": field is immutable',),
        "cel",
        old=ac(),
    ),
    Case(
        "AC-S1",
        "controllerName empty",
        ac(controllerName=""),
        (
            'spec.controllerName: Invalid value: "": spec.controllerName in body should be at least 1 chars long',
        ),
        "schema",
    ),
    Case(
        "AC-S2",
        "parameters kind not a kind",
        ac(parameters={"apiGroup": "kueue.x-k8s.io", "kind": "Not_A_Kind", "name": "p"}),
        (
            'spec.parameters.kind: Invalid value: "Not_A_Kind": spec.parameters.kind in body should match',
        ),
        "schema",
    ),
    Case(
        "AC-OK",
        "parameters of any case-insensitive kind",
        ac(
            parameters={
                "apiGroup": "kueue.x-k8s.io",
                "kind": "ProvisioningRequestConfig",
                "name": "p",
            }
        ),
    ),
    Case(
        "PRC-S1",
        "provisioningClassName not a name",
        prc(provisioningClassName="Not_A_Class"),
        (
            'spec.provisioningClassName: Invalid value: "Not_A_Class": '
            "spec.provisioningClassName in body should match",
        ),
        "schema",
    ),
    Case(
        "PRC-S2",
        "podSetMergePolicy unknown",
        prc(podSetMergePolicy="Whatever"),
        ('spec.podSetMergePolicy: Unsupported value: "Whatever"',),
        "schema",
    ),
    Case(
        "PRC-S3",
        "a parameter longer than 255 characters",
        prc(parameters={"a": "x" * 256}),
        ("spec.parameters.a: Too long: may not be more than 255 bytes",),
        "schema",
    ),
    Case(
        "PRC-OK",
        "every field",
        prc(
            parameters={"ValidUntilSeconds": "600"},
            managedResources=["nvidia.com/gpu"],
            retryStrategy={
                "backoffLimitCount": 1,
                "backoffBaseSeconds": 5,
                "backoffMaxSeconds": 60,
            },
            podSetUpdates={
                "nodeSelector": [
                    {"key": "example.com/pool", "valueFromProvisioningClassDetail": "pool"}
                ]
            },
            podSetMergePolicy="IdenticalPodTemplates",
        ),
    ),
    # --- Workload: workload_types.go (CEL), workload_webhook.go -------------------------
    Case(
        "WL-1",
        "priorityClassRef without priority",
        wl(
            priorityClassRef={
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "high",
            }
        ),
        ("spec: Invalid value: priority should not be nil when priorityClassRef is set",),
        "cel",
    ),
    Case(
        "WL-2",
        "minCount above count",
        wl([{**pod_set(count=2), "minCount": 3}]),
        ("spec.podSets[0]: Invalid value: minCount should be positive and less or equal to count",),
        "cel",
    ),
    Case(
        "WL-3",
        "PriorityClass kind in kueue.x-k8s.io",
        wl(
            priority=1,
            priorityClassRef={"group": "kueue.x-k8s.io", "kind": "PriorityClass", "name": "high"},
        ),
        (
            "spec.priorityClassRef: Invalid value: only the WorkloadPriorityClass kind is allowed for "
            "the kueue.x-k8s.io group",
        ),
        "cel",
    ),
    Case(
        "WL-4",
        "WorkloadPriorityClass kind in scheduling.k8s.io",
        wl(
            priority=1,
            priorityClassRef={
                "group": "scheduling.k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "high",
            },
        ),
        (
            "spec.priorityClassRef: Invalid value: only the PriorityClass kind is allowed for the "
            "scheduling.k8s.io group",
        ),
        "cel",
    ),
    Case(
        "WL-5",
        "queueName changed while reserved",
        wl(queueName="other"),
        ("<nil>: Invalid value: queueName is immutable while workload quota reserved",),
        "cel",
        old=wl(),
        reserved=True,
    ),
    Case(
        "WL-6",
        "priorityClassRef added while reserved",
        wl(
            priority=1,
            priorityClassRef={
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "high",
            },
        ),
        ("<nil>: Invalid value: priorityClassRef is immutable while workload quota reserved",),
        "cel",
        old=wl(priority=1),
        reserved=True,
    ),
    Case(
        "WL-7",
        "PriorityClass name changed while reserved",
        wl(
            priority=1,
            priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "b"},
        ),
        (
            "<nil>: Invalid value: priorityClassRef.name is immutable for "
            "scheduling.k8s.io/priorityclass while workload quota reserved",
        ),
        "cel",
        old=wl(
            priority=1,
            priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "a"},
        ),
        reserved=True,
    ),
    Case(
        "WL-8",
        "priorityClassRef group changed while reserved",
        wl(
            priority=1,
            priorityClassRef={"group": "scheduling.k8s.io", "kind": "PriorityClass", "name": "a"},
        ),
        (
            "<nil>: Invalid value: priorityClassRef.group is immutable while workload quota reserved",
            "<nil>: Invalid value: priorityClassRef.kind is immutable while workload quota reserved",
        ),
        "cel",
        old=wl(
            priority=1,
            priorityClassRef={
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "a",
            },
        ),
        reserved=True,
    ),
    Case(
        "WL-9",
        "pod sets changed while reserved",
        wl([pod_set(count=2)]),
        ("spec.podSets.0: Invalid value: ",),
        old=wl(),
        reserved=True,
        extra={"detail": IMMUTABLE},
    ),
    Case(
        "WL-10",
        "the reserved pods resource requested",
        wl(
            [
                pod_set(
                    containers=[
                        {"name": "c", "image": "busybox", "resources": {"requests": {"pods": "1"}}}
                    ]
                )
            ]
        ),
        (
            f'{PS0}.spec.containers[0].resources.requests[pods]: Invalid value: "pods": the key is '
            "reserved for internal kueue use",
        ),
    ),
    Case(
        "WL-11",
        "pods in an init container's limits and the pod's own requests",
        wl(
            [
                pod_set(
                    initContainers=[
                        {"name": "i", "image": "busybox", "resources": {"limits": {"pods": "1"}}}
                    ],
                    resources={"requests": {"pods": "1"}},
                )
            ]
        ),
        (
            f'{PS0}.spec.initContainers[0].resources.limits[pods]: Invalid value: "pods": the key is '
            "reserved for internal kueue use",
            f'{PS0}.spec.resources.requests[pods]: Invalid value: "pods": the key is reserved for '
            "internal kueue use",
        ),
    ),
    Case(
        "WL-12",
        "negative request",
        wl(
            [
                pod_set(
                    containers=[
                        {"name": "c", "image": "busybox", "resources": {"requests": {"cpu": "-1"}}}
                    ]
                )
            ]
        ),
        (f'{PS0}.spec.containers[0].resources.requests[cpu]: Invalid value: "-1": {NEGATIVE}',),
    ),
    Case(
        "WL-13",
        "template labels",
        wl(
            [
                {
                    **pod_set(),
                    "template": {
                        "metadata": {"labels": {"a": "b c"}},
                        "spec": pod_set()["template"]["spec"],
                    },
                }
            ]
        ),
        (f'{PS0}.metadata.labels: Invalid value: "b c": {LABEL_VALUE}',),
    ),
    Case(
        "WL-14",
        "minCount on two pod sets",
        wl([{**pod_set("a", 2), "minCount": 1}, {**pod_set("b", 2), "minCount": 1}]),
        ("spec.podSets: Invalid value: 2: at most one podSet can use minCount",),
    ),
    Case(
        "WL-15",
        "slice size without slice topology",
        wl([{**pod_set(), "topologyRequest": {"podSetSliceSize": 2}}]),
        (
            "spec.podSets[0].topologyRequest.podSetSliceSize: Forbidden: may not be set when "
            "podSetSliceRequiredTopology is not specified",
        ),
    ),
    Case(
        "WL-16",
        "admission gate not a domain-prefixed path",
        wl(annotations={GATES: "gate"}),
        (
            f'metadata.annotations[{GATES}]: Invalid value: "gate": must be a domain-prefixed path '
            '(such as "acme.io/foo")',
        ),
    ),
    Case(
        "WL-17",
        "admission gate repeated",
        wl(annotations={GATES: "example.com/a, example.com/a"}),
        (
            f'metadata.annotations[{GATES}]: Invalid value: "example.com/a, example.com/a": duplicate '
            "gate name: example.com/a",
        ),
    ),
    Case(
        "WL-18",
        "admission gate added after creation",
        wl(annotations={GATES: "example.com/a"}),
        (f"metadata.annotations[{GATES}]: Forbidden: cannot add admission gate after creation",),
        old=wl(),
    ),
    Case(
        "WL-19",
        "admission gate replaced",
        wl(annotations={GATES: "example.com/b"}),
        (f"metadata.annotations[{GATES}]: Forbidden: can only remove gates, not add new ones",),
        old=wl(annotations={GATES: "example.com/a"}),
    ),
    Case(
        "WL-S1",
        "pod set name not a DNS label",
        wl([pod_set("Main_Set")]),
        (
            'spec.podSets[0].name: Invalid value: "Main_Set": spec.podSets[0].name in body should match',
        ),
        "schema",
    ),
    Case(
        "WL-S2",
        "a misspelt pod field (nodeSelectr)",
        wl([pod_set(nodeSelectr={"a": "b"})]),
        ('unknown field "spec.podSets[0].template.spec.nodeSelectr"',),
        "schema",
    ),
    Case(
        "WL-S3",
        "nineteen pod sets",
        wl([pod_set(f"p{i}") for i in range(19)]),
        ("spec.podSets: Too many: 19: must have at most 18 items",),
        "schema",
    ),
    Case(
        "WL-OK",
        "pod-level resources, minCount, gates, a priority class with its priority, a count of 0",
        wl(
            [
                {
                    **pod_set("a", 3, resources={"requests": {"cpu": "2", "memory": "1Gi"}}),
                    "minCount": 2,
                },
                pod_set("b", 0),
            ],
            annotations={GATES: "example.com/a,example.com/b"},
            priority=5,
            priorityClassRef={
                "group": "kueue.x-k8s.io",
                "kind": "WorkloadPriorityClass",
                "name": "high",
            },
        ),
    ),
    Case(
        "WL-OK2",
        "a gate removed",
        wl(annotations={GATES: "example.com/b"}),
        old=wl(annotations={GATES: "example.com/a,example.com/b"}),
    ),
    Case(
        "WL-OK3",
        "a pod set's count lowered while reserved",
        wl([pod_set(count=1)]),
        old=wl([pod_set(count=3)]),
        reserved=True,
    ),
    # --- Topology: topology_types.go (CEL only; Kueue has no Topology webhook) ---------
    Case(
        "TP-1",
        "a level twice",
        topology("block", "rack", "block"),
        ("spec.levels: Invalid value: must be unique",),
        "cel",
    ),
    Case(
        "TP-2",
        "the hostname level not the lowest",
        topology(HOST, "rack"),
        (
            "spec.levels: Invalid value: the kubernetes.io/hostname label can only be used at "
            "the lowest level of topology",
        ),
        "cel",
    ),
    Case(
        "TP-3",
        "levels changed without the hostname level",
        topology("block", "rack"),
        (
            "spec.levels: Invalid value: levels are mutable only when kubernetes.io/hostname "
            "is the lowest level both before and after the change",
        ),
        "cel",
        old=topology("block"),
    ),
    Case(
        "TP-3b",
        "the hostname level dropped",
        topology("block", "rack"),
        (
            "spec.levels: Invalid value: levels are mutable only when kubernetes.io/hostname "
            "is the lowest level both before and after the change",
        ),
        "cel",
        old=topology("block", "rack", HOST),
    ),
    Case(
        "TP-4",
        "a node label that is not a label name",
        topology("Not A Label"),
        (
            'spec.levels[0].nodeLabel: Invalid value: "Not A Label": spec.levels[0].nodeLabel in body should match',
        ),
        "schema",
    ),
    Case("TP-OK1", "block, rack, hostname", topology("block", "rack", HOST)),
    Case(
        "TP-OK2",
        "a level added above the hostname level",
        topology("block", "rack", HOST),
        old=topology("rack", HOST),
    ),
]
