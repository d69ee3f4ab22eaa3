"""What a configuration asks for that quotagate does not do, and the job-management rules
it sets, for the commands that start things (`quotagate run`, `config check`, `kubectl
quotagate`): `controller.config` itself knows nothing of the integrations (import-linter)."""

from __future__ import annotations

from controller.config import ControllerConfig
from controller.integrations.framework.registry import frameworks, unimplemented
from controller.integrations.job_management import JobManagement, describe_selector

__all__ = ["job_management", "not_implemented"]


def not_implemented(config: ControllerConfig) -> list[tuple[str, str]]:
    """(field, why) for every field read but not implemented: those of a Kueue file, the
    configured frameworks quotagate has no integration for, and external frameworks. Never
    fatal: the objects of such kinds are left alone."""
    found = list(config.not_implemented)
    found += [
        (
            f"integrations.frameworks[{index}]",
            f"{name}: quotagate has no such integration (it has {', '.join(frameworks())}); "
            "its objects are left alone",
        )
        for index, name in unimplemented(config.integrations.frameworks)
    ]
    found += [
        (
            f"integrations.externalFrameworks[{index}]",
            f"{name}: external frameworks are not implemented; nothing creates their Workloads",
        )
        for index, name in enumerate(config.integrations.external_frameworks)
    ]
    return found


def job_management(config: ControllerConfig) -> JobManagement:
    """The configuration's `manageJobsWithoutQueueName` and `managedJobsNamespaceSelector`
    (Kueue's default selector when unset)."""
    return JobManagement(
        config.manage_jobs_without_queue_name,
        config.namespace_selector(),
        describe_selector(config.namespace_selector_spec),
    )
