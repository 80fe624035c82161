"""The shipped accelerate configs (configs/accelerate/) run the trainer: DDP, FSDP on 2 CPUs."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")
yaml = pytest.importorskip("yaml")

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs" / "accelerate"
# accelerate applies FSDP to accelerator devices only; this launcher applies it on CPU.
ON_CPU = ROOT / "tests" / "baselines" / "accelerate_on_cpu.py"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("ddp.yaml", "MULTI_GPU"),
        ("fsdp.yaml", "FSDP"),
        ("deepspeed_zero2.yaml", "DEEPSPEED"),
        ("deepspeed_zero3.yaml", "DEEPSPEED"),
    ],
)
def test_every_config_reads_and_names_its_backend(name, kind):
    config = yaml.safe_load((CONFIGS / name).read_text())
    assert config["distributed_type"] == kind
    assert config["mixed_precision"] == "no"  # the trainers choose bf16 themselves
    assert config["num_machines"] == 1 and config["num_processes"] == 8


def launch(config: str, output: Path, iterations: int, *script: str) -> subprocess.CompletedProcess:
    target = list(script) or ["-m", "baselines.is_trainer"]
    command = [
        *("accelerate", "launch", "--config_file", str(CONFIGS / config)),
        *("--num_processes", "2", "--main_process_port", str(free_port())),
        *target,
        *("--model", "tiny", "--env", "debate"),
        *("--env-kwargs", '{"num_agents": 2, "max_rounds": 1}', "--device", "cpu"),
        *("--groups-per-batch", "3", "--num-iterations", str(iterations), "--max-tokens", "16"),
        *("--sampler", "transformers", "--learning-rate", "1e-3", "--eval-every", "2"),
        *("--eval-groups", "1", "--output-dir", str(output), "--no-progress"),
        *("--max-tokens-per-microbatch", "64"),
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)


def rows(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


@pytest.fixture
def tiny_cache(tmp_path_factory, tiny_model_dir, monkeypatch):
    # "tiny" resolves through LLM_ENVS_CACHE: point it at the session's tiny model.
    cache = tmp_path_factory.mktemp("cache")
    (cache / "tiny-qwen2-128-0").symlink_to(tiny_model_dir)
    monkeypatch.setenv("LLM_ENVS_CACHE", str(cache))


@pytest.mark.slow
@pytest.mark.training
@pytest.mark.usefixtures("tiny_cache")
def test_ddp_config_trains_on_two_processes(tmp_path):
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate command line is not on PATH")
    done = launch("ddp.yaml", tmp_path / "run", 2)
    assert done.returncode == 0, done.stderr[-4000:]
    lines = rows(tmp_path / "run")
    assert [r["iteration"] for r in lines] == [0, 1, 2]
    assert all(r["data/num_groups"] == 3 for r in lines[:2])  # both shares gathered
    assert all(r["optim/kl_sample_train_v2"] < 1e-6 for r in lines[:2])


@pytest.mark.slow
@pytest.mark.training
@pytest.mark.usefixtures("tiny_cache")
def test_fsdp_config_shards_gathers_for_the_sampler_and_resumes(tmp_path):
    """FSDP2 over gloo: the sampler's copy is refreshed from the gathered shards (on-policy)."""
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate command line is not on PATH")
    output = tmp_path / "run"
    done = launch("fsdp.yaml", output, 2, str(ON_CPU), "-m", "baselines.is_trainer")
    assert done.returncode == 0, done.stderr[-4000:]
    checkpoint = output / "checkpoints" / "iteration_000002"
    assert sorted(p.name for p in (checkpoint / "optimizer_0").glob("*.distcp")) == [
        "__0_0.distcp",
        "__1_0.distcp",
    ]  # one shard per process: the optimizer state really is sharded
    lines = rows(output)
    for row in lines[:2]:
        assert row["data/num_groups"] == 3
        # Sampled by each process's copy, refreshed from the gathered weights after
        # every step: the training forward pass agrees with the sampler.
        assert row["optim/kl_sample_train_v2"] < 1e-6
        assert row["time/refresh"] > 0
    assert (output / "final_model" / "model.safetensors").is_file()  # gathered, then saved

    resumed = launch("fsdp.yaml", output, 3, str(ON_CPU), "-m", "baselines.is_trainer")
    assert resumed.returncode == 0, resumed.stderr[-4000:]
    assert "starting at iteration 2" in resumed.stdout
    lines = rows(output)
    assert [r["iteration"] for r in lines] == [0, 1, 2, 3]
    assert lines[2]["optim/kl_sample_train_v2"] < 1e-6  # the resumed copy got the trained weights
