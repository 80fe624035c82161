"""TRL's GRPO learns through our rollout: SmolLM2-135M-Instruct gets better at one-digit sums.

The same task as the importance-sampling trainer's learning test: expert
iteration's ``iid`` strategy on "What is 3 + 5?" with a 32-token budget. The
initial model often explains at length and runs out of tokens before its
boxed answer; the reward (1 for a correct final answer) teaches it to answer
briefly, through ``baselines.grpo``'s rollout function and TRL's own step.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("trl")


@pytest.mark.slow
@pytest.mark.training
def test_smollm2_reward_rises_on_short_sums(tmp_path, smollm2_dir):
    from baselines.grpo.run import main

    output = tmp_path / "run"
    main(
        [
            "--model", str(smollm2_dir),
            "--env", "expert_iteration",
            "--task", "arithmetic",
            "--task-kwargs", json.dumps({"max_digits": 1, "operations": ["+"]}),
            "--strategy", "iid",
            "--num-generations", "4",
            "--items-per-step", "8",
            "--max-steps", "4",
            "--max-tokens", "32",
            "--learning-rate", "5e-5",
            "--no-save-model",
            "--output-dir", str(output),
        ]
    )  # fmt: skip
    rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    rewards = [row["reward"] for row in rows if "reward" in row]
    lengths = [row["completions/mean_length"] for row in rows if "reward" in row]
    print("mean reward per step:", [round(r, 3) for r in rewards], "lengths:", lengths)
    # Measured (4 steps; seed 0 is this test's): seed 0 rewards 0.25, 0.375, 0.625, 0.719 and
    # lengths 25.5 -> 12.4; seed 1 0.312 -> 0.688, 19.7 -> 10.1; seed 2 0.188 -> 0.625,
    # 23.6 -> 11.1: the last two steps clear the first by 0.15 + 0.27, 0.18 and 0.32.
    assert len(rewards) == 4
    assert np.mean(rewards[-2:]) >= rewards[0] + 0.15, rewards
    # Shorter answers are how it gets there.
    assert np.mean(lengths[-2:]) < lengths[0], lengths
