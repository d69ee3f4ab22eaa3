"""Kueue test cases ported as `quotagate plan` manifests: run one and read its JSON plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main

DATA = Path(__file__).parent / "data"


def plan_case(
    folder: str,
    case: str,
    capsys: pytest.CaptureFixture[str],
    *,
    config: str | None = None,
    cycles: int | None = None,
    without_api_rules: bool = False,
) -> dict[str, Any]:
    """The plan of tests/unit/data/<folder>/<case>.yaml at Kueue's test time, with the
    controller configuration tests/unit/data/<folder>/<config> if given, over at most
    `cycles` admission cycles (Kueue's TestSchedule runs one) or until nothing changes.
    `without_api_rules`: the case's objects are as Kueue's unit test builds them, past
    what Kueue's API would accept (`plan --without-api-rules`)."""
    path = DATA / folder / f"{case}.yaml"
    args = ["plan", "-f", str(path), "--now", "2026-01-01T00:02:00Z"]
    if config is not None:
        args += ["--config", str(DATA / folder / config)]
    if cycles is not None:
        args += ["--cycles", str(cycles)]
    if without_api_rules:
        args.append("--without-api-rules")
    code = main(args)
    out = capsys.readouterr().out
    assert code == 0, out
    result: dict[str, Any] = json.loads(out)
    return result
