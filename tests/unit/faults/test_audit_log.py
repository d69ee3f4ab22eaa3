"""The fault suite's reading of kube-apiserver's audit log, which processes killed with
SIGKILL write to in turn."""

from __future__ import annotations

import json

import pytest

from tests.faults.cluster import audit_events_of


def event(n: int) -> str:
    return json.dumps({"kind": "Event", "auditID": f"id-{n}"}, separators=(",", ":"))


def ids(text: str) -> list[str]:
    return [e["auditID"] for e in audit_events_of(text)]


def test_an_event_cut_by_a_killed_api_server_is_dropped_and_the_next_one_kept() -> None:
    cut = event(2)[:30]
    assert ids(f"{event(1)}\n{cut}{event(3)}\n{event(4)}\n") == ["id-1", "id-3", "id-4"]


def test_an_event_being_written_at_the_end_is_dropped() -> None:
    assert ids(f"{event(1)}\n{event(2)[:25]}") == ["id-1"]


def test_a_line_that_is_no_event_is_an_error() -> None:
    with pytest.raises(ValueError, match="audit log line 2 is not an audit event"):
        audit_events_of(f"{event(1)}\ngarbage\n{event(3)}\n")
