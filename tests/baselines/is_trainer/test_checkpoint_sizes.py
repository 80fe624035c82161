"""Checkpoints keep the optimizer state in the newest alone; the older ones keep their weights."""

from __future__ import annotations

from pathlib import Path

import pytest

from baselines.training.checkpoints import drop_optimizer_state, writing_checkpoint

# What each saver writes (accelerate, FSDP, DeepSpeed, MAGRPO): (path, holds optimizer state).
FILES = [
    ("model.safetensors", False),
    ("optimizer.bin", True),
    ("optimizer_0/__0_0.distcp", True),
    ("pytorch_model/mp_rank_00_model_states.pt", False),
    ("pytorch_model/bf16_zero_pp_rank_0_mp_rank_00_optim_states.pt", True),
    ("main/model.safetensors", False),
    ("main/optimizer.pt", True),
    ("random_states_0.pkl", False),
]


def _write(folder: Path) -> None:
    for name, _ in FILES:
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(b"x" * 10)


def _kept(checkpoint: Path) -> set[str]:
    return {str(p.relative_to(checkpoint)) for p in checkpoint.rglob("*") if p.is_file()}


WEIGHTS = {name for name, optimizer in FILES if not optimizer}


@pytest.mark.parametrize("older_optimizer_states", [False, True])
def test_only_the_newest_checkpoint_keeps_the_optimizer_state(tmp_path, older_optimizer_states):
    for iteration in (1, 2, 3):
        with writing_checkpoint(
            tmp_path, iteration, keep=2, older_optimizer_states=older_optimizer_states
        ) as folder:
            _write(folder)
    root = tmp_path / "checkpoints"
    assert sorted(p.name for p in root.iterdir()) == ["iteration_000002", "iteration_000003"]
    assert _kept(root / "iteration_000003") == {n for n, _ in FILES} | {"trainer_state.json"}
    older = _kept(root / "iteration_000002")
    every = {n for n, _ in FILES} | {"trainer_state.json"}
    assert older == (every if older_optimizer_states else WEIGHTS | {"trainer_state.json"})


def test_dropping_the_optimizer_state_counts_the_bytes_freed(tmp_path):
    _write(tmp_path)
    assert drop_optimizer_state(tmp_path) == 10 * sum(o for _, o in FILES)
    assert _kept(tmp_path) == WEIGHTS
    assert drop_optimizer_state(tmp_path) == 0
