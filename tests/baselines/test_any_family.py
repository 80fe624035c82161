"""A family ``baselines`` never names: TextArena through the trainers, evaluator and report.

``baselines`` never mentions TextArena (the first test checks it): these tests
take the family by its registered name only, as a user's new family would be.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

pytest.importorskip("textarena")

ROOT = Path(__file__).resolve().parents[2]
TICTACTOE = {"game": "TicTacToe-v0", "max_turns": 12}


def test_baselines_never_names_the_family():
    mentions = [
        str(path.relative_to(ROOT))
        for path in sorted((ROOT / "baselines").rglob("*.py"))
        if "textarena" in path.read_text().lower()
    ]
    assert mentions == []


def test_the_evaluator_and_the_report_take_it(tmp_path):
    from baselines.eval.config import EvalConfig
    from baselines.eval.run import Evaluation
    from baselines.report import write_report
    from baselines.samplers.scripted import ScriptedPolicy
    from llm_envs.textarena.players import random_player

    config = EvalConfig(
        models=("reference", "random"),
        env="textarena",
        env_kwargs=TICTACTOE,
        problems=6,
        num_bootstrap=100,
        output_dir=str(tmp_path / "eval"),
        progress=False,
    )
    players = {
        a: random_player("TicTacToe-v0", seed=i) for i, a in enumerate(["agent_0", "agent_1"])
    }
    summary = Evaluation(config, policies={"random": ScriptedPolicy(players)}).run()
    assert summary.headline == ("win", "draw", "loss", "invalid_moves")
    # The reference is minimax: it never loses to random moves, in either seat.
    reference, rnd = summary.score("reference"), summary.score("random")
    assert reference.metrics["loss"] == 0.0 and reference.metrics["win"] > 0.5
    assert rnd.metrics["win"] == 0.0
    page = write_report(tmp_path / "eval").read_text()
    assert "reference" in page and "win" in page


@pytest.mark.slow
@pytest.mark.training
def test_the_importance_sampling_trainer_takes_it_and_the_report_reads_its_rewards(
    tmp_path, tiny_model_dir
):
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import train
    from baselines.report import write_report
    from baselines.report.rewards import episode_rewards

    config = ISTrainerConfig(
        model=str(tiny_model_dir),
        env="textarena",
        env_kwargs=TICTACTOE,
        groups_per_batch=2,
        num_iterations=2,
        max_tokens=8,
        learning_rate=1e-3,
        sampler="transformers",
        eval_every=1,
        eval_groups=1,
        output_dir=str(tmp_path / "run"),
        progress=False,
    )
    metrics = [json.loads(line) for line in Path(train(config)).read_text().splitlines()]
    trained = [m for m in metrics if "optim/num_steps" in m]
    assert [m["iteration"] for m in trained] == [0, 1]
    assert all(m["optim/num_steps"] >= 1 and m["data/num_groups"] == 2 for m in trained)
    # The game's own outcomes are the metrics; evaluation played the trained seat vs the opponent.
    assert all(m["env/all/win"] + m["env/all/draw"] + m["env/all/loss"] > 0 for m in trained)
    assert "eval/win" in metrics[-1] and "eval/opponent/win" in metrics[-1]
    records = [
        json.loads(line)
        for path in sorted((tmp_path / "run" / "episodes").glob("*.jsonl"))
        for line in path.read_text().splitlines()
    ]
    assert records
    rewards = episode_rewards(records[0], config.env_kwargs)
    assert rewards is not None and set(rewards.total) <= {"agent_0", "agent_1"}
    assert write_report(tmp_path / "run").exists()


@pytest.mark.slow
@pytest.mark.training
def test_trl_grpo_takes_it(tmp_path, tiny_model_dir):
    from baselines.grpo.config import GRPORunConfig
    from baselines.grpo.run import build_trainer

    cfg = GRPORunConfig(
        model=str(tiny_model_dir),
        env="textarena",
        env_kwargs=TICTACTOE,
        max_steps=1,
        items_per_step=1,
        max_tokens=8,
        device="cpu",
        vllm="off",
        save_model=False,
        save_episodes=2,
        output_dir=str(tmp_path / "grpo"),
    )
    trainer = build_trainer(cfg)
    assert trainer.args.num_generations == 2  # one game, its two players
    trainer.train()
    logged = [json.loads(x) for x in (tmp_path / "grpo" / "metrics.jsonl").read_text().splitlines()]
    assert any("env/invalid_moves" in row for row in logged), logged
    assert list((tmp_path / "grpo" / "episodes").glob("step_*.jsonl"))
