"""The topology annotations of pod templates, checked as Kueue's job webhooks check them
(api/validation/tas_annotations.py, `jobframework.ValidateTASPodSetRequest` and its
neighbours in Kueue), and the webhook refusing each integration's object with the field
path of the template that carries them."""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from api.constants import (
    POD_SET_GROUP_NAME_ANNOTATION as GROUP,
)
from api.constants import (
    POD_SET_PREFERRED_TOPOLOGY_ANNOTATION as PREFERRED,
)
from api.constants import (
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION as REQUIRED,
)
from api.constants import (
    POD_SET_SLICE_REQUIRED_TOPOLOGY_ANNOTATION as SLICE,
)
from api.constants import (
    POD_SET_SLICE_REQUIRED_TOPOLOGY_CONSTRAINTS_ANNOTATION as LAYERS,
)
from api.constants import (
    POD_SET_SLICE_SIZE_ANNOTATION as SIZE,
)
from api.constants import (
    POD_SET_UNCONSTRAINED_TOPOLOGY_ANNOTATION as UNCONSTRAINED,
)
from api.constants import QUEUE_NAME_LABEL
from api.validation.field_errors import Path, aggregate
from api.validation.tas_annotations import (
    TemplateTopology,
    parse_int32,
    validate_pod_set_grouping,
    validate_slice_size_upper_bound,
    validate_tas_pod_set_request,
)
from controller.integrations.framework.generic_job import TopologyHints
from controller.integrations.framework.workloads import topology_request
from controller.integrations.webhook import review_response

META = Path("spec.template.metadata")
A = "spec.template.metadata.annotations"
BLOCK, RACK = "cloud.com/block", "cloud.com/rack"


def messages(annotations: dict[str, str], multi_layer: bool = True) -> list[str]:
    return [str(e) for e in validate_tas_pod_set_request(META, annotations, multi_layer)]


def test_good_annotations_pass() -> None:
    assert messages({}) == []
    assert messages({REQUIRED: BLOCK}) == []
    assert messages({PREFERRED: BLOCK, SLICE: RACK, SIZE: "2"}) == []
    assert messages({UNCONSTRAINED: "True"}) == []
    assert messages({REQUIRED: BLOCK, GROUP: "g"}) == []
    assert (
        messages(
            {LAYERS: json.dumps([{"topology": BLOCK, "size": 8}, {"topology": RACK, "size": 4}])}
        )
        == []
    )


def test_two_levels_are_refused_at_the_annotations() -> None:
    assert messages({REQUIRED: BLOCK, PREFERRED: RACK}) == [
        f"{A}: Invalid value: must not contain more than one topology annotation: "
        f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"]'
    ]
    assert len(messages({REQUIRED: BLOCK, UNCONSTRAINED: "true"})) == 1


def test_a_level_must_be_a_label_name() -> None:
    (error,) = messages({REQUIRED: "not a label"})
    assert error.startswith(
        f'{A}[{REQUIRED}]: Invalid value: "not a label": name part must consist of'
    )


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        (
            {UNCONSTRAINED: "yes"},
            f'{A}[{UNCONSTRAINED}]: Invalid value: "yes": must be a boolean value',
        ),
        ({SLICE: RACK, SIZE: "two"}, f'{A}[{SIZE}]: Invalid value: "two": must be a numeric value'),
        ({SLICE: RACK, SIZE: " 2"}, f'{A}[{SIZE}]: Invalid value: " 2": must be a numeric value'),
        (
            {SLICE: RACK, SIZE: "2147483648"},
            f'{A}[{SIZE}]: Invalid value: "2147483648": must be a numeric value',
        ),
        (
            {SLICE: RACK, SIZE: "0"},
            f'{A}[{SIZE}]: Invalid value: "0": must be greater than or equal to 1',
        ),
        ({SLICE: RACK}, f"{A}[{SIZE}]: Required value: must be set when '{SLICE}' is specified"),
        ({SIZE: "2"}, f"{A}[{SIZE}]: Forbidden: may not be set when '{SLICE}' is not specified"),
        ({REQUIRED: BLOCK, GROUP: "7"}, f'{A}[{GROUP}]: Invalid value: "7": must not be a number'),
        (
            {GROUP: "g"},
            f"{A}[{GROUP}]: Forbidden: may not be set when neither '{PREFERRED}' nor '{REQUIRED}' is specified",
        ),
    ],
)
def test_one_bad_annotation_one_error(annotations: dict[str, str], expected: str) -> None:
    assert messages(annotations) == [expected]


def test_a_group_is_not_sliced() -> None:
    assert messages({REQUIRED: BLOCK, GROUP: "g", SLICE: RACK, SIZE: "2"}) == [
        f"{A}[{GROUP}]: Forbidden: may not be set when '{SIZE}' is specified",
        f"{A}[{GROUP}]: Forbidden: may not be set when '{SLICE}' is specified",
    ]


def test_the_layers_annotation() -> None:
    L = f"{A}[{LAYERS}]"
    assert messages({LAYERS: "[]"}, multi_layer=False) == [
        f"{L}: Forbidden: the TASMultiLayerTopology feature gate must be enabled to use this annotation"
    ]
    assert messages({LAYERS: "[]"}) == [
        f'{L}: Invalid value: "[]": topology constraints must contain between 1 and 3 entries'
    ]
    (bad_json,) = messages({LAYERS: "{"})
    assert bad_json.startswith(f'{L}: Invalid value: "{{": must be a valid JSON array: ')
    layers = [
        {"topology": BLOCK, "size": 6},
        {"topology": BLOCK, "size": 4},
        {"topology": "x y", "size": 0},
    ]
    assert messages({LAYERS: json.dumps(layers), SIZE: "2", GROUP: "g", PREFERRED: BLOCK}) == [
        f"{A}[{GROUP}]: Forbidden: may not be set when '{SIZE}' is specified",
        f"{A}[{SIZE}]: Forbidden: may not be set when '{SLICE}' is not specified",
        f"{L}: Forbidden: may not be set when '{SIZE}' is specified",
        f"{A}[{GROUP}]: Forbidden: may not be set when '{LAYERS}' is specified",
        f'{L}[2].topology: Invalid value: "x y": name part must consist of alphanumeric characters, '
        "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or "
        "'my.name',  or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
        f"{L}[2].size: Invalid value: 0: must be greater than or equal to 1",
        f'{L}[1].topology: Duplicate value: "{BLOCK} (also at index 0)"',
        f"{L}[1].size: Invalid value: 4: must evenly divide the parent layer size 6",
    ]


def test_the_slice_is_no_larger_than_the_pod_set() -> None:
    assert validate_slice_size_upper_bound(META, {SLICE: RACK, SIZE: "4"}, 4) == []
    (error,) = validate_slice_size_upper_bound(META, {SLICE: RACK, SIZE: "5"}, 4)
    assert (
        str(error) == f'{A}[{SIZE}]: Invalid value: "5": must not be greater than pod set count 4'
    )
    (error,) = validate_slice_size_upper_bound(META, {LAYERS: '[{"topology": "r", "size": 5}]'}, 4)
    assert (
        str(error) == f"{A}[{LAYERS}]: Invalid value: 5: must not be greater than pod set count 4"
    )


def test_a_group_is_two_pod_sets_one_of_one_pod_at_one_level() -> None:
    def t(i: int, count: int, **annotations: str) -> TemplateTopology:
        return TemplateTopology(Path(f"p{i}"), {GROUP: "g", **annotations}, count)

    assert (
        validate_pod_set_grouping([t(0, 1, **{REQUIRED: BLOCK}), t(1, 4, **{REQUIRED: BLOCK})])
        == []
    )
    (error,) = validate_pod_set_grouping([t(0, 1, **{REQUIRED: BLOCK})])
    assert str(error) == (
        f'p0.annotations[{GROUP}]: Invalid value: "g": can only define groups of exactly 2 pod sets, '
        "got: 1 pod set(s)"
    )
    errors = validate_pod_set_grouping(
        [t(0, 2, **{REQUIRED: BLOCK}), t(1, 3, **{PREFERRED: BLOCK})]
    )
    assert [str(e) for e in errors] == [
        f'p0.annotations[{GROUP}]: Invalid value: "g": can only define groups where at least one pod '
        "set has only 1 replica, got: 2 replica(s) and 3 replica(s) in the group",
        f'p1.annotations[{GROUP}]: Invalid value: "g": can only define groups where at least one pod '
        "set has only 1 replica, got: 2 replica(s) and 3 replica(s) in the group",
        f"p0.annotations: Invalid value: must specify '{REQUIRED}' or '{PREFERRED}' topology "
        "consistent with 'p1.annotations' in group 'g'",
        f"p1.annotations: Invalid value: must specify '{REQUIRED}' or '{PREFERRED}' topology "
        "consistent with 'p0.annotations' in group 'g'",
    ]


def test_parse_int32_is_gos() -> None:
    assert [parse_int32(t) for t in ("7", "+7", "-7", "007", "1_0", "7 ", "", "2147483647")] == [
        7,
        7,
        -7,
        7,
        None,
        None,
        None,
        2**31 - 1,
    ]


LEVELS = st.sampled_from([BLOCK, RACK, "kubernetes.io/hostname", "not a label", ""])
TEXT = st.sampled_from(["+2", "1", "2", "0", "-1", "x", "true", "false", "T", "yes", "g", "12"])


@given(
    st.dictionaries(
        st.sampled_from([REQUIRED, PREFERRED, UNCONSTRAINED, SLICE, SIZE, GROUP]),
        st.one_of(LEVELS, TEXT),
        max_size=6,
    )
)
def test_accepted_annotations_give_exactly_the_asked_request(annotations: dict[str, str]) -> None:
    """Any annotation set the check accepts gives a `topologyRequest` with exactly the
    level asked, the slice asked and the group asked: nothing dropped, nothing chosen."""
    if validate_tas_pod_set_request(META, annotations):
        return
    request = topology_request(annotations, TopologyHints()) or {}
    for key, field in ((REQUIRED, "required"), (PREFERRED, "preferred")):
        assert request.get(field) == annotations.get(key)
    if UNCONSTRAINED in annotations:
        assert request["unconstrained"] == (
            annotations[UNCONSTRAINED] in ("1", "t", "T", "TRUE", "true", "True")
        )
    assert request.get("podSetSliceRequiredTopology") == annotations.get(SLICE)
    assert request.get("podSetSliceSize") == (
        int(annotations[SIZE]) if SIZE in annotations else None
    )
    assert request.get("podSetGroupName") == annotations.get(GROUP)


# -- the webhook, one object per integration ---------------------------------------------------


def template(annotations: dict[str, str]) -> dict[str, Any]:
    return {"metadata": {"annotations": annotations}, "spec": {"containers": [{"name": "c"}]}}


def queued(spec: dict[str, Any], meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {
        "metadata": {
            "name": "o",
            "namespace": "ns",
            "labels": {QUEUE_NAME_LABEL: "lq"},
            **(meta or {}),
        },
        "spec": spec,
    }


def refusal(group: str, kind: str, obj: dict[str, Any]) -> str | None:
    request = {
        "uid": "u",
        "kind": {"group": group, "kind": kind},
        "operation": "CREATE",
        "object": obj,
    }
    response = review_response({"request": request})["response"]
    if response["allowed"]:
        return None
    assert response["status"]["code"] == 422
    return str(response["status"]["message"])


BOTH = {REQUIRED: BLOCK, PREFERRED: RACK}
TWO_LEVELS = (
    "Invalid value: must not contain more than one topology annotation: "
    f'["{REQUIRED}", "{PREFERRED}", "{UNCONSTRAINED}"]'
)

CASES = [
    ("batch", "Job", queued({"template": template(BOTH)}), "spec.template.metadata.annotations"),
    (
        "",
        "Pod",
        {**queued({"containers": []}), "metadata": {**queued({})["metadata"], "annotations": BOTH}},
        "metadata.annotations",
    ),
    (
        "jobset.x-k8s.io",
        "JobSet",
        queued(
            {
                "replicatedJobs": [
                    {"name": "a", "template": {"spec": {"template": template({})}}},
                    {"name": "b", "template": {"spec": {"template": template(BOTH)}}},
                ]
            }
        ),
        "spec.replicatedJobs[1].template.spec.template.metadata.annotations",
    ),
    (
        "kubeflow.org",
        "MPIJob",
        queued(
            {
                "mpiReplicaSpecs": {
                    "Launcher": {"replicas": 1, "template": template({})},
                    "Worker": {"replicas": 2, "template": template(BOTH)},
                }
            }
        ),
        "spec.mpiReplicaSpecs[Worker].template.metadata.annotations",
    ),
    (
        "ray.io",
        "RayCluster",
        queued(
            {
                "headGroupSpec": {"template": template({})},
                "workerGroupSpecs": [{"groupName": "w", "replicas": 1, "template": template(BOTH)}],
            }
        ),
        "spec.workerGroupSpecs[0].template.metadata.annotations",
    ),
    (
        "ray.io",
        "RayJob",
        queued(
            {
                "entrypoint": "python x.py",
                "rayClusterSpec": {
                    "headGroupSpec": {"template": template(BOTH)},
                    "workerGroupSpecs": [],
                },
            }
        ),
        "spec.rayClusterSpec.headGroupSpec.template.metadata.annotations",
    ),
    (
        "leaderworkerset.x-k8s.io",
        "LeaderWorkerSet",
        queued(
            {
                "leaderWorkerTemplate": {
                    "size": 3,
                    "leaderTemplate": template({}),
                    "workerTemplate": template(BOTH),
                }
            }
        ),
        "spec.leaderWorkerTemplate.workerTemplate.metadata.annotations",
    ),
]


@pytest.mark.parametrize(("group", "kind", "obj", "path"), CASES, ids=[c[1] for c in CASES])
def test_the_webhook_refuses_two_levels_naming_the_template(
    group: str, kind: str, obj: dict[str, Any], path: str
) -> None:
    message = refusal(group, kind, obj)
    assert message is not None and f"{path}: {TWO_LEVELS}" in message


def test_the_webhook_refuses_a_slice_larger_than_the_job() -> None:
    job = queued(
        {"parallelism": 2, "completions": 2, "template": template({SLICE: RACK, SIZE: "3"})}
    )
    assert refusal("batch", "Job", job) == (
        f'{A}[{SIZE}]: Invalid value: "3": must not be greater than pod set count 2'
    )


def test_the_webhook_checks_groups_across_a_jobsets_pod_sets() -> None:
    def replicated_job(name: str) -> dict[str, Any]:
        job = {
            "parallelism": 2,
            "completions": 2,
            "template": template({REQUIRED: BLOCK, GROUP: "g"}),
        }
        return {"name": name, "replicas": 1, "template": {"spec": job}}

    jobset = queued({"replicatedJobs": [replicated_job("a"), replicated_job("b")]})
    message = refusal("jobset.x-k8s.io", "JobSet", jobset)
    assert message is not None and "at least one pod set has only 1 replica" in message
    assert "spec.replicatedJobs[1].template.spec.template.metadata.annotations[" in message


def test_a_good_job_is_still_suspended_and_an_unqueued_one_untouched() -> None:
    assert refusal("batch", "Job", queued({"template": template({REQUIRED: BLOCK})})) is None
    unqueued = {"metadata": {"name": "o", "namespace": "ns"}, "spec": {"template": template(BOTH)}}
    assert refusal("batch", "Job", unqueued) is None


def test_several_errors_aggregate_as_kueues() -> None:
    errors = validate_tas_pod_set_request(META, {**BOTH, UNCONSTRAINED: "maybe"})
    assert aggregate(errors).startswith("[") and len(errors) == 2


def test_a_leaderworkerset_update_is_checked_too() -> None:
    """Kueue's LeaderWorkerSet webhook runs its create checks on updates."""
    good = queued({"leaderWorkerTemplate": {"size": 2, "workerTemplate": template({})}})
    bad = queued({"leaderWorkerTemplate": {"size": 2, "workerTemplate": template({SIZE: "1"})}})
    request = {
        "uid": "u",
        "kind": {"group": "leaderworkerset.x-k8s.io", "kind": "LeaderWorkerSet"},
        "operation": "UPDATE",
        "object": bad,
        "oldObject": good,
    }
    response = review_response({"request": request})["response"]
    assert response["allowed"] is False
    assert response["status"]["message"] == (
        f"spec.leaderWorkerTemplate.workerTemplate.metadata.annotations[{SIZE}]: Forbidden: may "
        f"not be set when '{SLICE}' is not specified"
    )


def test_a_jobs_slice_bound_is_checked_only_when_its_request_is_valid() -> None:
    """Kueue's Job webhook returns the request's errors alone; a JobSet's lists both."""
    annotations = {SIZE: "5"}  # no slice level, and more than the pod count
    job = queued({"parallelism": 2, "completions": 2, "template": template(annotations)})
    assert refusal("batch", "Job", job) == (
        f"{A}[{SIZE}]: Forbidden: may not be set when '{SLICE}' is not specified"
    )
    rj = {"name": "a", "template": {"spec": {"template": template(annotations)}}}
    message = refusal("jobset.x-k8s.io", "JobSet", queued({"replicatedJobs": [rj]}))
    assert message is not None and "must not be greater than pod set count 1" in message
