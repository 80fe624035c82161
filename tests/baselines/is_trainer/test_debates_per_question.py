"""The IS trainer plays ``debates_per_question`` debates of each question in a group."""

from __future__ import annotations

import json

import pytest


@pytest.mark.slow
@pytest.mark.training
def test_the_trainer_plays_the_debates_of_each_question(tmp_path, tiny_model_dir):
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import train

    config = ISTrainerConfig(
        model=str(tiny_model_dir),
        env="debate",
        env_kwargs={"num_agents": 3, "max_rounds": 1},
        task="arithmetic",
        debates_per_question=2,
        groups_per_batch=2,
        num_iterations=1,
        max_tokens=8,
        sampler="transformers",
        eval_every=0,
        save_episodes=8,
        output_dir=str(tmp_path / "run"),
        progress=False,
    )
    train(config)
    saved = (tmp_path / "run" / "episodes" / "iter_00000.jsonl").read_text().splitlines()
    titles = [json.loads(line)["title"] for line in saved]
    assert len(titles) == 4 and titles[0] == titles[1] != titles[2] == titles[3]
