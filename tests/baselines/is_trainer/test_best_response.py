"""``llm-envs best-response``: the responder's command line, the bound, and a run end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.is_trainer.best_response import bound_of, main, trainer_argv
from baselines.league import Opponent, parse_anchor


def test_the_responder_meets_the_checkpoint_alone_with_lora_and_two_evaluations():
    argv = trainer_argv("runs/a/final_model", None, ["--env", "textarena", "--num-iterations", "3"])
    assert argv == [
        "--model",
        "runs/a/final_model",
        "--opponents",
        "league",
        "--league-matchmaking",
        "anchors",
        "--league-anchors",
        "target=model:runs/a/final_model",
        "--league-snapshot-every",
        "0",
        "--lora-r",
        "8",
        "--eval-every",
        "3",
        "--env",
        "textarena",
        "--num-iterations",
        "3",
    ]


def test_a_base_of_its_own_is_evaluated_against_the_checkpoint():
    argv = trainer_argv("ck", "smollm2-135m-instruct", ["--lora-r=4", "--eval-every", "2"])
    assert argv[:2] == ["--model", "smollm2-135m-instruct"]
    assert argv[argv.index("--eval-opponent") + 1] == "ck"
    assert "8" not in argv  # the user's LoRA rank and evaluation cadence stand
    assert argv.count("--eval-every") == 1
    assert "--num-iterations" not in argv  # the trainer's own default, as asked


def test_no_flags_give_four_iterations_evaluated_at_the_start_and_end():
    argv = trainer_argv("ck", None, [])
    assert argv[argv.index("--num-iterations") + 1] == "4"
    assert argv[argv.index("--eval-every") + 1] == "4"


@pytest.mark.parametrize(
    "flag", ["--model", "--opponents=mirror", "--league-anchors", "--league-matchmaking"]
)
def test_flags_the_command_sets_itself_are_refused(flag):
    with pytest.raises(ValueError, match="best-response sets these itself"):
        trainer_argv("ck", None, [flag, "x"])


@pytest.mark.parametrize(
    ("spec", "opponent"),
    [
        (
            "model:runs/a/final_model",
            Opponent("model:runs/a/final_model", "model", "runs/a/final_model"),
        ),
        ("target=model:/abs/ck", Opponent("target", "model", "/abs/ck")),
    ],
)
def test_model_anchor_specs(spec, opponent):
    assert parse_anchor(spec) == opponent


def test_an_empty_model_anchor_names_every_form():
    with pytest.raises(ValueError, match=r"\[NAME=\]model:FOLDER .* or \[NAME=\]http"):
        parse_anchor("model:")


@pytest.mark.parametrize(
    ("first", "last", "expected"),
    [
        # 10 games won, 4 lost, 2 drawn of 16: mean 0.375; variance 14/16 - 0.375^2 = 0.734375.
        (
            {"eval/game_reward": 0.0},
            {
                "eval/game_reward": 0.375,
                "eval/win": 0.625,
                "eval/loss": 0.25,
                "eval/draw": 0.125,
                "eval/num_episodes": 16,
            },
            (0.375, 0.375 - 1.96 * math.sqrt(0.734375 / 16), 16),
        ),
        # Every game lost: the bound is -1, the interval a point.
        (
            {"eval/game_reward": 0.0},
            {"eval/game_reward": -1.0, "eval/win": 0.0, "eval/loss": 1.0, "eval/num_episodes": 4},
            (-1.0, -1.0, 4),
        ),
    ],
)
def test_the_bound_and_its_interval_by_hand(first, last, expected):
    value, low, games = expected
    result = bound_of(first, last)
    assert result["lower_bound"] == value and result["games"] == games
    assert result["interval"][0] == pytest.approx(low)
    assert result["interval"][1] == pytest.approx(2 * value - low)


def test_a_payoff_other_than_win_or_loss_has_no_interval():
    # Kuhn Poker in chips: a mean of 0.75 chips is not win - loss.
    last = {"eval/game_reward": 0.75, "eval/win": 0.5, "eval/loss": 0.25, "eval/num_episodes": 8}
    assert "interval" not in bound_of({}, last)


@given(
    st.integers(0, 50),
    st.integers(0, 50),
    st.integers(0, 50),
)
def test_the_interval_holds_the_mean_within_the_payoffs(wins, losses, draws):
    games = wins + losses + draws
    if games == 0:
        return
    w, lo = wins / games, losses / games
    result = bound_of(
        {},
        {
            "eval/game_reward": w - lo,
            "eval/win": w,
            "eval/loss": lo,
            "eval/draw": draws / games,
            "eval/num_episodes": games,
        },
    )
    low, high = result["interval"]
    assert low <= w - lo <= high
    assert high - low <= 2 * 1.96 * math.sqrt(1 / games) + 1e-12  # the variance is at most 1


def test_a_missing_checkpoint_is_named_before_anything_loads(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["/nonexistent/final_model", "--env", "textarena"])
    assert exit_.value.code == 2
    assert "no model folder at '/nonexistent/final_model'" in capsys.readouterr().err


@pytest.mark.slow
@pytest.mark.training
def test_a_best_response_run_trains_against_the_frozen_checkpoint(tmp_path, tiny_model_dir, capsys):
    pytest.importorskip("peft")
    out = tmp_path / "br"
    main(
        [
            str(tiny_model_dir),
            "--env",
            "textarena",
            "--env-kwargs",
            '{"game": "TicTacToe-v0"}',
            "--num-iterations",
            "2",
            "--groups-per-batch",
            "2",
            "--league-group-size",
            "2",
            "--eval-groups",
            "2",
            "--max-tokens",
            "8",
            "--sampler",
            "transformers",
            "--learning-rate",
            "1e-3",
            "--output-dir",
            str(out),
            "--no-progress",
        ]
    )
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    met = {k for row in rows for k in row if k.startswith("league/mix/")}
    assert met == {"league/mix/target"}  # the checkpoint, and nothing else, in the other seat
    assert [r["iteration"] for r in rows if "eval/game_reward" in r] == [0, 2]
    result = json.loads((out / "best_response.json").read_text())
    assert result["budget"] == {
        "iterations": 2,
        "groups_per_batch": 2,
        "group_size": 2,
        "lora_r": 8,
        "base": str(tiny_model_dir),
    }
    assert -1.0 <= result["lower_bound"] <= 1.0
    assert result["before"] == 0.0  # the mirror match: each seat's win is the other's loss
    assert "the checkpoint's exploitability is at least that much" in capsys.readouterr().out
    assert Path(result["checkpoint"]) == tiny_model_dir


def test_a_model_anchor_without_its_folder_is_refused_before_the_model_loads(tmp_path):
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import ISTrainer

    config = ISTrainerConfig(
        model="/nonexistent/model",
        env="textarena",
        env_kwargs={"game": "TicTacToe-v0"},
        opponents="league",
        league_anchors=("target=model:/nonexistent/checkpoint",),
        output_dir=str(tmp_path / "run"),
        progress=False,
    )
    with pytest.raises(FileNotFoundError, match="no model folder at '/nonexistent/checkpoint'"):
        ISTrainer(config)
