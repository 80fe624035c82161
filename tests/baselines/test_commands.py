"""The ``llm-envs`` command and its scripts: dispatch, help, unknown commands, a missing module."""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path

import pytest

from baselines import commands

ROOT = Path(__file__).resolve().parents[2]


def test_pyproject_declares_the_scripts():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {
        "llm-envs": "baselines.commands:main",
        "llm-envs-train": "baselines.commands:train_main",
        "llm-envs-report": "baselines.commands:report_main",
        "llm-envs-eval": "baselines.commands:eval_main",
    }


def test_extras_are_named_for_what_they_bring():
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    for name in ("peft", "wandb", "tensorboard", "trackio", "deepspeed"):
        assert extras[name] and extras[name][0].startswith(name)


@pytest.mark.parametrize(
    ("argv", "status", "stream", "text"),
    [
        ([], 2, "out", "usage: llm-envs COMMAND"),
        (["--help"], 0, "out", "report         write a run's report"),
        (["--version"], 0, "out", "llm-envs "),
        (
            ["fit"],
            2,
            "err",
            "unknown command 'fit'; choose one of ['best-response', 'check', 'eval'",
        ),
    ],
)
def test_the_command_line_explains_itself(capsys, argv, status, stream, text):
    assert commands.main(argv) == status
    captured = capsys.readouterr()
    assert text in (captured.out if stream == "out" else captured.err)


def test_a_subcommand_gets_the_rest_of_the_line_and_its_own_name(monkeypatch):
    seen = {}

    def fake_main(argv, *, prog):
        seen.update(argv=argv, prog=prog)
        return {"reward": 1.0}  # grpo returns metrics: not an exit status

    module = type(sys)("fake_trainer")
    module.main = fake_main
    monkeypatch.setitem(sys.modules, "fake_trainer", module)
    monkeypatch.setitem(commands.COMMANDS, "train", commands.Command("fake_trainer", "x"))
    assert commands.main(["train", "--env", "debate"]) == 0
    assert seen == {"argv": ["--env", "debate"], "prog": "llm-envs train"}
    assert commands.train_main(["--help-me"]) == 0 and seen["argv"] == ["--help-me"]


def test_report_runs_without_torch(tmp_path, capsys):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"iteration": 0, "env/all/reward/total": 0.5}\n')
    assert commands.report_main([str(run)]) == 0
    assert (run / "report" / "index.html").is_file()


def test_a_missing_subcommand_module_says_so(monkeypatch, capsys):
    monkeypatch.setitem(
        commands.COMMANDS, "eval", commands.Command("baselines.eval.no_such_module", "x", False)
    )
    with pytest.raises(SystemExit) as exit_info:
        commands.eval_main([])
    assert exit_info.value.code == 2
    assert "llm-envs eval: this installation has no baselines.eval.no_such_module" in (
        capsys.readouterr().err
    )
