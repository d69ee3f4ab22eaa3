"""`quotagate plan` with admission checks: a reservation in a ClusterQueue with checks is
planned as "reserve, admitted once the checks are Ready"; a check that is not Active keeps
the queue inactive; a ProvisioningRequestConfig is checked against its schema and read no
further (admission does not depend on it)."""

from __future__ import annotations

from pathlib import Path

import pytest

from controller.cli import main

STATE = Path(__file__).parent / "data" / "plan-admission-checks.yaml"


def test_a_reservation_waits_for_its_checks(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["plan", "-f", str(STATE), "-o", "table"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split() == [
        "ns/w", "cq", "reserve", "mainx1:", "cpu=default;", "admitted", "once", "checks",
        "prov", "are", "Ready",
    ]  # fmt: skip


def test_an_inactive_check_keeps_the_queue_inactive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = STATE.read_text().replace('status: "True"', 'status: "False"')
    path = tmp_path / "state.yaml"
    path.write_text(text)
    assert main(["plan", "-f", str(path), "-o", "table"]) == 0
    out = capsys.readouterr().out
    assert "Can't admit new workloads: references inactive AdmissionCheck(s): prov." in out


def test_a_bad_provisioning_request_config_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = STATE.read_text().replace(
        "provisioningClassName: check-capacity.autoscaling.x-k8s.io",
        "provisioningClassName: Not_A_Class",
    )
    path = tmp_path / "state.yaml"
    path.write_text(text)
    assert main(["plan", "-f", str(path)]) == 2
    assert "spec.provisioningClassName" in capsys.readouterr().err
