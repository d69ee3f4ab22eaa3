"""Kueue test cases ported as `quotagate plan` manifests: run one and read its JSON plan."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from controller.cli import main

DATA = Path(__file__).parent / "data"


def plan_case(folder: str, case: str, capsys: pytest.CaptureFixture[str]) -> dict[str, Any]:
    """The plan of tests/unit/data/<folder>/<case>.yaml at Kueue's test time."""
    path = DATA / folder / f"{case}.yaml"
    code = main(["plan", "-f", str(path), "--now", "2026-01-01T00:02:00Z"])
    out = capsys.readouterr().out
    assert code == 0, out
    result: dict[str, Any] = json.loads(out)
    return result
