"""The IS trainer logs debate's majority vote of independent answers beside each evaluation."""

from __future__ import annotations

import pytest

from baselines.is_trainer.config import ISTrainerConfig
from tests.baselines.is_trainer.test_trainer import read_metrics

torch = pytest.importorskip("torch")

MAJORITY = ("eval/majority_vote/correct", "eval/single_answer/correct")


def sums_config(tmp_path, model, **overrides):
    settings = {
        "model": str(model),
        "env": "debate",
        "env_kwargs": {"num_agents": 3, "max_rounds": 1},
        "task": "arithmetic",
        "task_kwargs": {"max_digits": 1, "operations": ["+"]},
        "groups_per_batch": 1,
        "num_iterations": 1,
        "max_tokens": 8,
        "sampler": "transformers",
        "eval_every": 1,
        "eval_groups": 2,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
    }
    return ISTrainerConfig(**{**settings, **overrides})


@pytest.mark.slow
@pytest.mark.training
def test_every_debate_evaluation_logs_the_majority_vote(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    rows = read_metrics(train(sums_config(tmp_path, tiny_model_dir)))
    evaluated = [r for r in rows if "eval/reward/total" in r]
    assert [r["iteration"] for r in evaluated] == [0, 1]  # before training, and the final one
    for row in evaluated:
        assert all(0.0 <= row[name] <= 1.0 for name in MAJORITY)
        assert "eval/solution_correct" in row  # the debate's own, beside it


@pytest.mark.slow
@pytest.mark.training
def test_players_that_know_the_answers_win_every_majority_vote(tmp_path, tiny_model_dir):
    from baselines.is_trainer.evaluation import answered_alone
    from baselines.is_trainer.trainer import ISTrainer
    from baselines.samplers.scripted import ScriptedPolicy

    config = sums_config(tmp_path, tiny_model_dir)
    trainer = ISTrainer(config)
    family, learner = trainer.family, trainer.learner
    knowing = ScriptedPolicy(family.reference_players(), learner.tokenizer)
    found = answered_alone(learner, family, config.evaluation, knowing)
    assert found == {name: 1.0 for name in MAJORITY}
    # No evaluation questions: nothing to vote on.
    none = type(config.evaluation)(groups=0)
    assert answered_alone(learner, family, none, knowing) == {}
    trainer.finish()
