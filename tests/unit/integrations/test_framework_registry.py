"""The integrations registry (controller/integrations/framework/registry.py) and what reads
it: Kueue's framework names, the chart's generated integrations file, the webhook
configuration."""

from __future__ import annotations

from pathlib import Path

from controller.config import KUEUE_FRAMEWORKS, load_config
from controller.integrations.framework.manifests import integrations_file
from controller.integrations.framework.registry import (
    by_kind,
    enabled_with_implied,
    frameworks,
    unimplemented,
)
from controller.integrations.webhook import review_response, webhook_configuration

REPO = Path(__file__).resolve().parents[3]


def test_every_integration_has_a_kueue_framework_name() -> None:
    assert set(frameworks()) <= set(KUEUE_FRAMEWORKS)
    assert {"batch/job", "jobset.x-k8s.io/jobset", "pod"} <= set(frameworks())


def test_the_charts_integrations_file_is_current() -> None:
    shipped = (REPO / "charts" / "quotagate" / "files" / "integrations.yaml").read_text()
    assert shipped == integrations_file(), "run `make crds` after changing an integration"


def test_kueues_default_is_batch_job_only(tmp_path: Path) -> None:
    assert load_config(None).integrations.frameworks == ["batch/job"]
    empty = tmp_path / "config.yaml"
    empty.write_text("integrations: {frameworks: []}\n")
    assert load_config(empty).integrations.frameworks == ["batch/job"]  # as Kueue defaults it


def test_unimplemented_names_are_found_by_position() -> None:
    assert unimplemented(["batch/job", "ray.io/rayservice", "pod"]) == [(1, "ray.io/rayservice")]
    assert enabled_with_implied(["pod", "batch/job", "pod"]) == ["pod", "batch/job"]


def test_the_webhook_configuration_lists_the_enabled_kinds_only() -> None:
    enabled = by_kind(["batch/job"])
    body = webhook_configuration("https://127.0.0.1:9443", b"ca", "quotagate-system", enabled)
    [entry] = body["webhooks"]
    assert entry["clientConfig"]["url"] == "https://127.0.0.1:9443/mutate-jobs"
    assert entry["rules"][0]["apiGroups"] == ["batch"]


def test_a_kind_whose_integration_is_off_is_left_alone() -> None:
    review = {
        "request": {
            "uid": "r",
            "operation": "CREATE",
            "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
            "object": {
                "metadata": {"name": "js", "labels": {"kueue.x-k8s.io/queue-name": "lq"}},
                "spec": {"replicatedJobs": []},
            },
        }
    }
    assert review_response(review, by_kind(["batch/job"]))["response"] == {
        "uid": "r",
        "allowed": True,
    }
    answer = review_response(review, by_kind(["jobset.x-k8s.io/jobset"]))["response"]
    assert answer["allowed"] is True and answer["patchType"] == "JSONPatch"
