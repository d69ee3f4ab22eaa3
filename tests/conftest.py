"""Shared pytest setup: the real local control plane fixtures, and markers by directory."""

from __future__ import annotations

from pathlib import Path

import pytest

pytest_plugins = ["tests.cluster.fixtures"]

_HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        parts = Path(str(item.fspath)).resolve().relative_to(_HERE).parts
        if parts and parts[0] in ("integration", "compat"):
            item.add_marker(pytest.mark.integration)
        elif parts and parts[0] in ("e2e", "faults"):
            item.add_marker(pytest.mark.e2e)
