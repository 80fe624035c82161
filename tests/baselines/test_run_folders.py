"""A run folder belongs to one run: a trainer refuses another run's folder, losing nothing.

The mistakes of a first week: a trainer started in another trainer's folder,
or in its own with another model or environment. Each fails before a model is
loaded, with a message that names the fix, and leaves the folder as it was.
"""

from __future__ import annotations

import json

import pytest

pytest.importorskip("torch")

from baselines.run_directory import RunDirectory, RunFolderError


def earlier_run(path, trainer, settings):
    """A folder as a finished run of ``trainer`` leaves it (settings, metrics, a checkpoint)."""
    run = RunDirectory(path)
    run.claim(trainer, json.dumps(settings))
    run.start(json.dumps(settings))
    run.log({"iteration": 0, "reward": 0.5})
    (path / "checkpoints" / "iteration_000001").mkdir(parents=True)
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()}


def untouched(path, before):
    return {p: p.read_bytes() for p in path.rglob("*") if p.is_file()} == before


def is_config(path, **overrides):
    from baselines.is_trainer.config import ISTrainerConfig

    settings = {"output_dir": str(path), "model": "tiny", "progress": False}
    return ISTrainerConfig(**{**settings, **overrides})


def test_the_is_trainer_refuses_a_grpo_folder(tmp_path):
    from baselines.grpo.config import GRPORunConfig
    from baselines.is_trainer.trainer import ISTrainer

    before = earlier_run(tmp_path, "grpo", json.loads(GRPORunConfig(output_dir=".").to_json()))
    with pytest.raises(RunFolderError, match=r"a run of grpo, not is_trainer.*--overwrite"):
        ISTrainer(is_config(tmp_path))
    assert untouched(tmp_path, before)  # metrics.jsonl was truncated to 0 bytes before


@pytest.mark.parametrize(
    ("change", "message"),
    [({"model": "smollm2-135m-instruct"}, "model='tiny'"), ({"env": "expert_iteration"}, "env=")],
)
def test_the_is_trainer_refuses_its_own_folder_with_another_model_or_env(tmp_path, change, message):
    from baselines.is_trainer.trainer import ISTrainer

    before = earlier_run(tmp_path, "is_trainer", json.loads(is_config(tmp_path).to_json()))
    with pytest.raises(RunFolderError, match=message):
        ISTrainer(is_config(tmp_path, **change))
    assert untouched(tmp_path, before)


def test_grpo_refuses_an_is_trainer_folder(tmp_path):
    from baselines.grpo.config import GRPORunConfig
    from baselines.grpo.run import build_trainer

    before = earlier_run(tmp_path, "is_trainer", json.loads(is_config(tmp_path).to_json()))
    with pytest.raises(RunFolderError, match="a run of is_trainer, not grpo"):
        build_trainer(GRPORunConfig(output_dir=str(tmp_path), model="tiny", device="cpu"))
    assert untouched(tmp_path, before)  # its config.json and metrics.jsonl were replaced before


def test_magrpo_refuses_an_is_trainer_folder(tmp_path):
    from baselines.magrpo.config import MAGRPOConfig
    from baselines.magrpo.trainer import MAGRPOTrainer

    before = earlier_run(tmp_path, "is_trainer", json.loads(is_config(tmp_path).to_json()))
    with pytest.raises(RunFolderError, match="a run of is_trainer, not magrpo"):
        MAGRPOTrainer(MAGRPOConfig(output_dir=str(tmp_path), model="tiny", device="cpu"))
    assert untouched(tmp_path, before)


def test_the_command_line_says_it_in_one_line(tmp_path, capsys):
    from baselines.is_trainer.trainer import main

    earlier_run(tmp_path, "grpo", {"model": "tiny", "env": "debate"})
    with pytest.raises(SystemExit) as exit_info:
        main(["--output-dir", str(tmp_path), "--model", "tiny"])
    assert exit_info.value.code != 0
    err = capsys.readouterr().err
    assert "holds a run of grpo" in err and "Traceback" not in err
