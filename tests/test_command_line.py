"""One error style for every command: one line, its fix, no usage block."""

from __future__ import annotations

import subprocess
import sys

import pytest

from llm_envs.command_line import CommandParser, flag_hints

KNOWN = ["--max-tokens", "--num-iterations", "--output-dir", "--learning-rate", "--precision"]


@pytest.mark.parametrize(
    ("unknown", "hints"),
    [
        (
            ["--output_dir", "runs/x"],
            ["--output_dir: flags are spelled with dashes here: --output-dir"],
        ),
        (
            ["--output_dir=runs/x"],
            ["--output_dir: flags are spelled with dashes here: --output-dir"],
        ),
        (["--max_steps", "3"], ["--max_steps is TRL's spelling; here it is --num-iterations"]),
        (["--bf16"], ["--bf16 is TRL's spelling; here it is --precision"]),
        (["--lerning-rate", "1e-5"], ["--lerning-rate: did you mean --learning-rate?"]),
        (["--colour", "red"], []),  # nothing close: no guess
        (["runs/x"], []),  # a stray value is not a flag
        (["--num-generations", "4"], ["--num-generations: did you mean --num-iterations?"]),
    ],
)
def test_flag_hints(unknown, hints):
    assert flag_hints(unknown, KNOWN) == hints


def test_an_error_is_one_line_a_hint_and_where_the_flags_are(capsys):
    parser = CommandParser(prog="demo")
    for flag in KNOWN:
        parser.add_argument(flag)
    with pytest.raises(SystemExit) as exited:
        parser.parse_args(["--output_dir", "x"])
    assert exited.value.code == 2
    assert capsys.readouterr().err.splitlines() == [
        "demo: error: unrecognized arguments: --output_dir x",
        "demo: --output_dir: flags are spelled with dashes here: --output-dir",
        "(demo --help lists every flag)",
    ]


@pytest.mark.parametrize(
    "command",
    [
        ["-m", "baselines.is_trainer", "--max_steps", "3"],
        ["-m", "baselines.grpo", "--output_dir", "x"],
        ["-m", "baselines.grpo", "--max-steps", "0"],  # a value the config refuses
        ["-m", "baselines.eval", "--bogus"],
    ],
)
def test_every_command_answers_a_user_error_without_usage_or_traceback(command):
    ran = subprocess.run(
        [sys.executable, *command], capture_output=True, text=True, timeout=300, check=False
    )
    assert ran.returncode == 2
    lines = ran.stderr.strip().splitlines()
    assert "usage:" not in ran.stderr
    assert "Traceback" not in ran.stderr
    assert 2 <= len(lines) <= 4, ran.stderr
    assert lines[-1].endswith("--help lists every flag)")
