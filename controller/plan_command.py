"""`quotagate plan`: placeholder until the admission engine lands (issue 4)."""

from __future__ import annotations

import argparse
import sys
from typing import Any


def add_plan_command(commands: Any) -> None:
    sub = commands.add_parser(
        "plan", help="run admission cycles over a YAML state and print the plan"
    )
    sub.set_defaults(handler=_plan)


def _plan(_: argparse.Namespace) -> int:
    print("quotagate plan: not implemented yet", file=sys.stderr)
    return 2
