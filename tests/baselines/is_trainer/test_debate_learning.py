"""The trainer learns to debate: reinforcement learning makes SmolLM2 keep the answer format.

SmolLM2-135M-Instruct never writes the debate's five tags on its own. Two
supervised steps on a scripted debater (the warm start) leave it writing them
now and then; from there the debate's reward (a parse error costs -1 and ends
the debate) and the opt-in contract shaping (partial credit per tag written
right) must push the format up. This is the main job's earlier training
(``examples/debate_self_play.py`` with two rounds and a 2-step warm start,
seed 0; the main job now trains judging, from a 6-step warm start that
teaches the format before reinforcement learning starts) cut to 4 iterations
and without its evaluations, in the trainer's default precision (fp32 on a
CPU; docs/results.md has the three seeds of both settings); the measured
curve is in the test. In bf16 on one thread this run's
contract score went 0.63, 0.25, 0.69, 0.61: a curve that noisy cannot carry
an assertion over four iterations.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("transformers")


@pytest.mark.slow
@pytest.mark.training
def test_smollm2_learns_the_debate_format(tmp_path, smollm2_dir):
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import train

    config = ISTrainerConfig(
        model=str(smollm2_dir),
        env="debate",
        env_kwargs={
            "num_agents": 3,
            "max_rounds": 2,
            "shaping": {"contract": 0.5, "correct": 0.5},
        },
        task="arithmetic",
        task_kwargs={"max_digits": 1, "operations": ["+"]},
        groups_per_batch=12,
        num_iterations=4,
        max_tokens=128,
        learning_rate=5e-5,
        warm_start_steps=2,
        warm_start_groups=4,
        warm_start_datums=4,
        eval_every=0,
        save_every=0,
        output_dir=str(tmp_path / "run"),
        progress=False,
        # One thread: under pytest -n 2 another test shares the two cores, and vLLM's
        # threads bound to every core wait for each other (CI: 1392 s with the default).
        num_threads=1,
    )
    rows = [json.loads(line) for line in train(config).read_text().splitlines()]
    rows = [row for row in rows if "env/all/turn/parse_error" in row]
    errors = [row["env/all/turn/parse_error"] for row in rows]
    contract = [row["env/all/turn/shaping/contract"] for row in rows]
    print("parse errors per iteration:", [round(e, 3) for e in errors])
    print("contract score per iteration:", [round(c, 3) for c in contract])
    # Measured here: parse errors 0.80, 0.61, 0.46, 0.24 and contract score 0.47, 0.53,
    # 0.68, 0.84 (seeds 1 and 2 of the example move as clearly; a 2-agent, 1-round
    # debate moved by less than 0.1).
    assert len(rows) == 4
    assert np.mean(contract[-2:]) >= contract[0] + 0.1, contract
    assert np.mean(errors[-2:]) <= errors[0] - 0.1, errors
    for row in rows:  # sampled on-policy throughout
        assert row["optim/kl_sample_train_v2"] < 1e-4
