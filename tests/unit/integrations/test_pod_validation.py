"""Kueue's pod webhook rules (controller/integrations/pod_validation.py) and the name checks
of `jobframework.ValidateJobOnCreate` (job_names.py), alone and through the webhook, as
`pod_webhook.go` (`validateCommon`, `ValidateCreate`, `ValidateUpdate`) and
`jobframework/validation.go` refuse them."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from api.constants import (
    ADMISSION_GATE,
    ELASTIC_JOB_ANNOTATION,
    MANAGED_LABEL,
    MAX_EXEC_TIME_LABEL,
    POD_GROUP_NAME_ANNOTATION,
    POD_GROUP_NAME_LABEL,
    POD_GROUP_TOTAL_COUNT_ANNOTATION,
    POD_SET_PREFERRED_TOPOLOGY_ANNOTATION,
    POD_SET_REQUIRED_TOPOLOGY_ANNOTATION,
    PREBUILT_WORKLOAD_LABEL,
    QUEUE_NAME_LABEL,
    RETRIABLE_IN_GROUP_ANNOTATION,
)
from controller.integrations.job_names import prebuilt_workload_name_problems, queue_name_problems
from controller.integrations.pod_validation import (
    go_atoi,
    group_name,
    pod_common_problems,
    pod_group_problems,
    pod_update_problems,
)
from controller.integrations.webhook import review_response

DNS = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' "
    "or '.', and must start and end with an alphanumeric character (e.g. 'example.com', "
    "regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*"
    "[a-z0-9])?)*')"
)
COUNT = f"metadata.annotations[{POD_GROUP_TOTAL_COUNT_ANNOTATION}]"
NAME_LABEL = f"metadata.labels[{POD_GROUP_NAME_LABEL}]"
NAME_ANNOTATION = f"metadata.annotations[{POD_GROUP_NAME_ANNOTATION}]"
BOTH_LABEL = (
    f"both the '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the "
    f"'{POD_GROUP_NAME_LABEL}' label should be set"
)
BOTH_ANNOTATION = (
    f"both the '{POD_GROUP_TOTAL_COUNT_ANNOTATION}' annotation and the "
    f"'{POD_GROUP_NAME_ANNOTATION}' annotation should be set"
)


def pod(
    labels: dict[str, str] | None = None, annotations: dict[str, str] | None = None
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "p",
            "namespace": "ns",
            "labels": {QUEUE_NAME_LABEL: "lq", **(labels or {})},
            "annotations": dict(annotations or {}),
        },
        "spec": {"containers": [], "schedulingGates": [{"name": ADMISSION_GATE}]},
    }


def grouped(name: str = "g", count: str = "2", **more: str) -> dict[str, Any]:
    return pod({POD_GROUP_NAME_LABEL: name}, {POD_GROUP_TOTAL_COUNT_ANNOTATION: count, **more})


def refusal(kind: str, new: dict[str, Any], old: dict[str, Any] | None = None) -> str | None:
    """The webhook's refusal of the pod's creation (or update from `old`); None: allowed."""
    request = {
        "uid": "u",
        "kind": {"kind": kind},
        "operation": "CREATE" if old is None else "UPDATE",
        "namespace": "ns",
        "object": new,
        **({"oldObject": old} if old is not None else {}),
    }
    response = review_response({"request": request})["response"]
    if response["allowed"]:
        return None
    assert response["status"]["code"] == 422
    message: str = response["status"]["message"]
    return message


def changed(obj: dict[str, Any], change: Callable[[dict[str, Any]], Any]) -> dict[str, Any]:
    out = copy.deepcopy(obj)
    change(out)
    return out


# -- Go's strconv.Atoi -------------------------------------------------------------------


@given(st.integers(min_value=-(2**63), max_value=2**63 - 1))
def test_atoi_reads_every_64_bit_integer(value: int) -> None:
    assert go_atoi(str(value)) == (value, None)
    if value >= 0:
        assert go_atoi(f"+{value}") == (value, None)


@given(st.integers(min_value=2**63, max_value=2**70))
def test_atoi_is_out_of_range_past_64_bits(value: int) -> None:
    assert go_atoi(str(value)) == (
        None,
        f'strconv.Atoi: parsing "{value}": value out of range',
    )


def test_atoi_edges_and_syntax() -> None:
    assert go_atoi("-9223372036854775808") == (-(2**63), None)
    for text in ("", "+", "-", "1.0", " 1", "1_000", "0x10", "abc", "١"):
        assert go_atoi(text) == (None, f'strconv.Atoi: parsing "{text}": invalid syntax'), text
    # out of range is found while reading, before a later bad character
    assert go_atoi("99999999999999999999x")[1] == (
        'strconv.Atoi: parsing "99999999999999999999x": value out of range'
    )


@given(st.text(max_size=25))
def test_atoi_agrees_with_python_on_plain_decimal_text(text: str) -> None:
    value, error = go_atoi(text)
    plain = text.lstrip("+-") if text[:1] in "+-" and len(text) > 0 else text
    is_decimal = bool(plain) and all("0" <= c <= "9" for c in plain) and len(text) - len(plain) <= 1
    if is_decimal and -(2**63) <= int(text) < 2**63:
        assert (value, error) == (int(text), None)
    else:
        assert value is None and error is not None


# -- validatePodGroupMetadata ------------------------------------------------------------


def test_a_pod_of_no_group_and_a_complete_group_pass() -> None:
    assert pod_group_problems(pod()) == []
    assert pod_group_problems(grouped()) == []
    assert pod_group_problems(grouped(count="+3")) == []


def test_a_group_name_without_a_total_count_is_refused() -> None:
    assert pod_group_problems(pod({POD_GROUP_NAME_LABEL: "g"})) == [
        f"{COUNT}: Required value: {BOTH_LABEL}"
    ]
    named = pod(annotations={POD_GROUP_NAME_ANNOTATION: "g"})
    assert pod_group_problems(named) == [f"{COUNT}: Required value: {BOTH_ANNOTATION}"]


def test_a_total_count_without_a_group_name_is_refused() -> None:
    assert pod_group_problems(pod(annotations={POD_GROUP_TOTAL_COUNT_ANNOTATION: "2"})) == [
        f"{NAME_LABEL}: Required value: {BOTH_LABEL}"
    ]
    # an empty label is no group name either
    empty = pod({POD_GROUP_NAME_LABEL: ""}, {POD_GROUP_TOTAL_COUNT_ANNOTATION: "x"})
    assert pod_group_problems(empty) == [f"{NAME_LABEL}: Required value: {BOTH_LABEL}"]


def test_a_total_count_must_be_a_positive_integer() -> None:
    assert pod_group_problems(grouped(count="0")) == [
        f'{COUNT}: Invalid value: "0": incorrect annotation value '
        f"'{POD_GROUP_TOTAL_COUNT_ANNOTATION}=0': group total count should be greater than zero"
    ]
    assert pod_group_problems(grouped(count="-1"))[0].endswith(
        "group total count should be greater than zero"
    )
    assert pod_group_problems(grouped(count="two")) == [
        f'{COUNT}: Invalid value: "two": strconv.Atoi: parsing "two": invalid syntax'
    ]


@given(st.integers(min_value=1, max_value=2**63 - 1))
def test_every_positive_count_passes(count: int) -> None:
    assert pod_group_problems(grouped(count=str(count))) == []


def test_the_group_name_must_be_an_object_name() -> None:
    assert pod_group_problems(grouped(name="Bad_Name", count="0")) == [
        f'{NAME_LABEL}: Invalid value: "Bad_Name": {DNS}',
        f'{COUNT}: Invalid value: "0": incorrect annotation value '
        f"'{POD_GROUP_TOTAL_COUNT_ANNOTATION}=0': group total count should be greater than zero",
    ]
    long_name = "a" * 254
    assert pod_group_problems(grouped(name=long_name)) == [
        f'{NAME_LABEL}: Invalid value: "{long_name}": must be no more than 253 characters'
    ]


def test_the_annotation_names_the_group_when_set() -> None:
    both = pod(
        {POD_GROUP_NAME_LABEL: "label-name"},
        {POD_GROUP_NAME_ANNOTATION: "Annotated", POD_GROUP_TOTAL_COUNT_ANNOTATION: "1"},
    )
    assert group_name(both) == "Annotated"
    assert pod_group_problems(both) == [f'{NAME_ANNOTATION}: Invalid value: "Annotated": {DNS}']


# -- validateCommon ----------------------------------------------------------------------


def test_the_managed_label_may_only_be_true() -> None:
    assert pod_common_problems(pod({MANAGED_LABEL: "true"})) == []
    assert pod_common_problems(pod({MANAGED_LABEL: "false"})) == [
        f"metadata.labels[{MANAGED_LABEL}]: Forbidden: managed label value can only be 'true'"
    ]


def test_a_prebuilt_workload_of_a_group_pod_is_the_group() -> None:
    assert pod_common_problems(grouped(**{PREBUILT_WORKLOAD_LABEL: "g"})) == []
    assert pod_common_problems(pod({PREBUILT_WORKLOAD_LABEL: "w"})) == []
    labelled = grouped()
    labelled["metadata"]["labels"][PREBUILT_WORKLOAD_LABEL] = "w"
    assert pod_common_problems(labelled) == [
        f'metadata.labels[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "w": prebuilt workload '
        "and pod group should be equal"
    ]
    assert pod_common_problems(grouped(**{PREBUILT_WORKLOAD_LABEL: "w"})) == [
        f'metadata.annotations[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "w": prebuilt '
        "workload and pod group should be equal"
    ]


def test_common_problems_come_in_kueues_order() -> None:
    bad = grouped(
        count="0",
        **{
            PREBUILT_WORKLOAD_LABEL: "w",
            POD_SET_REQUIRED_TOPOLOGY_ANNOTATION: "rack",
            POD_SET_PREFERRED_TOPOLOGY_ANNOTATION: "block",
        },
    )
    bad["metadata"]["labels"][MANAGED_LABEL] = "no"
    problems = pod_common_problems(bad)
    assert [p.split(":")[0] for p in problems] == [
        f"metadata.labels[{MANAGED_LABEL}]",
        COUNT,
        "metadata.annotations",
        f"metadata.annotations[{PREBUILT_WORKLOAD_LABEL}]",
    ]


# -- update rules ------------------------------------------------------------------------


def test_an_unretriable_group_stays_unretriable() -> None:
    old = grouped(**{RETRIABLE_IN_GROUP_ANNOTATION: "false"})
    assert pod_update_problems(old, old) == []
    for value in ("true", None):
        new = changed(
            old,
            lambda p, v=value: (
                p["metadata"]["annotations"].update({RETRIABLE_IN_GROUP_ANNOTATION: v})
                if v
                else p["metadata"]["annotations"].pop(RETRIABLE_IN_GROUP_ANNOTATION)
            ),
        )
        assert pod_update_problems(old, new) == [
            f"metadata.annotations[{RETRIABLE_IN_GROUP_ANNOTATION}]: Forbidden: unretriable "
            "pod group can't be converted to retriable"
        ]
    # a retriable group may become unretriable; a pod of no group is not held to it
    assert pod_update_problems(grouped(), old) == []
    lone = pod(annotations={RETRIABLE_IN_GROUP_ANNOTATION: "false"})
    assert pod_update_problems(lone, pod()) == []


def test_the_group_name_is_immutable_once_set() -> None:
    assert pod_update_problems(grouped(), grouped(name="h")) == [
        f'{NAME_LABEL}: Invalid value: "h": field is immutable'
    ]
    assert pod_update_problems(grouped(), pod()) == [
        f'{NAME_LABEL}: Invalid value: "": field is immutable'
    ]
    assert pod_update_problems(pod(), grouped()) == []  # set for the first time


# -- ValidateJobOnCreate's names -----------------------------------------------------------


def test_queue_and_prebuilt_names_must_be_object_names() -> None:
    assert queue_name_problems(pod()) == []
    assert queue_name_problems(pod({QUEUE_NAME_LABEL: "Team_A"})) == [
        f'metadata.labels[{QUEUE_NAME_LABEL}]: Invalid value: "Team_A": {DNS}'
    ]
    assert prebuilt_workload_name_problems(pod({PREBUILT_WORKLOAD_LABEL: "w.1"})) == []
    assert prebuilt_workload_name_problems(pod({PREBUILT_WORKLOAD_LABEL: ""})) == [
        f'metadata.labels[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "": {DNS}'
    ]
    annotated = pod({PREBUILT_WORKLOAD_LABEL: "BAD"}, {PREBUILT_WORKLOAD_LABEL: "W"})
    assert prebuilt_workload_name_problems(annotated) == [
        f'metadata.annotations[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "W": {DNS}'
    ]


@given(st.from_regex(r"[a-z0-9]([-a-z0-9]{0,20}[a-z0-9])?(\.[a-z0-9]{1,5}){0,3}", fullmatch=True))
def test_any_subdomain_is_a_valid_queue_name(name: str) -> None:
    assert queue_name_problems(pod({QUEUE_NAME_LABEL: name})) == []


# -- through the webhook -----------------------------------------------------------------


def test_the_webhook_refuses_group_metadata_on_create_and_update() -> None:
    assert refusal("Pod", grouped()) is None
    assert refusal("Pod", pod({POD_GROUP_NAME_LABEL: "g"})) == (
        f"{COUNT}: Required value: {BOTH_LABEL}"
    )
    assert refusal("Pod", grouped(), old=grouped()) is None
    assert refusal("Pod", grouped(count="0"), old=grouped()) is not None
    assert refusal("Pod", grouped(name="h"), old=grouped()) == (
        f'{NAME_LABEL}: Invalid value: "h": field is immutable'
    )


def test_the_webhook_refuses_a_pod_as_kueues_create_does_in_its_order() -> None:
    bad = pod(
        {QUEUE_NAME_LABEL: "Q", MAX_EXEC_TIME_LABEL: "0", MANAGED_LABEL: "false"},
        {ELASTIC_JOB_ANNOTATION: "true"},
    )
    message = refusal("Pod", bad)
    assert message is not None
    assert [part.split(":")[0] for part in message.split("; ")] == [
        f"metadata.labels[{QUEUE_NAME_LABEL}]",
        f"metadata.labels[{MAX_EXEC_TIME_LABEL}]",
        f"metadata.annotations[{ELASTIC_JOB_ANNOTATION}]",
        f"metadata.labels[{MANAGED_LABEL}]",
    ]
    assert 'elastic job is not supported for "/v1, Kind=Pod"' in message


def test_the_webhook_refuses_an_invalid_queue_name_on_every_kind() -> None:
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "labels": {QUEUE_NAME_LABEL: "Q"}},
        "spec": {"suspend": True, "template": {"spec": {"containers": []}}},
    }
    deployment = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "d", "namespace": "ns", "labels": {QUEUE_NAME_LABEL: "Q"}},
        "spec": {"replicas": 1, "template": {"spec": {"containers": []}}},
    }
    expected = f'metadata.labels[{QUEUE_NAME_LABEL}]: Invalid value: "Q": {DNS}'
    queued = pod({QUEUE_NAME_LABEL: "Q"})
    for kind, obj in (("Job", job), ("Deployment", deployment), ("Pod", queued)):
        message = refusal(kind, obj)
        assert message is not None and message.startswith(expected), (kind, message)
    # on update the Job's and the Deployment's webhooks check it again, the pod's does not
    for kind, obj in (("Job", job), ("Deployment", deployment)):
        assert (refusal(kind, obj, old=obj) or "").startswith(expected), kind
    assert refusal("Pod", queued, old=queued) is None


def test_the_webhook_refuses_the_other_pod_rules_and_a_jobs_prebuilt_name() -> None:
    unretriable = grouped(**{RETRIABLE_IN_GROUP_ANNOTATION: "false"})
    assert refusal("Pod", grouped(), old=unretriable) == (
        f"metadata.annotations[{RETRIABLE_IN_GROUP_ANNOTATION}]: Forbidden: unretriable "
        "pod group can't be converted to retriable"
    )
    assert refusal("Pod", grouped(**{PREBUILT_WORKLOAD_LABEL: "w"})) == (
        f'metadata.annotations[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "w": prebuilt '
        "workload and pod group should be equal"
    )
    assert refusal("Pod", grouped(name="G")) == f'{NAME_LABEL}: Invalid value: "G": {DNS}'
    assert refusal("Pod", pod({MANAGED_LABEL: "yes"}), old=pod()) == (
        f"metadata.labels[{MANAGED_LABEL}]: Forbidden: managed label value can only be 'true'"
    )
    job = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": "j",
            "namespace": "ns",
            "labels": {QUEUE_NAME_LABEL: "lq", PREBUILT_WORKLOAD_LABEL: "W"},
        },
        "spec": {"suspend": True, "template": {"spec": {"containers": []}}},
    }
    assert (
        refusal("Job", job)
        == f'metadata.labels[{PREBUILT_WORKLOAD_LABEL}]: Invalid value: "W": {DNS}'
    )
