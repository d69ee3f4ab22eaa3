"""The custom cost controller in docs/cost-controller.md is complete and correct."""

from __future__ import annotations

import datetime
import sys
from pathlib import Path

from api.quantities import Quantity
from costcontroller.policy import load_policy
from costcontroller.reconcile import decide

DOC = Path(__file__).resolve().parents[3] / "docs" / "cost-controller.md"


def test_the_documented_custom_policy_runs(tmp_path: Path) -> None:
    text = DOC.read_text()
    start = text.index("# mycosts.py")
    source = text[start : text.index("```", start)]
    assert len(source.strip().splitlines()) < 30
    (tmp_path / "mycosts.py").write_text(source)
    sys.path.insert(0, str(tmp_path))
    try:
        policy = load_policy("mycosts:GpuHours", {"cap": "20"})
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("mycosts", None)
    body = {
        "apiVersion": "kueue.x-k8s.io/v1beta2",
        "kind": "Workload",
        "metadata": {"name": "w", "namespace": "ns"},
        "spec": {
            "queueName": "q",
            "podSets": [
                {
                    "name": "main",
                    "count": 2,
                    "template": {
                        "spec": {
                            "containers": [
                                {"name": "c", "resources": {"requests": {"nvidia.com/gpu": "2"}}}
                            ]
                        }
                    },
                }
            ],
        },
        "status": {
            "admission": {
                "clusterQueue": "cq",
                "podSetAssignments": [
                    {"name": "main", "count": 2, "flavors": {"nvidia.com/gpu": "f"}}
                ],
            },
            "conditions": [
                {
                    "type": "QuotaReserved",
                    "status": "True",
                    "reason": "QuotaReserved",
                    "message": "m",
                    "lastTransitionTime": "2026-01-01T00:00:00Z",
                }
            ],
        },
    }
    three_and_a_half_hours_later = datetime.datetime(
        2026, 1, 1, 3, 30, tzinfo=datetime.UTC
    ).timestamp()
    decision = decide(body, policy, lambda: three_and_a_half_hours_later, Quantity.parse("100"))
    assert decision.patch == {"status": {"preemptionCost": "12"}}  # 2 pods × 2 GPUs × 3 h
