"""LoRA in every trainer: merged weights, adapters saved and loaded, runs that resume."""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")
pytest.importorskip("peft")

from baselines.training import lora  # noqa: E402

LORA = {"lora_r": 4, "lora_alpha": 8.0}


class Settings:
    def __init__(self, r=4, alpha=8.0, modules="all-linear"):
        from baselines.magrpo.config import MAGRPOConfig

        config = MAGRPOConfig(lora_r=r, lora_alpha=alpha, lora_target_modules=modules)
        self.lora_r, self.lora_alpha = config.lora_r, config.lora_alpha
        self.lora_target_modules, self.lora_modules = modules, config.lora_modules


def base_model(tiny_model_dir):
    from transformers import AutoModelForCausalLM

    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)


def randomize_adapters(model):
    with torch.no_grad():
        for name, p in model.named_parameters():
            if "lora_" in name:
                p.copy_(torch.randn_like(p) * 0.1)


def test_without_peft_the_error_names_the_extra(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "peft" else real(name, *a)
    )
    lora.require_peft(0)  # full fine-tuning needs nothing
    with pytest.raises(
        ImportError, match=r'lora_r=8 needs the peft package: pip install "llm-envs\[peft\]"'
    ):
        lora.require_peft(8)


@pytest.mark.parametrize(
    "modules",
    ["q_proj,,v_proj", "", " , "],
)
def test_config_rejects_empty_module_names(modules):
    from baselines.magrpo.config import MAGRPOConfig

    with pytest.raises(
        ValueError, match="lora_target_modules must be 'all-linear' or module names"
    ):
        MAGRPOConfig(lora_r=4, lora_target_modules=modules)


@pytest.mark.slow
def test_merged_weights_equal_peft_merge_under_the_base_names(tiny_model_dir):
    model = lora.add_lora(base_model(tiny_model_dir), Settings(modules="q_proj,v_proj"))
    randomize_adapters(model)
    merged = lora.merged_weights(model)
    reference = model.merge_and_unload().state_dict()
    assert sorted(merged) == sorted(reference)
    for name, tensor in reference.items():
        torch.testing.assert_close(merged[name], tensor, atol=1e-6, rtol=0)
    assert any(
        not torch.equal(merged[n], base_model(tiny_model_dir).state_dict()[n]) for n in merged
    )


@pytest.mark.slow
def test_adapters_share_one_base_and_round_trip_through_peft_files(tiny_model_dir, tmp_path):
    model = lora.add_lora(base_model(tiny_model_dir), Settings(), adapters=("helper", "main"))
    helper, main = lora.adapter_parameters(model, "helper"), lora.adapter_parameters(model, "main")
    assert not {id(p) for p in helper} & {id(p) for p in main}
    randomize_adapters(model)
    lora.save_adapter(model, tmp_path / "main", "main")
    assert {p.name for p in (tmp_path / "main").iterdir()} == {
        "adapter_model.safetensors",
        "adapter_config.json",
    }
    fresh = lora.add_lora(base_model(tiny_model_dir), Settings(), adapters=("helper", "main"))
    lora.load_adapter(fresh, tmp_path / "main", "main")
    for a, b in zip(lora.adapter_parameters(fresh, "main"), main, strict=True):
        assert torch.equal(a, b)
    with pytest.raises(FileNotFoundError, match="holds no LoRA adapter"):
        lora.load_adapter(fresh, tmp_path, "main")
    with pytest.raises(ValueError, match="lora_target_modules='nope'"):
        lora.add_lora(base_model(tiny_model_dir), Settings(modules="nope"))


def is_config(tmp_path, tiny_model_dir, **overrides):
    from baselines.is_trainer.config import ISTrainerConfig

    settings = {
        "model": str(tiny_model_dir),
        "env": "debate",
        "env_kwargs": {"num_agents": 2, "max_rounds": 1},
        "groups_per_batch": 2,
        "num_iterations": 2,
        "max_tokens": 16,
        "learning_rate": 1e-2,
        "sampler": "transformers",
        "eval_every": 0,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
        **LORA,
    }
    return ISTrainerConfig(**{**settings, **overrides})


def metrics(path: Path) -> list[dict]:
    return [json.loads(line) for line in (path / "metrics.jsonl").read_text().splitlines()]


@pytest.mark.slow
@pytest.mark.training
def test_is_trainer_trains_the_adapter_only_and_resumes_from_it(tmp_path, tiny_model_dir):
    from peft import PeftModel

    from baselines.is_trainer.trainer import ISTrainer

    trainer = ISTrainer(is_config(tmp_path, tiny_model_dir))
    frozen = {
        n: p.clone() for n, p in trainer.learner.unwrapped.named_parameters() if "lora_" not in n
    }
    trainer.run()
    after = dict(trainer.learner.unwrapped.named_parameters())
    assert all(torch.equal(frozen[n], after[n]) for n in frozen)  # the base never moves
    checkpoint = tmp_path / "run" / "checkpoints" / "iteration_000002"
    assert (checkpoint / "adapter" / "adapter_model.safetensors").is_file()
    assert not (checkpoint / "model.safetensors").exists()  # no copy of the frozen base
    trained = {n: p.detach().clone() for n, p in after.items() if "lora_" in n}

    resumed = ISTrainer(is_config(tmp_path, tiny_model_dir, num_iterations=3))
    assert resumed.start_iteration == 2
    restored = dict(resumed.learner.unwrapped.named_parameters())
    assert all(torch.equal(restored[n], trained[n]) for n in trained)
    resumed.run()
    assert [r["iteration"] for r in metrics(tmp_path / "run")] == [0, 1, 2]

    final = PeftModel.from_pretrained(base_model(tiny_model_dir), tmp_path / "run" / "final_model")
    ids = torch.tensor([[5, 6, 7]])
    with torch.no_grad():
        torch.testing.assert_close(final(ids).logits, resumed.learner.unwrapped(ids).logits)


@pytest.mark.slow
@pytest.mark.training
def test_vllm_sampler_gets_the_merged_weights_after_every_step(tmp_path, tiny_model_dir):
    pytest.importorskip("vllm")
    from baselines.is_trainer.trainer import ISTrainer

    ISTrainer(is_config(tmp_path, tiny_model_dir, sampler="vllm", num_threads=1)).run()
    rows = metrics(tmp_path / "run")
    assert rows[0]["optim/grad_norm"] > 0  # the adapter moved after the first step...
    assert rows[1]["optim/kl_sample_train_v2"] < 1e-5  # ...and the engine sampled with it
    assert rows[1]["time/refresh"] > 0


@pytest.mark.slow
@pytest.mark.training
def test_magrpo_agents_train_their_own_adapter_on_one_base_and_resume(tmp_path, tiny_model_dir):
    from baselines.magrpo.trainer import MAGRPOConfig, MAGRPOTrainer
    from baselines.samplers import TransformersPolicy
    from tests.baselines.magrpo.test_trainer import SOLUTION, HalfSolved, make_config

    def build(iterations: int) -> MAGRPOTrainer:
        from transformers import AutoTokenizer

        tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
        base = base_model(tiny_model_dir)
        config: MAGRPOConfig = make_config(  # CoopHumanEval/0 trained, /1 held out
            tmp_path, num_iterations=iterations, save_every=1, eval_every=0, **LORA
        )
        samplers = {
            "helper": TransformersPolicy(base, tokenizer),
            "main": HalfSolved(TransformersPolicy(base, tokenizer), tokenizer, SOLUTION),
        }
        return MAGRPOTrainer(
            config,
            models={"helper": base, "main": base},
            tokenizer=tokenizer,
            samplers=samplers,
        )

    trainer = build(2)
    model = trainer.models["helper"]
    assert trainer.models["main"] is model  # one base model in memory
    state = {n: p.detach().clone() for n, p in model.named_parameters()}
    trainer.run()
    changed = {n for n, p in model.named_parameters() if not torch.equal(state[n], p)}
    assert changed and all("lora_" in n for n in changed)  # adapters only
    assert any(".helper." in n for n in changed) and any(".main." in n for n in changed)
    for agent in ("helper", "main"):
        folder = tmp_path / "run" / "checkpoints" / "iteration_000002" / agent
        assert (folder / "adapter_model.safetensors").is_file()
        assert (folder / "optimizer.pt").is_file()

    resumed = build(3)
    assert resumed.start_iteration == 2
    restored = dict(resumed.models["main"].named_parameters())
    for name, p in model.named_parameters():
        assert torch.equal(restored[name], p), name
    resumed.run()
    assert [r["iteration"] for r in metrics(tmp_path / "run")] == [0, 1, 2]


@pytest.mark.slow
def test_magrpo_refuses_separate_models_with_lora(tmp_path, tiny_model):
    from baselines.magrpo.trainer import MAGRPOTrainer
    from tests.baselines.magrpo.test_trainer import make_config

    model, tokenizer = tiny_model
    other = type(model)(model.config)
    with pytest.raises(ValueError, match="share one base model: give the same model object"):
        MAGRPOTrainer(
            make_config(tmp_path, **LORA),
            models={"helper": model, "main": other},
            tokenizer=tokenizer,
        )


@pytest.mark.slow
def test_trl_path_passes_a_peft_config(tmp_path, tiny_model_dir):
    from peft import PeftModel

    from baselines.grpo.config import GRPORunConfig
    from baselines.grpo.run import build_trainer

    config = GRPORunConfig(
        model=str(tiny_model_dir), output_dir=str(tmp_path / "grpo"), device="cpu", **LORA
    )
    trainer = build_trainer(config)
    assert isinstance(trainer.model, PeftModel)
    assert trainer.model.peft_config["default"].r == 4
