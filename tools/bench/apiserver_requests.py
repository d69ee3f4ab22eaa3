"""What a controller asks of the API server during a run, from kube-apiserver's own
`apiserver_request_total` counter (its `/metrics`): the requests that change something
(every verb but GET, LIST and WATCH), by verb, resource and subresource, counted between
two scrapes. `make bench-compare` puts them beside each other per Workload, so a
difference in API server CPU can be traced to the requests that cause it."""

from __future__ import annotations

from collections.abc import Mapping

from prometheus_client.parser import text_string_to_metric_families

__all__ = ["READ_VERBS", "request_counts", "requests_between", "write_rows"]

READ_VERBS = frozenset({"GET", "LIST", "WATCH"})
_METRIC = "apiserver_request"  # the parser drops the counter's `_total`


def request_counts(metrics_text: str) -> dict[str, int]:
    """The writes counted so far, by `VERB resource[/subresource]` (all codes and groups
    together), from a kube-apiserver `/metrics` text."""
    counts: dict[str, int] = {}
    for family in text_string_to_metric_families(metrics_text):
        if family.name != _METRIC:
            continue
        for sample in family.samples:
            if not sample.name.endswith("_total"):
                continue
            labels = sample.labels
            verb = labels.get("verb", "")
            if verb in READ_VERBS:
                continue
            what = labels.get("resource", "")
            if labels.get("subresource"):
                what += "/" + labels["subresource"]
            key = f"{verb} {what}"
            counts[key] = counts.get(key, 0) + int(sample.value)
    return counts


def requests_between(before: Mapping[str, int], after: Mapping[str, int]) -> dict[str, int]:
    """The writes made between two scrapes (those that happened), sorted by key."""
    return {
        key: after[key] - before.get(key, 0)
        for key in sorted(after)
        if after[key] - before.get(key, 0) > 0
    }


def write_rows(
    first: Mapping[str, int], second: Mapping[str, int], workloads: int
) -> list[tuple[str, float, float]]:
    """Per request kind: writes per Workload of each run, the most frequent first; a last
    row with all of them."""
    per = max(workloads, 1)
    keys = sorted(
        set(first) | set(second), key=lambda k: (-(first.get(k, 0) + second.get(k, 0)), k)
    )
    out = [(key, first.get(key, 0) / per, second.get(key, 0) / per) for key in keys]
    out.append(("all writes", sum(first.values()) / per, sum(second.values()) / per))
    return out
