"""The console scripts exist and say plainly what is not built yet."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller import kubectl_plugin
from controller.cli import build_parser, main


def test_quotagate_lists_its_subcommands() -> None:
    help_text = build_parser().format_help()
    for command in ("run", "plan", "cost-controller", "bench"):
        assert command in help_text


@pytest.mark.parametrize("command", ["bench"])
def test_unbuilt_subcommands_exit_2_without_fake_output(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main([command]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert "not implemented yet" in captured.err


def test_kubectl_plugin_entry_point_runs() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from controller.kubectl_plugin import main; sys.exit(main(['--help']))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("usage: kubectl quotagate")
    for command in ("list", "describe", "whatif"):
        assert command in result.stdout
    assert kubectl_plugin.main([]) == 2  # a command is required: argparse's usage error


def test_run_with_an_invalid_config_names_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--write-parallelism", "0"]) == 2
    assert "writeParallelism" in capsys.readouterr().err
