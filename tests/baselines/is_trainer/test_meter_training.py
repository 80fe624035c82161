"""The IS trainer logs the family's meter: the tiny model's Kuhn Poker exploitability."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from baselines.is_trainer.config import ISTrainerConfig
from tests.baselines.is_trainer.test_trainer import read_metrics

torch = pytest.importorskip("torch")

KUHN = {"game": "KuhnPoker-v0", "payoff": "chips", "game_kwargs": {"max_rounds": 1}}


def kuhn_config(tmp_path: Path, model: Path, **overrides: Any) -> ISTrainerConfig:
    settings = {
        "model": str(model),
        "env": "textarena",
        "env_kwargs": KUHN,
        "groups_per_batch": 2,
        "num_iterations": 1,
        "max_tokens": 6,
        "sampler": "transformers",
        "eval_every": 1,
        "eval_groups": 1,
        "eval_meter_samples": 3,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
    }
    return ISTrainerConfig(**{**settings, **overrides})


@pytest.mark.slow
@pytest.mark.training
def test_every_evaluation_logs_the_exploitability(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    rows = read_metrics(train(kuhn_config(tmp_path, tiny_model_dir)))
    evaluated = [r for r in rows if "eval/reward/total" in r]
    assert [r["iteration"] for r in evaluated] == [0, 1]  # before training, and the final one
    for row in evaluated:
        value, low, high = (row[f"eval/exploitability{s}"] for s in ("", "_low", "_high"))
        assert 0.0 <= low <= value <= high <= 2.0  # chips: a round pays at most 2
        assert 0.0 <= row["eval/exploitability_invalid"] <= 1.0
        assert "eval/exploitability_chips" in row


@pytest.mark.slow
@pytest.mark.training
def test_no_meter_with_zero_samples(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    config = kuhn_config(tmp_path, tiny_model_dir, eval_meter_samples=0, num_iterations=1)
    rows = read_metrics(train(config))
    assert not any(k.startswith("eval/exploitability") for r in rows for k in r)


@pytest.mark.slow
@pytest.mark.training
def test_a_warm_start_on_the_kuhn_teacher_runs(tmp_path, tiny_model_dir):
    from baselines.is_trainer.trainer import train

    config = kuhn_config(
        tmp_path, tiny_model_dir, eval_every=0, warm_start_steps=2, warm_start_groups=4
    )
    rows = read_metrics(train(config))
    warm = next(r for r in rows if "warm_start/loss_first" in r)
    # Every teacher move is a legal one: each game's two to three moves are imitated.
    assert warm["warm_start/datums"] >= 8 and warm["warm_start/steps"] == 2


@pytest.mark.slow
@pytest.mark.training
def test_zero_iterations_with_a_warm_start_save_the_warm_started_model(tmp_path, tiny_model_dir):
    from safetensors.torch import load_file

    from baselines.is_trainer.trainer import train

    config = kuhn_config(
        tmp_path, tiny_model_dir, num_iterations=0, warm_start_steps=2, warm_start_groups=4
    )
    rows = read_metrics(train(config))
    assert rows[0]["warm_start/steps"] == 2
    assert [r["iteration"] for r in rows if "eval/exploitability" in r] == [0]  # measured after
    before = load_file(str(tiny_model_dir / "model.safetensors"))
    after = load_file(str(Path(config.output_dir) / "final_model" / "model.safetensors"))
    assert any(not torch.equal(before[k], after[k]) for k in before)  # the warm start's weights
