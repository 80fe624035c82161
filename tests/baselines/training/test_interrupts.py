"""Ctrl-C or SIGTERM ends a run with one line that says how to resume, and a shell's exit status."""

from __future__ import annotations

import os
import signal

import pytest
from pydantic.dataclasses import dataclass

from baselines.config import VALIDATION
from baselines.run_directory import RunDirectory
from baselines.training.run import command_line


@dataclass(frozen=True, config=VALIDATION)
class _Config:
    """A run."""

    output_dir: str = "."
    """The folder."""
    stop: str = "ctrl-c"
    """How the run stops: ``ctrl-c`` or ``sigterm``."""
    progress: bool = False
    """No heartbeat lines: the interruption's line is the only one."""


class _Run:
    accelerator = None

    def __init__(self, config: _Config) -> None:
        self.config = config
        self.run_dir = RunDirectory(config.output_dir)

    def run(self):
        if self.config.stop == "sigterm":
            os.kill(os.getpid(), signal.SIGTERM)
        raise KeyboardInterrupt


@pytest.mark.parametrize(("stop", "status"), [("ctrl-c", 130), ("sigterm", 143)])
def test_an_interrupted_run_names_its_checkpoint_and_the_command(tmp_path, capsys, stop, status):
    checkpoint = tmp_path / "checkpoints" / "iteration_000003"
    checkpoint.mkdir(parents=True)
    (checkpoint / "trainer_state.json").write_text('{"iteration": 3}')  # a complete one
    argv = ["--output-dir", str(tmp_path), "--stop", stop]
    with pytest.raises(SystemExit) as exited:
        command_line(_Config, _Run, argv, prog="python -m baselines.is_trainer")
    assert exited.value.code == status
    err = capsys.readouterr().err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert "iteration_000003 (3 iterations done)" in err
    assert f"python -m baselines.is_trainer --output-dir {tmp_path} --stop {stop}" in err
    assert signal.getsignal(signal.SIGTERM) is signal.SIG_DFL  # handler put back


def test_an_interrupt_before_the_first_checkpoint_says_the_run_starts_again(tmp_path, capsys):
    with pytest.raises(SystemExit):
        command_line(_Config, _Run, ["--output-dir", str(tmp_path)], prog="prog")
    assert "no checkpoint yet; the same command starts the run again" in capsys.readouterr().err
