"""The configuration's report as a metric: each field of the configuration file that
quotagate read but does not implement (`ControllerConfig.not_implemented`), so a dashboard
or an alert sees what a Kueue Configuration asks for that is not applied."""

from __future__ import annotations

from collections.abc import Iterable

from prometheus_client import CollectorRegistry, Gauge

__all__ = ["NOT_IMPLEMENTED_METRIC", "export_not_implemented"]

NOT_IMPLEMENTED_METRIC = "quotagate_configuration_field_not_implemented"


def export_not_implemented(registry: CollectorRegistry, fields: Iterable[tuple[str, str]]) -> Gauge:
    """Register the gauge: 1 per field read but not implemented, labelled by the field's path
    in the file (`integrations.frameworks[1]`, `featureGates.TopologyAwareScheduling`)."""
    gauge = Gauge(
        NOT_IMPLEMENTED_METRIC,
        "Fields of the configuration file that quotagate read but does not implement (1 each)",
        ["field"],
        registry=registry,
    )
    for path, _ in fields:
        gauge.labels(field=path).set(1)
    return gauge
