"""The console scripts exist, list their subcommands and reject bad usage plainly."""

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


def test_bench_without_a_mode_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "tests/bench/scenarios/smoke.yaml"])
    assert exit_info.value.code == 2
    assert (
        "one of the arguments --simulate --live --api-floor is required" in capsys.readouterr().err
    )


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
