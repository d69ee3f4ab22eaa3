"""Printing like kubectl: aligned tables, human durations, one-line messages. Pure."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import yaml

from controller.core.model.api_fields import parse_time

__all__ = ["age", "dump", "format_table", "human_duration", "one_line"]

_GAP = "   "  # kubectl's tabwriter pads every column but the last with three spaces


def format_table(header: Sequence[str], rows: Sequence[Sequence[str]]) -> str:
    """Columns left-aligned to their widest cell, like `kubectl get` (no trailing blanks)."""
    table = [list(header), *(list(row) for row in rows)]
    widths = [max(len(row[i]) for row in table) for i in range(len(header))]
    lines = []
    for row in table:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:-1])]
        lines.append(_GAP.join([*cells, row[-1]]).rstrip())
    return "\n".join(lines)


def human_duration(seconds: float) -> str:
    """kubectl's `duration.HumanDuration`: 42s, 3m12s, 15m, 5h3m, 12h, 3d4h, 40d, 2y10d."""
    whole = int(seconds)
    if whole < -1:
        return "<invalid>"
    if whole < 0:
        return "0s"
    if whole < 120:
        return f"{whole}s"
    minutes = whole // 60
    if minutes < 10:
        rest = whole % 60
        return f"{minutes}m{rest}s" if rest else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = whole // 3600
    if hours < 8:
        rest = minutes % 60
        return f"{hours}h{rest}m" if rest else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    if hours < 24 * 8:
        rest = hours % 24
        return f"{hours // 24}d{rest}h" if rest else f"{hours // 24}d"
    if hours < 24 * 365 * 2:
        return f"{hours // 24}d"
    if hours < 24 * 365 * 8:
        days = (hours // 24) % 365
        years = hours // 24 // 365
        return f"{years}y{days}d" if days else f"{years}y"
    return f"{hours // 24 // 365}y"


def age(timestamp: Any, now: float) -> str:
    """The AGE of an RFC 3339 timestamp (`<unknown>` when missing or unreadable)."""
    if not isinstance(timestamp, str) or not timestamp:
        return "<unknown>"
    try:
        return human_duration(now - parse_time(timestamp))
    except ValueError:
        return "<unknown>"


def one_line(text: Any) -> str:
    """Collapse whitespace and newlines so a message fits one table cell or stderr line."""
    return " ".join(str(text).split())


def dump(data: Any, output: str) -> str:
    """`-o json` (two-space indent, as kubectl) or `-o yaml`."""
    if output == "json":
        return json.dumps(data, indent=2)
    return yaml.safe_dump(data, sort_keys=False, default_flow_style=False).rstrip("\n")
