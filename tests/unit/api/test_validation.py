"""Kueue's rules in Python (api/validation): every case of tests/validation_cases.py that a
rule refuses is refused with exactly Kueue's field errors, the objects Kueue accepts are
accepted (and fit the CRD's schema), and the helpers print as apimachinery prints."""

from __future__ import annotations

import copy
from typing import Any

import jsonschema
import pytest

from api.validation import aggregate, validate, validate_update
from api.validation.field_errors import Path, duplicate, invalid, not_supported, quote, required
from api.validation.names import is_dns1123_label, is_label_value, is_qualified_name
from tests.unit.api.test_crds import _as_json_schema, _schema
from tests.validation_cases import CASES, Case

RESERVED_STATUS = {
    "conditions": [
        {
            "type": "QuotaReserved",
            "status": "True",
            "reason": "QuotaReserved",
            "message": "reserved",
            "lastTransitionTime": "2026-01-01T00:00:00Z",
        }
    ]
}


def reserved(obj: dict[str, Any]) -> dict[str, Any]:
    """`obj` as it reads once its quota is reserved (an admission for its pod sets)."""
    out = copy.deepcopy(obj)
    out["status"] = {
        **RESERVED_STATUS,
        "admission": {
            "clusterQueue": "cq",
            "podSetAssignments": [
                {
                    "name": ps["name"],
                    "count": ps["count"],
                    "flavors": {"cpu": "default"},
                    "resourceUsage": {"cpu": str(ps["count"])},
                }
                for ps in obj["spec"]["podSets"]
            ],
        },
    }
    return out


def errors_of(case: Case) -> list[str]:
    if case.old is None:
        return [str(error) for error in validate(case.obj)]
    old, new = case.old, case.obj
    if case.reserved:  # an update of the object keeps its status (the main resource's path)
        old = reserved(old)
        new = {**copy.deepcopy(new), "status": old["status"]}
    return [str(error) for error in validate_update(old, new)]


RULED = [case for case in CASES if case.by in ("cel", "webhook") and not case.accepted]


@pytest.mark.parametrize("case", RULED, ids=[f"{c.rule} {c.name}" for c in RULED])
def test_each_rule_refuses_with_kueues_errors(case: Case) -> None:
    got = errors_of(case)
    detail = case.extra.get("detail")
    if detail is not None:  # the value is a whole pod set: its rendering is Go's, not ours
        assert len(got) == len(case.errors)
        assert all(
            g.startswith(e) and g.endswith(f": {detail}")
            for g, e in zip(sorted(got), sorted(case.errors), strict=True)
        )
        return
    if case.by == "cel":  # the API server stops at the CRD rule; a webhook check may repeat it
        assert set(case.errors) <= set(got)
        return
    assert sorted(got) == sorted(case.errors)


ACCEPTED = [case for case in CASES if case.accepted]


@pytest.mark.parametrize("case", ACCEPTED, ids=[f"{c.rule} {c.name}" for c in ACCEPTED])
def test_what_kueue_accepts_is_accepted(case: Case) -> None:
    assert errors_of(case) == []
    schema = _as_json_schema(_schema(case.kind))
    jsonschema.validate(case.obj, schema)


SCHEMA = [case for case in CASES if case.by == "schema"]


@pytest.mark.parametrize("case", SCHEMA, ids=[f"{c.rule} {c.name}" for c in SCHEMA])
def test_schema_cases_pass_the_rules_and_fail_the_schema(case: Case) -> None:
    """What only the CRD's schema refuses: the rules let it through (the API server never
    sends it on), and the schema, approximated by jsonschema, refuses it (an unknown field:
    pruning and strict field validation are the API server's own)."""
    assert errors_of(case) == []
    if "unknown field" not in case.errors[0]:
        validator = jsonschema.Draft7Validator(_as_json_schema(_schema(case.kind)))
        assert list(validator.iter_errors(case.obj))


def test_every_rule_has_a_case() -> None:
    """docs/validation.md's rule ids: each one the table knows."""
    ids = {case.rule.split("-")[0] + "-" + case.rule.split("-")[1].rstrip("ab") for case in CASES}
    for prefix, count in (
        ("RF", 13),
        ("CQ", 20),
        ("CO", 5),
        ("LQ", 1),
        ("WL", 19),
        ("TP", 4),
        ("AC", 1),
    ):
        assert {f"{prefix}-{i}" for i in range(1, count + 1)} <= ids, prefix


def test_field_errors_print_as_apimachinery_prints_them() -> None:
    path = Path("spec").child("resourceGroups").index(1).child("coveredResources").index(0)
    assert str(duplicate(path, "cpu")) == (
        'spec.resourceGroups[1].coveredResources[0]: Duplicate value: "cpu"'
    )
    assert str(required(Path("status.admission"), "must be set")) == (
        "status.admission: Required value: must be set"
    )
    assert str(invalid(Path("spec.podSets"), 2, "at most one")) == (
        "spec.podSets: Invalid value: 2: at most one"
    )
    assert str(not_supported(Path("x"), "a", ["b", "c"])) == (
        'x: Unsupported value: "a": supported values: "b", "c"'
    )
    assert str(Path("metadata.annotations").key("a/b")) == "metadata.annotations[a/b]"
    assert str(Path()) == "<nil>"
    assert quote('a"b\\c\n') == '"a\\"b\\\\c\\n"'
    one, other = invalid(Path("a"), "x", "bad"), invalid(Path("b"), "y", "bad")
    assert aggregate([one]) == 'a: Invalid value: "x": bad'
    assert (
        aggregate([one, other, one]) == '[a: Invalid value: "x": bad, b: Invalid value: "y": bad]'
    )


@pytest.mark.parametrize(
    ("value", "errors"),
    [
        ("example.com/name", []),
        ("name", []),
        ("/name", ["prefix part must be non-empty"]),
        ("Example.com/name", ["prefix part a lowercase RFC 1123 subdomain"]),
        ("a" * 64, ["name part must be no more than 63 bytes"]),
        ("a/b/c", ["a valid label key"]),
        ("", ["name part must be non-empty", "name part must consist"]),
    ],
)
def test_qualified_names(value: str, errors: list[str]) -> None:
    found = is_qualified_name(value)
    assert len(found) == len(errors)
    assert all(f.startswith(e) for f, e in zip(found, errors, strict=True))


def test_label_values_and_dns_labels() -> None:
    assert is_label_value("") == []
    assert is_label_value("a.b_c-d") == []
    assert is_label_value("-a")[0].startswith("a valid label must be an empty string")
    assert is_label_value("a" * 64)[0] == "must be no more than 63 bytes"
    assert is_dns1123_label("a.b") == ["must not contain dots"]
    assert is_dns1123_label("main") == []
