"""The installed distribution's version, for `--version` and `kueue_build_info`."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError
from importlib.metadata import version as installed


def version() -> str:
    """The installed distribution's version (pyproject.toml)."""
    try:
        return installed("quotagate")
    except PackageNotFoundError:  # running from a checkout that was never installed
        return "unknown (not installed)"
