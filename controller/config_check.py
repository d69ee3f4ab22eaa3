"""`quotagate config check FILE`: how `quotagate run --config FILE` will read a file (in
quotagate's own format or as Kueue's Configuration), without a cluster.

It prints the file's format, the settings it becomes (in quotagate's format, every default
filled in), each field read but not implemented and why, and how some Kueue fields are read.
Exit status: 0 for a valid file (not implemented fields are listed, never fatal), 2 for an
invalid one, with the field named.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any, TextIO

import yaml

from controller.config import ConfigError, ControllerConfig, load_config
from controller.config_report import not_implemented

__all__ = ["add_config_command", "describe_config"]


def add_config_command(commands: Any) -> None:
    config = commands.add_parser(
        "config", help="check a configuration file", description="Configuration file tools."
    )
    actions = config.add_subparsers(dest="action", metavar="ACTION", required=True)
    check = actions.add_parser(
        "check",
        help="print how `quotagate run --config FILE` reads FILE",
        description="Print how `quotagate run --config FILE` reads FILE (quotagate's format or "
        "Kueue's Configuration): the settings it becomes, the fields not implemented, notes. "
        "Exit 0 when valid, 2 when invalid.",
    )
    check.add_argument("file", type=Path, help="the configuration file")
    check.set_defaults(handler=_check)


def describe_config(config: ControllerConfig, path: Path, out: TextIO) -> None:
    """The report `config check` prints for a valid file."""
    kind = (
        "Kueue's Configuration (config.kueue.x-k8s.io/v1beta2)"
        if config.kueue_format
        else "quotagate's own (docs/configuration.md)"
    )
    print(f"File:    {path}", file=out)
    print(f"Format:  {kind}", file=out)
    print("Valid:   yes", file=out)
    print("", file=out)
    missing = not_implemented(config)
    if missing:
        print(
            f"Not implemented ({len(missing)}; read, listed at start and in the "
            "metric quotagate_configuration_field_not_implemented, not applied):",
            file=out,
        )
        for field, why in missing:
            print(f"  {field}: {why}", file=out)
    else:
        print("Not implemented: none (every field in the file is applied)", file=out)
    if config.notes:
        print("", file=out)
        print("Notes:", file=out)
        for note in config.notes:
            print(f"  {note}", file=out)
    print("", file=out)
    print("Settings (quotagate's format, defaults filled in):", file=out)
    settings = config.model_dump(mode="json", by_alias=True)
    text = yaml.safe_dump(settings, sort_keys=False, default_flow_style=False)
    print("".join(f"  {line}\n" for line in text.splitlines()), end="", file=out)


def _check(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.file)
    except ConfigError as exc:
        print(f"File:    {args.file}", file=sys.stdout)
        print("Valid:   no", file=sys.stdout)
        print(f"quotagate config check: {exc}", file=sys.stderr)
        return 2
    describe_config(config, args.file, sys.stdout)
    return 0
