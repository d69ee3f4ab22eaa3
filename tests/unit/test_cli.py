"""The console scripts exist, list their subcommands and reject bad usage plainly."""

from __future__ import annotations

import subprocess
import sys

import pytest

from controller.cli import main
from controller.kubectl import plugin as kubectl_plugin
from tools.bench.command import main as bench_main


@pytest.mark.parametrize("command", ["run", "plan", "cost-controller"])
def test_each_quotagate_subcommand_has_its_own_usage(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main([command, "--help"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith(f"usage: quotagate {command} ")


def test_an_unknown_subcommand_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["admit-everything"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'admit-everything'" in capsys.readouterr().err


def test_the_bench_is_not_a_quotagate_subcommand(capsys: pytest.CaptureFixture[str]) -> None:
    """The bench is a development tool (`python -m tools.bench`), not in the product."""
    with pytest.raises(SystemExit) as exit_info:
        main(["bench", "tools/bench/scenarios/smoke.yaml"])
    assert exit_info.value.code == 2
    assert "invalid choice: 'bench'" in capsys.readouterr().err


def test_bench_without_a_mode_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        bench_main(["tools/bench/scenarios/smoke.yaml"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: python -m tools.bench ")
    assert "one of the arguments --simulate --live --api-floor is required" in err


def test_kubectl_plugin_entry_point_runs() -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from controller.kubectl.plugin import main; sys.exit(main(['--help']))",
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0
    assert result.stdout.startswith("usage: kubectl quotagate")
    assert kubectl_plugin.main([]) == 2  # a command is required: argparse's usage error


@pytest.mark.parametrize("command", ["list", "describe", "whatif"])
def test_each_kubectl_quotagate_command_has_its_own_usage(
    command: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert kubectl_plugin.main([command, "--help"]) == 0
    assert capsys.readouterr().out.startswith(f"usage: kubectl quotagate {command}")


def test_run_with_an_invalid_config_names_the_key(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["run", "--write-parallelism", "0"]) == 2
    assert "writeParallelism" in capsys.readouterr().err
