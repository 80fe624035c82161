"""MAGRPO under ``accelerate launch``: DDP, FSDP and DeepSpeed configs on 2 CPU processes (gloo).

The runs use scripted completions (``scripted_magrpo.py``), so every layout
trains on the same data: two processes must give a single process's gradient
norms. Three training problems per iteration split 2 + 1 between the
processes, so the lighter one runs fewer microbatches (under FSDP, empty
passes) and still joins every reduction. The DeepSpeed tests are skipped
without ``deepspeed`` (``pip install "llm-envs[deepspeed]"``).
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
from types import SimpleNamespace

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("accelerate")

from accelerate.utils import DistributedType  # noqa: E402

from baselines.magrpo.processes import (  # noqa: E402
    AgentProcesses,
    _buckets,
    checkpoint_kind,
    process_layout,
)

ROOT = Path(__file__).resolve().parents[3]
CONFIGS = ROOT / "configs" / "accelerate"
ON_CPU = ROOT / "tests" / "baselines" / "accelerate_on_cpu.py"
SCRIPTED = Path(__file__).with_name("scripted_magrpo.py")
AGENTS = ("helper", "main")
LORA = ("--lora-r", "4", "--lora-alpha", "8")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def run(output: Path, iterations: int, *extra: str, config: str | None = None):
    """The scripted run: one process, or two under ``accelerate launch --config_file config``."""
    launcher = [sys.executable]
    if config is not None:
        launcher = [
            *("accelerate", "launch", "--config_file", str(CONFIGS / config)),
            *("--num_processes", "2", "--main_process_port", str(free_port()), str(ON_CPU)),
        ]
    command = [
        *launcher,
        str(SCRIPTED),
        *("--model", "tiny", "--device", "cpu", "--eval-problems", "1"),
        *("--problems-per-iteration", "3", "--group-size", "2", "--num-turns", "2"),
        *("--max-tokens", "8", "--num-iterations", str(iterations), "--learning-rate", "1e-3"),
        *("--eval-every", "2", "--temperature", "1.0", "--max-tokens-per-microbatch", "64"),
        *("--save-episodes", "3", "--output-dir", str(output), "--no-progress", *extra),
    ]
    env = {**os.environ, "CUDA_VISIBLE_DEVICES": "", "OMP_NUM_THREADS": "1"}
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), *sys.path])
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-4000:]
    return done


def rows(output: Path) -> list[dict]:
    return [json.loads(line) for line in (output / "metrics.jsonl").read_text().splitlines()]


def grad_norms(lines: list[dict]) -> list[float]:
    return [r[f"optim/{a}/grad_norm"] for r in lines if "optim/main/loss" in r for a in AGENTS]


def titles(output: Path) -> list[str]:
    episodes = (output / "episodes" / "iter_00000.jsonl").read_text().splitlines()
    return [json.loads(line)["title"] for line in episodes]


def final_weights(output: Path, agent: str, lora: bool) -> dict:
    from safetensors.torch import load_file

    name = "adapter_model.safetensors" if lora else "model.safetensors"
    return load_file(str(output / "final_model" / agent / name))


def weights_match(output: Path, reference: Path) -> None:
    """Each agent's final model, saved whole, is the one ``reference``'s run trained."""
    for agent in AGENTS:
        mine, theirs = final_weights(output, agent, False), final_weights(reference, agent, False)
        assert max(float((mine[k] - theirs[k]).abs().max()) for k in theirs) < 1e-4


def trains_like_one_process(lines: list[dict], alone: list[dict], steps: int) -> None:
    """The first ``steps`` iterations took one process's steps and sampled on-policy.

    The gradient norms are one process's; the logprob difference is near 0
    only if the model each agent samples with had the weights of every step.
    """
    assert grad_norms(lines) == pytest.approx(grad_norms(alone[:steps]), rel=1e-4)
    diffs = [r[f"optim/{a}/sample_train_logprob_diff"] for r in lines[:steps] for a in AGENTS]
    assert all(diff < 1e-5 for diff in diffs)


def resumes_like_one_process(output: Path, config: str, layout: str, alone: Path) -> None:
    """Resumed after 2 iterations for a third, the run matches the one process that never stopped.

    Iteration 2 needs the restored weights and AdamW state; each agent's
    sampling model must hold the checkpoint's weights; the final models,
    saved whole, are the ones one process trains.
    """
    resumed = run(output, 3, config=config)
    assert f"({layout}), starting at iteration 2" in resumed.stdout
    lines = rows(output)
    assert [r["iteration"] for r in lines] == [0, 1, 2, 3]
    assert grad_norms(lines) == pytest.approx(grad_norms(rows(alone)[:3]), rel=1e-4)
    assert all(lines[2][f"optim/{a}/sample_train_logprob_diff"] < 1e-5 for a in AGENTS)
    weights_match(output, alone)


@pytest.fixture(scope="module")
def tiny_cache(tmp_path_factory, tiny_model_dir):
    # "tiny" resolves through LLM_ENVS_CACHE: point it at the session's tiny model.
    cache = tmp_path_factory.mktemp("cache")
    (cache / "tiny-qwen2-128-0").symlink_to(tiny_model_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LLM_ENVS_CACHE", str(cache))
        yield


@pytest.fixture(scope="module")
def one_process(tiny_cache, tmp_path_factory):
    """The single-process runs the launched ones must match, 3 iterations: full models, LoRA."""
    full = tmp_path_factory.mktemp("one") / "run"
    run(full, 3)
    lora = tmp_path_factory.mktemp("one_lora") / "run"
    run(lora, 3, *LORA)
    return {"full": full, "lora": lora}


def need_accelerate_command() -> None:
    if shutil.which("accelerate") is None:
        pytest.skip("the accelerate command line is not on PATH")


@pytest.mark.slow
@pytest.mark.training
@pytest.mark.parametrize("weights", ["full", "lora"])
def test_ddp_config_averages_gradients_over_two_processes(tmp_path, one_process, weights):
    need_accelerate_command()
    lora = weights == "lora"
    output = tmp_path / "run"
    done = run(output, 3, *(LORA if lora else ()), config="ddp.yaml")
    assert "(replicated), starting at iteration 0" in done.stdout
    lines, alone = rows(output), rows(one_process[weights])
    assert [r["iteration"] for r in lines] == [0, 1, 2, 3]  # written once, by the main process
    for row in lines[:3]:
        assert row["optim/helper/completions"] == 18  # 3 trees x 3 nodes x G, both shares
        assert row["optim/helper/sample_train_logprob_diff"] < 1e-5
    assert lines[0]["eval/num_problems"] == 1
    # The same data as one process, the same step: the averaged gradient is the whole batch's.
    assert grad_norms(lines) == pytest.approx(grad_norms(alone), rel=1e-5)
    assert all(norm > 0 for norm in grad_norms(lines))
    # Every tree's transcript, gathered from both processes, in the order of its problem.
    assert titles(output) == titles(one_process[weights])
    assert len(titles(output)) == 3
    for agent in AGENTS:
        mine = final_weights(output, agent, lora)
        theirs = final_weights(one_process[weights], agent, lora)
        assert sorted(mine) == sorted(theirs)
        assert max(float((mine[k] - theirs[k]).abs().max()) for k in mine) < 1e-5
        assert (output / "checkpoints" / "iteration_000003" / agent / "optimizer.pt").is_file()


@pytest.mark.slow
@pytest.mark.training
def test_fsdp_config_shards_each_agent_refreshes_its_sampler_and_resumes(tmp_path, one_process):
    need_accelerate_command()
    output = tmp_path / "run"
    done = run(output, 2, config="fsdp.yaml")
    assert "(sharded), starting at iteration 0" in done.stdout
    checkpoint = output / "checkpoints" / "iteration_000002"
    for index in range(len(AGENTS)):  # each agent's weights and optimizer state, one shard each
        for part in (f"pytorch_model_fsdp_{index}", f"optimizer_{index}"):
            assert sorted(p.name for p in (checkpoint / part).glob("*.distcp")) == [
                "__0_0.distcp",
                "__1_0.distcp",
            ]
    alone = rows(one_process["full"])
    lines = rows(output)
    assert [r["iteration"] for r in lines] == [0, 1, 2]
    trains_like_one_process(lines, alone, 2)  # each agent samples with its refreshed copy
    for agent in AGENTS:  # gathered and saved whole, by the main process
        assert (output / "final_model" / agent / "config.json").is_file()

    resumes_like_one_process(output, "fsdp.yaml", "sharded", one_process["full"])


needs_deepspeed = pytest.mark.skipif(
    importlib.util.find_spec("deepspeed") is None, reason="deepspeed is not installed"
)


@needs_deepspeed
@pytest.mark.slow
@pytest.mark.training
def test_deepspeed_zero2_gives_each_agent_an_engine(tmp_path, one_process):
    need_accelerate_command()
    output = tmp_path / "run"
    done = run(output, 2, config="deepspeed_zero2.yaml")
    assert "(deepspeed), starting at iteration 0" in done.stdout
    # accelerate saves every engine it prepared: one per agent, in agent order.
    checkpoint = output / "checkpoints" / "iteration_000002"
    assert checkpoint_kind(checkpoint) == "deepspeed"
    assert (checkpoint / "pytorch_model_1").is_dir()
    lines, alone = rows(output), rows(one_process["full"])
    assert [r["iteration"] for r in lines] == [0, 1, 2]
    # Each agent's backward passes and step went through its own engine (accelerate's
    # backward drives only the first): the clipped steps are one process's. ZeRO-2 keeps
    # whole parameters: the trained model itself samples.
    trains_like_one_process(lines, alone, 2)


@needs_deepspeed
@pytest.mark.slow
@pytest.mark.training
def test_deepspeed_zero3_partitions_each_agent_refreshes_its_copy_and_resumes(
    tmp_path, one_process
):
    need_accelerate_command()
    output = tmp_path / "run"
    run(output, 2, config="deepspeed_zero3.yaml")
    lines, alone = rows(output), rows(one_process["full"])
    trains_like_one_process(lines, alone, 2)  # each copy refreshed from consolidated weights

    # Both engines' partitioned states restored.
    resumes_like_one_process(output, "deepspeed_zero3.yaml", "deepspeed", one_process["full"])


# ---------------------------------------------------------------- without launching


def accelerator(kind, num_processes: int = 2, zero_stage: int = 2) -> SimpleNamespace:
    deepspeed = {"zero_optimization": {"stage": zero_stage}}
    return SimpleNamespace(
        distributed_type=kind,
        process_index=0,
        num_processes=num_processes,
        device=torch.device("cpu"),
        is_main_process=True,
        state=SimpleNamespace(deepspeed_plugin=SimpleNamespace(deepspeed_config=deepspeed)),
    )


@pytest.mark.parametrize(
    ("kind", "layout"),
    [
        (DistributedType.NO, "single"),
        (DistributedType.MULTI_CPU, "replicated"),
        (DistributedType.MULTI_GPU, "replicated"),
        (DistributedType.FSDP, "sharded"),
        (DistributedType.DEEPSPEED, "deepspeed"),
    ],
)
def test_layout_follows_the_accelerate_config(kind, layout):
    assert process_layout(accelerator(kind)) == layout


def test_an_unsupported_backend_is_refused_with_the_configs_that_work():
    with pytest.raises(ValueError, match=r"MEGATRON_LM.*ddp\.yaml, fsdp\.yaml or deepspeed"):
        process_layout(accelerator(DistributedType.MEGATRON_LM))


@pytest.mark.parametrize(
    ("kind", "stage", "lockstep", "copies", "states"),
    [
        (DistributedType.NO, 2, False, False, False),
        (DistributedType.MULTI_CPU, 2, False, False, False),
        (DistributedType.FSDP, 2, True, True, True),
        (DistributedType.DEEPSPEED, 2, True, False, True),  # ZeRO-2: whole parameters
        (DistributedType.DEEPSPEED, 3, True, True, True),
    ],
)
def test_what_each_layout_asks_of_the_trainer(kind, stage, lockstep, copies, states):
    processes = AgentProcesses(accelerator(kind, zero_stage=stage), lora=False)
    assert processes.lockstep == lockstep
    assert processes.whole_copies == copies
    assert processes.accelerate_checkpoints == states


@pytest.mark.parametrize(
    ("kind", "backend"),
    [(DistributedType.FSDP, "FSDP"), (DistributedType.DEEPSPEED, "DeepSpeed")],
)
def test_lora_under_fsdp_or_deepspeed_is_refused(kind, backend):
    with pytest.raises(ValueError, match=rf"lora_r > 0 under {backend}.*ddp\.yaml"):
        AgentProcesses(accelerator(kind), lora=True)
    AgentProcesses(accelerator(DistributedType.MULTI_CPU), lora=True)  # DDP holds adapters whole


@pytest.mark.parametrize(
    ("kind", "files", "message"),
    [
        (DistributedType.FSDP, ["helper/optimizer.pt"], "from a run without FSDP"),
        (DistributedType.MULTI_CPU, ["pytorch_model_fsdp_0/__0_0.distcp"], "sharded state"),
        (DistributedType.NO, ["pytorch_model_fsdp_0/__0_0.distcp"], "fsdp.yaml"),
        (DistributedType.DEEPSPEED, ["helper/optimizer.pt"], "without FSDP or DeepSpeed"),
        (DistributedType.FSDP, ["pytorch_model/mp_rank_00_model_states.pt"], "DeepSpeed run"),
        (DistributedType.DEEPSPEED, ["pytorch_model_fsdp_0/__0_0.distcp"], "FSDP run"),
        (DistributedType.MULTI_CPU, ["pytorch_model/mp_rank_00_model_states.pt"], "DeepSpeed"),
    ],
)
def test_a_checkpoint_of_the_other_layout_is_refused(tmp_path, kind, files, message):
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    with pytest.raises(ValueError, match=message):
        AgentProcesses(accelerator(kind), lora=False).check_checkpoint(tmp_path)


@pytest.mark.parametrize(
    ("kind", "files"),
    [
        (DistributedType.MULTI_CPU, ["helper/optimizer.pt"]),
        (DistributedType.FSDP, ["pytorch_model_fsdp_0/__0_0.distcp"]),
        (DistributedType.DEEPSPEED, ["pytorch_model/mp_rank_00_model_states.pt"]),
    ],
)
def test_a_checkpoint_of_the_same_layout_resumes(tmp_path, kind, files):
    for name in files:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(b"")
    AgentProcesses(accelerator(kind), lora=False).check_checkpoint(tmp_path)


def test_processes_share_problems_round_robin():
    processes = AgentProcesses(accelerator(DistributedType.MULTI_CPU), lora=False)
    processes.rank = 1
    assert processes.share("abcde") == [(1, "b"), (3, "d")]
    assert processes.seed_key == (1,)
    assert AgentProcesses(accelerator(DistributedType.NO, 1), lora=False).seed_key == ()


def test_fewer_problems_than_processes_warns():
    with pytest.warns(UserWarning, match="problems_per_iteration=1 leaves 1 of 2 processes"):
        AgentProcesses(accelerator(DistributedType.MULTI_CPU), lora=False).check_share(1)


def test_gradient_buckets_keep_order_dtype_and_size(monkeypatch):
    import baselines.magrpo.processes as processes

    monkeypatch.setattr(processes, "_BUCKET_ELEMENTS", 10)
    tensors = [torch.zeros(4), torch.zeros(4), torch.zeros(4), torch.zeros(2, dtype=torch.float64)]
    tensors.append(torch.zeros(30))
    sizes = [[t.numel() for t in bucket] for bucket in _buckets(tensors)]
    assert sizes == [[4, 4], [4], [2], [30]]
