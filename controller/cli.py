"""The `quotagate` command: one entry point, a subcommand per process or tool."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence

from controller.version import version

Handler = Callable[[argparse.Namespace], int]
# The commands that run until stopped: a stop signal during their imports is kept.
LONG_RUNNING = frozenset({"run", "cost-controller"})


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="quotagate",
        description="Kueue-compatible admission and queueing controller for Kubernetes.",
    )
    parser.add_argument("--version", action="version", version=f"quotagate {version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    from controller.runtime.command import add_run_command

    add_run_command(commands)
    from costcontroller.command import add_cost_controller_command

    add_cost_controller_command(commands)
    from controller.plan_command import add_plan_command

    add_plan_command(commands)
    from controller.config_check import add_config_command

    add_config_command(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    words = sys.argv[1:] if argv is None else argv
    if words[:1] and words[0] in LONG_RUNNING:
        from controller.kube.process import hold_stop_signals

        hold_stop_signals()
    parser = build_parser()
    args = parser.parse_args(argv)
    handler: Handler = args.handler
    return handler(args)


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
