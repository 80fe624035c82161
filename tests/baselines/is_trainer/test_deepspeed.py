"""The importance-sampling trainer under DeepSpeed ZeRO on 2 CPU processes (gloo).

Skipped without ``deepspeed`` (``pip install deepspeed``; DeepSpeed's CPU
accelerator falls back to gloo when Intel's oneCCL bindings are missing, and
builds its shared-memory op with the C++ compiler the first time, about
100 s on 2 cores). ``accelerate`` turns DeepSpeed on for accelerator devices
only, so the trainer runs through ``tests/baselines/accelerate_on_cpu.py``.

Sampling is near-greedy (temperature 1e-4), so each group's episodes do not
depend on which process plays them and two processes train on one process's
data: the gradient norms must agree. Microbatches of 64 tokens make every
optimizer step several backward passes, which DeepSpeed must accumulate into
one step (:func:`baselines.training.run.accumulating`).
"""

from __future__ import annotations

import importlib.util
import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytestmark = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"
)

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs" / "accelerate"
ON_CPU = ROOT / "tests" / "baselines" / "accelerate_on_cpu.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(model: Path, output: Path, iterations: int, config: str | None = None):
    """The trainer alone, or on two processes under ``accelerate launch --config_file config``."""
    launcher = [sys.executable]
    if config is not None:
        launcher = [
            *("accelerate", "launch", "--config_file", str(CONFIGS / config)),
            *("--num_processes", "2", "--main_process_port", str(free_port()), str(ON_CPU)),
        ]
    command = [
        *launcher,
        *("-m", "baselines.is_trainer", "--model", str(model), "--env", "debate"),
        *("--env-kwargs", '{"num_agents": 2, "max_rounds": 1}', "--device", "cpu"),
        *("--groups-per-batch", "3", "--num-iterations", str(iterations), "--max-tokens", "16"),
        *("--sampler", "transformers", "--temperature", "1e-4", "--learning-rate", "1e-3"),
        *("--eval-every", "0", "--max-tokens-per-microbatch", "64"),
        *("--output-dir", str(output), "--no-progress"),
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def metric(output: Path, name: str) -> list[float]:
    lines = (output / "metrics.jsonl").read_text().splitlines()
    return [json.loads(line)[name] for line in lines]


def grad_norms(output: Path) -> list[float]:
    return metric(output, "optim/grad_norm")


@pytest.fixture(scope="module")
def one_process(tiny_model_dir, tmp_path_factory) -> Path:
    output = tmp_path_factory.mktemp("one") / "run"
    run(tiny_model_dir, output, 3)
    return output


def need_accelerate_command() -> None:
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate command line is not on PATH")


@pytest.mark.slow
@pytest.mark.training
def test_zero2_takes_one_step_per_chunk(tmp_path, tiny_model_dir, one_process):
    need_accelerate_command()
    output = tmp_path / "run"
    run(tiny_model_dir, output, 2, "deepspeed_zero2.yaml")
    reference = grad_norms(one_process)
    # Several microbatches per step, one DeepSpeed step: the one-process gradient.
    assert grad_norms(output) == pytest.approx(reference[:2], rel=1e-4)
    states = output / "checkpoints" / "iteration_000002" / "pytorch_model"
    assert sorted(p.name for p in states.glob("zero_pp_rank_*_optim_states.pt")) == [
        "zero_pp_rank_0_mp_rank_00_optim_states.pt",
        "zero_pp_rank_1_mp_rank_00_optim_states.pt",
    ]  # the optimizer state is partitioned: one part per process
    assert (output / "final_model" / "model.safetensors").is_file()
    # Resuming is test_zero3's: the same load_state, of a partitioned state.


@pytest.mark.slow
@pytest.mark.training
def test_zero3_trains_like_one_process(tmp_path, tiny_model_dir, one_process):
    # Parameters partitioned after prepare(); the probe and the sampler's copy load whole.
    need_accelerate_command()
    output = tmp_path / "run"
    done = run(tiny_model_dir, output, 2, "deepspeed_zero3.yaml")
    assert "packing probe" in done.stdout  # ran on the whole model, before prepare()
    assert grad_norms(output) == pytest.approx(grad_norms(one_process)[:2], rel=1e-4)
    # The sampler's copy gets the gathered weights after every step: it samples what
    # one process samples (near-greedy sampling keeps the KL itself far from 0).
    assert metric(output, "optim/kl_sample_train_v2") == pytest.approx(
        metric(one_process, "optim/kl_sample_train_v2")[:2], rel=1e-6
    )
    assert (output / "final_model" / "model.safetensors").is_file()

    resumed = run(tiny_model_dir, output, 3, "deepspeed_zero3.yaml")
    assert "starting at iteration 2" in resumed.stdout
    # The partitioned state restored, the sampler's copy refreshed from it.
    assert grad_norms(output) == pytest.approx(grad_norms(one_process), rel=1e-4)
    assert metric(output, "optim/kl_sample_train_v2") == pytest.approx(
        metric(one_process, "optim/kl_sample_train_v2"), rel=1e-6
    )
