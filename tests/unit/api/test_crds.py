"""Generated CRDs (api/crdgen.py): committed YAML is current, schemas are structural,
and the API server's validation (approximated with jsonschema) accepts good objects and
rejects bad ones exactly where the models do."""

from __future__ import annotations

import functools
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml

from api import MODELS, load_object
from api.constants import Kind, Preemptibility, QueueingStrategy, StopPolicy
from api.crdgen import file_name, render_all
from api.quantities import QUANTITY_PATTERN
from api.validation import validate
from api.validation.quota import SAME_SIZE_MESSAGE
from api.validation.resourceflavor import TAINT_EFFECT_MESSAGE, TOLERATION_MESSAGES
from tests.unit.api.manifests import ALL, sample

CRD_DIR = Path(__file__).resolve().parents[3] / "config" / "crd" / "bases"
PRESERVE_UNKNOWN = "x-kubernetes-preserve-unknown-fields"


@functools.cache
def _crd(kind: str) -> dict[str, Any]:
    """The committed CRD (read once: the Workload's is large). Not to be modified."""
    text = (CRD_DIR / file_name(MODELS[Kind(kind)])).read_text(encoding="utf-8")
    crd: dict[str, Any] = yaml.load(text, Loader=getattr(yaml, "CSafeLoader", yaml.SafeLoader))
    return crd


def _version(kind: str) -> dict[str, Any]:
    (version,) = _crd(kind)["spec"]["versions"]
    return dict(version)


def _schema(kind: str) -> dict[str, Any]:
    return dict(_version(kind)["schema"]["openAPIV3Schema"])


def _as_json_schema(node: Any) -> Any:
    """OpenAPI v3 → JSON Schema: `nullable` becomes a `null` type; x-kubernetes-* are ignored
    by jsonschema (an int-or-string quantity already carries its anyOf integer/string); Go's
    `^(?i)` (a flag after the anchor, as Kueue writes a kind's pattern) is Python's `(?i)^`."""
    if isinstance(node, list):
        return [_as_json_schema(item) for item in node]
    if not isinstance(node, dict):
        return node
    out = {key: _as_json_schema(value) for key, value in node.items() if key != "nullable"}
    if node.get("nullable") and "type" in out:
        out["type"] = [out["type"], "null"]
    pattern = out.get("pattern")
    if isinstance(pattern, str) and pattern.startswith("^(?i)"):
        out["pattern"] = "(?i)^" + pattern.removeprefix("^(?i)")
    return out


def _errors(kind: str, obj: Mapping[str, Any]) -> list[str]:
    validator = jsonschema.Draft7Validator(_as_json_schema(_schema(kind)))
    return [
        "/".join(str(p) for p in error.absolute_path) + ": " + error.message
        for error in validator.iter_errors(obj)
    ]


def _nodes(node: Mapping[str, Any], path: str = "") -> Iterator[tuple[str, Mapping[str, Any]]]:
    yield path, node
    for name, child in node.get("properties", {}).items():
        yield from _nodes(child, f"{path}.{name}")
    for key in ("items", "additionalProperties"):
        if isinstance(node.get(key), Mapping):
            yield from _nodes(node[key], f"{path}[]")


# --- the committed files are what the generator writes now ------------------------------


def test_committed_crds_match_the_models() -> None:
    generated = render_all()
    committed = {path.name: path.read_text(encoding="utf-8") for path in CRD_DIR.glob("*.yaml")}
    assert sorted(committed) == sorted(generated), "run `make crds`"
    stale = [name for name, text in generated.items() if committed[name] != text]
    assert not stale, f"stale CRDs {stale}: run `make crds` (python -m api.crdgen config/crd/bases)"


def test_generation_is_deterministic() -> None:
    assert render_all() == render_all()


# --- shape of the CRDs ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "plural", "scope", "short_names", "has_status"),
    [
        ("ResourceFlavor", "resourceflavors", "Cluster", ["flavor", "flavors", "rf"], False),
        ("ClusterQueue", "clusterqueues", "Cluster", ["cq"], True),
        ("Cohort", "cohorts", "Cluster", ["co"], True),
        ("LocalQueue", "localqueues", "Namespaced", ["queue", "queues", "lq"], True),
        ("Workload", "workloads", "Namespaced", ["kwl", "kueueworkload", "kueueworkloads"], True),
        ("WorkloadPriorityClass", "workloadpriorityclasses", "Cluster", ["wpc"], False),
        ("Topology", "topologies", "Cluster", ["topo"], False),
    ],
)
def test_crd_names_scope_and_subresources(
    kind: str, plural: str, scope: str, short_names: list[str], has_status: bool
) -> None:
    crd = _crd(kind)
    assert crd["apiVersion"] == "apiextensions.k8s.io/v1"
    assert crd["kind"] == "CustomResourceDefinition"
    assert crd["metadata"]["name"] == f"{plural}.kueue.x-k8s.io"
    spec = crd["spec"]
    assert spec["group"] == "kueue.x-k8s.io"
    assert spec["scope"] == scope
    assert spec["names"] == {
        "kind": kind,
        "listKind": f"{kind}List",
        "plural": plural,
        "singular": kind.lower(),
        "shortNames": short_names,
    }
    version = _version(kind)
    assert (version["name"], version["served"], version["storage"]) == ("v1beta2", True, True)
    assert ("subresources" in version) is has_status
    if has_status:
        assert version["subresources"] == {"status": {}}


def _columns(kind: str, priority: int) -> list[tuple[str, str, str]]:
    return [
        (c["name"], c["jsonPath"].replace("'", '"'), c["type"])
        for c in _version(kind).get("additionalPrinterColumns", [])
        if c.get("priority", 0) == priority
    ]


# Kueue's printer columns (config/components/crd/bases in kubernetes-sigs/kueue), by
# priority: `kubectl get` shows priority 0, `-o wide` adds priority 1.
KUEUE_COLUMNS = {
    "Workload": (
        [
            ("Queue", ".spec.queueName", "string"),
            ("Reserved in", ".status.admission.clusterQueue", "string"),
            ("Admitted", '.status.conditions[?(@.type=="Admitted")].status', "string"),
            ("Finished", '.status.conditions[?(@.type=="Finished")].status', "string"),
            ("Age", ".metadata.creationTimestamp", "date"),
        ],
        [],
    ),
    "ClusterQueue": (
        [
            ("Cohort", ".spec.cohortName", "string"),
            ("Pending Workloads", ".status.pendingWorkloads", "integer"),
        ],
        [
            ("Strategy", ".spec.queueingStrategy", "string"),
            ("Admitted Workloads", ".status.admittedWorkloads", "integer"),
        ],
    ),
    "LocalQueue": (
        [
            ("ClusterQueue", ".spec.clusterQueue", "string"),
            ("Pending Workloads", ".status.pendingWorkloads", "integer"),
            ("Admitted Workloads", ".status.admittedWorkloads", "integer"),
        ],
        [],
    ),
    "WorkloadPriorityClass": ([("Value", ".value", "integer")], []),
    "ResourceFlavor": ([], []),
    "Cohort": ([], []),
}


@pytest.mark.parametrize("kind", sorted(KUEUE_COLUMNS))
def test_kubectl_get_shows_kueues_columns_and_ours_only_with_wide(kind: str) -> None:
    default, wide = KUEUE_COLUMNS[kind]
    assert _columns(kind, 0) == default
    assert _columns(kind, 1)[: len(wide)] == wide


def test_workload_wide_columns_are_quotagates_additions() -> None:
    assert _columns("Workload", 1) == [
        ("Priority", ".spec.priority", "integer"),
        ("Cost", ".status.preemptionCost", "string"),
        ("Preemptibility", ".status.resolvedPreemptibility.value", "string"),
    ]


@pytest.mark.parametrize("kind", sorted(ALL))
def test_schemas_are_structural(kind: str) -> None:
    """The API server's structural-schema rules that a generator can get wrong."""
    for path, node in _nodes(_schema(kind)):
        where = f"{kind}{path}"
        assert "$ref" not in node and "title" not in node and "allOf" not in node, where
        assert PRESERVE_UNKNOWN not in node, f"{where} keeps unknown fields"
        if node.get("x-kubernetes-int-or-string"):
            assert node["anyOf"] == [{"type": "integer"}, {"type": "string"}], where
            continue
        assert "anyOf" not in node, where
        assert node.get("type") in {"object", "array", "string", "integer", "number", "boolean"}, (
            where
        )
        assert not ("properties" in node and "additionalProperties" in node), where
        if node.get("type") == "array":
            assert "items" in node, where
        for bound in ("minimum", "maximum"):  # the API server refuses bounds beyond int32
            assert abs(node.get(bound, 0)) <= 2**31, f"{where}: {bound} {node[bound]}"
        if "default" in node:  # a default must validate against its own schema
            own = {key: value for key, value in node.items() if key != "default"}
            jsonschema.validate(node["default"], _as_json_schema(own))
        if node.get("x-kubernetes-list-type") == "map":
            item = node["items"]
            for key in node["x-kubernetes-list-map-keys"]:
                assert key in item.get("required", []) or "default" in item["properties"][key], (
                    f"{where}: list-map key {key} must be required or defaulted"
                )


def test_quantities_and_pod_templates() -> None:
    cq = _schema("ClusterQueue")["properties"]["spec"]["properties"]
    quota = cq["resourceGroups"]["items"]["properties"]["flavors"]["items"]["properties"][
        "resources"
    ]["items"]
    assert quota["required"] == ["name", "nominalQuota"]
    for field in ("nominalQuota", "borrowingLimit", "lendingLimit"):
        assert quota["properties"][field]["x-kubernetes-int-or-string"] is True
        # Signed, as Kueue's: a negative quota is the webhook's to refuse, with its message.
        assert quota["properties"][field]["pattern"] == QUANTITY_PATTERN
        assert "minimum" not in quota["properties"][field]
    wl = _schema("Workload")["properties"]
    pod_set = wl["spec"]["properties"]["podSets"]["items"]
    template = pod_set["properties"]["template"]
    pod = template["properties"]["spec"]["properties"]
    container = pod["containers"]["items"]["properties"]
    for resources in (container["resources"], pod["resources"]):
        assert resources["properties"]["requests"]["additionalProperties"]["pattern"] == (
            QUANTITY_PATTERN
        )
    assert set(template["properties"]["metadata"]["properties"]) == {
        "annotations",
        "finalizers",
        "labels",
        "name",
        "namespace",
    }
    assert pod["containers"]["x-kubernetes-list-map-keys"] == ["name"]
    assert {"nodeSelector", "tolerations", "priorityClassName", "initContainers"} <= set(pod)
    assert pod_set["properties"]["name"]["pattern"] == "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
    assert pod_set["properties"]["name"]["maxLength"] == 63
    assert pod_set["properties"]["count"]["minimum"] == 0
    assert pod_set["properties"]["minCount"]["minimum"] == 1
    assert wl["spec"]["properties"]["maximumExecutionTimeSeconds"]["minimum"] == 1
    assert wl["spec"]["properties"]["podSets"]["x-kubernetes-list-map-keys"] == ["name"]
    evictions = wl["status"]["properties"]["schedulingStats"]["properties"]["evictions"]
    assert evictions["x-kubernetes-list-map-keys"] == ["reason", "underlyingCause"]
    assert wl["status"]["properties"]["preemptionCost"]["x-kubernetes-int-or-string"] is True


def test_enums_come_from_the_constants() -> None:
    cq = _schema("ClusterQueue")["properties"]["spec"]["properties"]
    assert cq["queueingStrategy"]["enum"] == list(QueueingStrategy)
    assert cq["queueingStrategy"]["default"] == "BestEffortFIFO"
    assert cq["stopPolicy"]["enum"] == list(StopPolicy)
    wl = _schema("Workload")["properties"]
    assert wl["spec"]["properties"]["preemptibility"]["enum"] == list(Preemptibility)
    assert wl["spec"]["properties"]["disruptionMode"]["default"] == "PodGroup"


# --- the schema accepts good objects and rejects bad ones ---------------------------------


@pytest.mark.parametrize("kind", sorted(ALL))
def test_valid_samples_are_accepted(kind: str) -> None:
    assert _errors(kind, sample(kind)) == []
    # What the models write is accepted too.
    assert _errors(kind, load_object(sample(kind)).to_dict()) == []


def _set(manifest: dict[str, Any], path: tuple[Any, ...], value: Any) -> dict[str, Any]:
    target = manifest
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return manifest


NOMINAL = ("spec", "resourceGroups", 0, "flavors", 0, "resources", 0, "nominalQuota")
BAD = [
    ("ClusterQueue", NOMINAL, "lots"),
    ("ClusterQueue", ("spec", "queueingStrategy"), "Fastest"),
    ("ClusterQueue", ("spec", "preemption", "reclaimWithinCohort"), "Sometimes"),
    ("ClusterQueue", ("spec", "flavorFungibility", "whenCanBorrow"), "Borrow"),
    ("ClusterQueue", ("spec", "stopPolicy"), "Pause"),
    ("LocalQueue", ("spec", "stopPolicy"), "Pause"),
    ("LocalQueue", ("status", "fairSharing", "weightedShare"), "zero"),
    ("ClusterQueue", ("spec", "admissionScope", "admissionMode"), "Sometimes"),
    ("ClusterQueue", ("spec", "admissionScope"), {}),
    ("Workload", ("spec", "podSets", 0, "count"), -1),
    ("Workload", ("spec", "podSets", 0, "name"), "Main_Set"),
    ("Workload", ("spec", "podSets", 0, "minCount"), 0),
    ("Workload", ("spec", "maximumExecutionTimeSeconds"), 0),
    ("Workload", ("spec", "preemptibility"), "sometimes"),
    ("Workload", ("spec", "disruptionMode"), "Node"),
    ("Workload", ("status", "preemptionCost"), "abc"),
    ("Workload", ("status", "preemptionCost"), "-2"),
    ("Workload", ("status", "preemptionCost"), -2),
    ("Workload", ("status", "resolvedPreemptibility", "source"), "guess"),
    ("Workload", ("spec", "podSets"), []),
    ("WorkloadPriorityClass", ("value",), "high"),
    ("Cohort", ("spec", "parentName"), "Not_A_Name"),
    ("Cohort", ("spec", "resourceGroups", 0, "coveredResources"), []),
]

# Accepted by the schema, as by Kueue's, and refused by the webhook's rules (Kueue's message)
# and by the models (what `quotagate plan` reads).
REFUSED_BY_RULES = [
    ("ClusterQueue", NOMINAL, "-1"),
    ("ClusterQueue", NOMINAL, -1),
    ("LocalQueue", ("spec", "fairSharing", "weight"), "-1"),
    ("Cohort", ("spec", "resourceGroups", 0, "flavors", 0, "resources", 1, "borrowingLimit"), -1),
    ("Cohort", ("spec", "fairSharing", "weight"), "-1"),
]


@pytest.mark.parametrize(("kind", "path", "value"), REFUSED_BY_RULES)
def test_negative_quota_is_refused_by_the_rules_not_the_schema(
    kind: str, path: tuple[Any, ...], value: Any
) -> None:
    manifest = _set(sample(kind), path, value)
    assert _errors(kind, manifest) == []
    with pytest.raises(ValueError):
        load_object(manifest)
    if kind != "LocalQueue":  # a LocalQueue's weight is Kueue's schema only: no webhook
        assert any(
            error.detail == "must be greater than or equal to 0" for error in validate(manifest)
        )


@pytest.mark.parametrize(("kind", "path", "value"), BAD)
def test_bad_values_are_rejected_by_schema_and_model(
    kind: str, path: tuple[Any, ...], value: Any
) -> None:
    manifest = _set(sample(kind), path, value)
    assert _errors(kind, manifest), f"schema accepted {path}={value!r}"
    with pytest.raises(ValueError):
        load_object(manifest)


@pytest.mark.parametrize(
    ("kind", "path", "value"),
    [
        ("ClusterQueue", NOMINAL, 0),
        ("ClusterQueue", NOMINAL, "1.5Gi"),
        ("ClusterQueue", NOMINAL, "2e3"),
        ("Workload", ("status", "preemptionCost"), 5),
        ("Workload", ("status", "preemptionCost"), "1500m"),
        ("Workload", ("spec", "podSets", 0, "count"), 1),
        ("Workload", ("spec", "podSets", 0, "count"), 0),
        ("Workload", ("spec", "priority"), -5),
    ],
)
def test_good_values_are_accepted_by_schema_and_model(
    kind: str, path: tuple[Any, ...], value: Any
) -> None:
    manifest = _set(sample(kind), path, value)
    assert _errors(kind, manifest) == []
    load_object(manifest)


# Kueue's CRD rules (apis/kueue/v1beta2/*_types.go), by the node that carries them.
KUEUE_RULES = {
    "ResourceFlavor": {
        ".spec": [
            "at least one nodeLabel is required when topology is set",
            "topologyName is immutable when topologyName is set",
        ],
        ".spec.nodeTaints": [TAINT_EFFECT_MESSAGE],
        ".spec.tolerations": list(TOLERATION_MESSAGES),
    },
    "ClusterQueue": {
        ".spec": ["borrowingLimit must be nil when cohort is empty"],
        ".spec.flavorFungibility": [
            "preference can only be set when both whenCanBorrow and whenCanPreempt are "
            "TryNextFlavor"
        ],
        ".spec.preemption": ["reclaimWithinCohort=Never and borrowWithinCohort.Policy!=Never"],
        ".spec.resourceGroups[]": [SAME_SIZE_MESSAGE],
    },
    "Cohort": {".spec.resourceGroups[]": [SAME_SIZE_MESSAGE]},
    "LocalQueue": {".spec.clusterQueue": ["field is immutable"]},
    "Workload": {
        "": [
            "podSetAssignments must have the same number of podSets as the spec",
            "priorityClassRef is immutable while workload quota reserved",
            "priorityClassRef.group is immutable while workload quota reserved",
            "priorityClassRef.kind is immutable while workload quota reserved",
            "priorityClassRef.name is immutable for scheduling.k8s.io/priorityclass while "
            "workload quota reserved",
            "queueName is immutable while workload quota reserved",
            "maximumExecutionTimeSeconds is immutable while workload quota reserved",
        ],
        ".spec": ["priority should not be nil when priorityClassRef is set"],
        ".spec.podSets[]": ["minCount should be positive and less or equal to count"],
        ".spec.priorityClassRef": [
            "only the PriorityClass kind is allowed for the scheduling.k8s.io group",
            "only the WorkloadPriorityClass kind is allowed for the kueue.x-k8s.io group",
        ],
        ".status": [
            "clusterName is immutable once set",
            "clusterName and nominatedClusterNames are mutually exclusive",
        ],
        ".status.admission.podSetAssignments[].topologyAssignment": [
            "valuesPerLevel must have the same length as the number of levels in this "
            "TopologyAssignment"
        ],
        ".status.admission.podSetAssignments[].topologyAssignment.slices[]": [
            "podCounts.individual must have length equal to domainCount",
            "valuesPerLevel.individual, if set, must have roots of length equal to domainCount "
            "of this TopologyAssignmentSlice",
        ],
        ".status.admission.podSetAssignments[].topologyAssignment.slices[].podCounts": [
            "exactly one of the fields in [universal individual] must be set"
        ],
        ".status.admission.podSetAssignments[].topologyAssignment.slices[].valuesPerLevel[]": [
            "exactly one of the fields in [universal individual] must be set"
        ],
        ".status.admissionChecks[].podSetUpdates[].tolerations": list(TOLERATION_MESSAGES),
    },
    "WorkloadPriorityClass": {},
}


@pytest.mark.parametrize("kind", sorted(KUEUE_RULES))
def test_crds_carry_kueues_rules_with_its_messages(kind: str) -> None:
    found = {
        path: [rule["message"] for rule in node["x-kubernetes-validations"]]
        for path, node in _nodes(_schema(kind))
        if "x-kubernetes-validations" in node
    }
    assert found == KUEUE_RULES[kind]


def test_every_kueue_rule_is_counted() -> None:
    """The CRD rules docs/validation.md counts: 37 in Kueue's v1beta2 CRDs of these kinds
    (the five toleration rules appear twice: ResourceFlavor, admission-check updates)."""
    total = sum(len(messages) for rules in KUEUE_RULES.values() for messages in rules.values())
    assert total == 37
