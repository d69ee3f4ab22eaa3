"""Errors the controller cannot recover from: it stops and `quotagate run` exits 1 with the
message as its one line on stderr (no traceback)."""

from __future__ import annotations

__all__ = ["FatalError"]


class FatalError(RuntimeError):
    """The controller cannot go on; the message says what is wrong and what to change."""
