"""The eval command's settings: flags, checks, and what a resumed evaluation must keep."""

from __future__ import annotations

import pytest

from baselines.eval.config import EvalConfig, parse_eval_args


def test_flags_build_the_config():
    config = parse_eval_args(
        [
            "--env", "expert_iteration", "--problems", "3", "--seating", "self",
            "--env-kwargs", '{"format_reward": 0.5}', "--baseline", "trained",
            "--models", "base=tiny", "trained=/runs/x/final_model",
        ]
    )  # fmt: skip
    assert config.models == ("base=tiny", "trained=/runs/x/final_model")
    assert (config.env, config.problems, config.env_kwargs) == (
        "expert_iteration",
        3,
        {"format_reward": 0.5},
    )
    assert config.baseline_name == "trained"


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"models": ()}, "at least one model"),
        ({"models": ("a=tiny", "a=tiny")}, "two models are named 'a'"),
        ({"models": ("tiny",), "baseline": "base"}, "baseline 'base' is none of the models"),
        (
            {"models": ("tiny",), "problems": 0},
            r"problems\n  Input should be greater than or equal to 1 .*input_value=0,",
        ),
        (
            {"models": ("tiny",), "confidence": 1.0},
            r"confidence\n  Input should be less than 1 .*input_value=1.0,",
        ),
        (
            {"models": ("tiny",), "env": "code_collab", "task": "gsm8k"},
            "task 'gsm8k' is not for env='code_collab'",
        ),
        ({"models": ("tiny",), "env": "chess"}, "unknown env 'chess'; the registered ones are"),
        ({"models": ("tiny@temperature=-1",)}, "temperature must be > 0"),
    ],
)
def test_bad_settings_name_the_fix(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalConfig(**kwargs)


def test_a_bad_flag_exits_with_its_message(capsys):
    with pytest.raises(SystemExit) as exit_info:
        parse_eval_args(["--models", "a=tiny", "a=tiny"])
    assert exit_info.value.code == 2
    assert "two models are named 'a'" in capsys.readouterr().err


def test_plan_changes_name_the_settings_that_decide_the_episodes():
    before = EvalConfig(models=("tiny",), problems=2)
    now = EvalConfig(models=("tiny",), problems=5, temperature=0.2, concurrency=1)
    stored = before.to_json()
    import json

    assert now.plan_changes(json.loads(stored)) == ["temperature"]  # more problems is fine
    assert "OPENAI_API_KEY" in stored and "sk-" not in stored  # the variable's name only


def test_the_docs_show_the_current_flags():
    from pathlib import Path

    from baselines.cli import config_table

    page = (Path(__file__).parents[3] / "docs" / "evaluate.md").read_text()
    assert config_table(EvalConfig) in page, (
        "docs/evaluate.md is out of date: paste `python -m baselines.cli "
        "baselines.eval.config:EvalConfig` into its Flags section"
    )


def test_task_kwargs_for_a_task_without_settings_name_the_fix():
    from baselines.eval.arenas import make_arena

    with pytest.raises(ValueError, match="task_kwargs are settings of the arithmetic task"):
        make_arena("debate", {}, "default", 0, {"max_digits": 1})
    with pytest.raises(ValueError, match="task_kwargs are settings of the arithmetic task"):
        make_arena("expert_iteration", {}, "gsm8k", 0, {"max_digits": 1})
