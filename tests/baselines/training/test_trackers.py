"""--report-to: TensorBoard's event files and W&B's offline run hold what metrics.jsonl holds."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import pytest

from baselines.training.trackers import numeric_metrics, require_tracker, tracker_config


def test_a_missing_tracker_names_its_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "wandb" else real(name, *a)
    )
    with pytest.raises(
        ImportError,
        match=r'report_to=\'wandb\' needs the wandb package: pip install "llm-envs\[wandb\]"',
    ):
        require_tracker("wandb")


def test_config_and_metrics_become_what_trackers_take():
    assert tracker_config({"a": True, "b": [1, 2], "c": None}) == {
        "a": True,
        "b": "[1, 2]",
        "c": "None",
    }
    assert numeric_metrics({"iteration": 1, "x": 2, "flag": True, "inf": float("inf")}) == {
        "x": 2.0
    }


def test_every_trainer_takes_the_same_names():
    from baselines.cli import parse_config
    from baselines.grpo.config import GRPORunConfig
    from baselines.grpo.run import grpo_config_kwargs
    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.magrpo.config import MAGRPOConfig

    for config_type in (ISTrainerConfig, MAGRPOConfig, GRPORunConfig):
        assert parse_config(config_type, ["--report-to", "tensorboard"]).report_to == "tensorboard"
    with pytest.raises(SystemExit):
        parse_config(ISTrainerConfig, ["--report-to", "mlflow"])
    kwargs = grpo_config_kwargs(GRPORunConfig(report_to="wandb", output_dir="runs/x"), 3, gpu=False)
    assert (kwargs["report_to"], kwargs["project"], kwargs["run_name"]) == (
        "wandb",
        "llm-envs",
        "x",
    )


def rows(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.training
def test_is_trainer_tensorboard_events_read_back(tmp_path, tiny_model_dir):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    from baselines.is_trainer.config import ISTrainerConfig
    from baselines.is_trainer.trainer import ISTrainer

    output = tmp_path / "run"
    config = ISTrainerConfig(
        model=str(tiny_model_dir),
        env_kwargs={"num_agents": 2, "max_rounds": 1},
        groups_per_batch=2,
        num_iterations=2,
        max_tokens=8,
        sampler="transformers",
        eval_every=0,
        output_dir=str(output),
        progress=False,
        report_to="tensorboard",
    )
    ISTrainer(config).run()
    events = EventAccumulator(str(output / "tensorboard"))
    events.Reload()
    logged = rows(output)  # metrics.jsonl is written as always
    for key in ("optim/loss", "env/all/reward/total", "time/iteration"):
        scalars = events.Scalars(key)
        assert [s.step for s in scalars] == [0, 1]
        assert [s.value for s in scalars] == pytest.approx([r[key] for r in logged])


def wandb_history(run_file: Path, key: str) -> list[float]:
    """The values of ``key`` in an offline W&B run file.

    The file is a log of protobuf records; an item of a history or summary
    record is its key, then field 16 (``value_json``): tag ``0x82 0x01``, a
    one-byte length, the JSON text. Reading it so needs no W&B account or server.
    """
    data = run_file.read_bytes()
    pattern = re.escape(key.encode()) + rb"\x82\x01(.)"
    values = []
    for match in re.finditer(pattern, data, flags=re.DOTALL):
        start = match.end()
        values.append(float(json.loads(data[start : start + match.group(1)[0]])))
    return values


@pytest.mark.slow
@pytest.mark.training
def test_magrpo_logs_to_wandb_offline(tmp_path, tiny_model_dir, monkeypatch):
    pytest.importorskip("wandb")
    from baselines.magrpo.config import MAGRPOConfig
    from baselines.magrpo.trainer import MAGRPOTrainer

    monkeypatch.setenv("WANDB_MODE", "offline")
    monkeypatch.setenv("WANDB_SILENT", "true")
    output = tmp_path / "run"
    config = MAGRPOConfig(
        model=str(tiny_model_dir),
        task_kwargs={"num_problems": 3},
        eval_problems=1,
        num_turns=1,
        env_kwargs={"num_turns": 1},
        max_tokens=6,
        num_iterations=2,
        eval_every=0,
        output_dir=str(output),
        progress=False,
        device="cpu",
        report_to="wandb",
        project="llm-envs-tests",
    )
    MAGRPOTrainer(config).run()
    import wandb

    # The run has finished, but W&B's service process writes the offline file on
    # its own time (a loaded machine read only its 8-byte header): end it first.
    wandb.teardown()
    (run_file,) = output.glob("wandb/offline-run-*/run-*.wandb")
    data = run_file.read_bytes()
    assert b"llm-envs-tests" in data and b"group_size" in data  # project, config
    logged = rows(output)
    for key in ("optim/main/completions", "env/turn_1/reward", "time/sample"):
        # Each value appears in the step's history record and in the run's summary.
        found = {round(v, 9) for v in wandb_history(run_file, key)}
        assert found == {round(r[key], 9) for r in logged}, key
