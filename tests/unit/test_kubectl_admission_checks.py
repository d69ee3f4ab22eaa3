"""`kubectl quotagate describe` of a Workload waiting for its admission checks: its status
reads QuotaReserved, the check states and the admission gates are shown."""

from __future__ import annotations

from controller.kubectl.describe import describe_workload, render_description
from tests.unit.test_kubectl_plugin import NOW, cond, snapshot, workload


def test_describe_shows_the_check_states_of_a_reserved_workload() -> None:
    waiting = workload("checked", admitted_in="cq")
    waiting["status"]["conditions"] = [
        cond("QuotaReserved", "True", "QuotaReserved"),
        cond(
            "Admitted",
            "False",
            "UnsatisfiedAdmissionChecks",
            "The workload has not all checks ready",
        ),
    ]
    waiting["status"]["admissionChecks"] = [
        {"name": "budget", "state": "Ready", "message": "within budget", "lastTransitionTime": "x"},
        {
            "name": "prov",
            "state": "Pending",
            "retryCount": 1,
            "message": "",
            "lastTransitionTime": "x",
        },
    ]
    waiting["metadata"]["annotations"] = {"kueue.x-k8s.io/admission-gated-by": "example.com/gate"}
    d = describe_workload(waiting, snapshot(waiting), NOW)
    assert d["status"] == "QuotaReserved"
    assert d["admissionGatedBy"] == "example.com/gate"
    assert [c["state"] for c in d["admissionChecks"]] == ["Ready", "Pending"]
    text = render_description(d, NOW)
    lines = text.splitlines()
    assert [
        line.split(":", 1)[1].strip() for line in lines if line.startswith("Admission gated by")
    ] == ["example.com/gate"]
    start = lines.index("Admission checks:")
    assert lines[start + 1].split() == ["NAME", "STATE", "RETRIES", "MESSAGE"]
    assert lines[start + 2].split() == ["budget", "Ready", "0", "within", "budget"]
    assert lines[start + 3].split() == ["prov", "Pending", "1", "-"]
