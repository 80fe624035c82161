"""The trainer under ``accelerate launch`` with two CPU processes (DDP over gloo)."""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys

import pytest

pytest.importorskip("torch")
pytest.importorskip("accelerate")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.slow
@pytest.mark.training
def test_two_processes_share_the_batch(tmp_path, tiny_model_dir):
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate command line is not on PATH")
    output = tmp_path / "run"
    command = [
        *("accelerate", "launch", "--multi_gpu", "--num_processes", "2", "--num_machines", "1"),
        *("--mixed_precision", "no", "--dynamo_backend", "no"),
        *("--main_process_port", str(free_port())),
        *("-m", "baselines.is_trainer", "--model", str(tiny_model_dir), "--env", "debate"),
        *("--env-kwargs", '{"num_agents": 2, "max_rounds": 1}', "--device", "cpu"),
        *("--groups-per-batch", "3", "--num-iterations", "2", "--max-tokens", "16"),
        *("--sampler", "transformers", "--learning-rate", "1e-3", "--eval-every", "2"),
        *("--eval-groups", "1", "--output-dir", str(output), "--no-progress"),
        # One Datum per microbatch: with 3 groups the processes get unequal
        # numbers of microbatches, and the lighter one must still join every all-reduce.
        *("--max-tokens-per-microbatch", "64"),
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([os.getcwd(), *sys.path])
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]

    rows = [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in rows] == [0, 1, 2]  # written once, by the main process
    for row in rows[:2]:
        assert row["data/num_groups"] == 3  # both shares gathered: 2 + 1 groups
        assert row["optim/kl_sample_train_v2"] < 1e-6  # each process sampled on-policy
        assert row["optim/num_steps"] == 1
    # Evaluation: one question, each role once, split over the two processes.
    assert rows[-1]["eval/num_episodes"] == 2
    assert (output / "final_model" / "config.json").is_file()
    assert (output / "checkpoints" / "iteration_000002" / "random_states_1.pkl").is_file()
