"""The trainer's precisions: what the training sampler and the evaluation engines run in.

Real vLLM engines on a tiny model: the engines' dtypes, which engine plays which
side of an evaluation, and the weights handed to an engine of its own.
"""

from __future__ import annotations

import pytest

from tests.baselines.is_trainer.test_trainer import tiny_config

pytest.importorskip("torch")


@pytest.mark.slow
@pytest.mark.training
def test_evaluation_engines_of_their_own_precision_carry_the_trained_weights(
    tmp_path, tiny_model_dir, monkeypatch
):
    # eval_precision bf16 on a CPU: the evaluation's engines are bf16, the sampler stays
    # fp32 (its logprobs are the trainer's). Before a step one bf16 engine of the initial
    # model plays every seat; after it, the trained side runs on a bf16 engine of its own
    # that holds the trained weights, and the opponent keeps the initial ones.
    pytest.importorskip("vllm")
    import torch

    from baselines.is_trainer.trainer import ISTrainer
    from baselines.training.weights import merged_weights

    three = {"num_agents": 3, "max_rounds": 1}
    config = tiny_config(
        tmp_path,
        tiny_model_dir,
        env_kwargs=three,
        sampler="vllm",
        eval_every=1,
        eval_groups=1,
        eval_precision="bf16",
        num_threads=1,
    )
    trainer = ISTrainer(config)

    def dtype(policy):
        return policy.llm.llm_engine.model_config.dtype

    assert dtype(trainer.learner.sampler.policy) == torch.float32
    initial = trainer.eval_policies.opponent()
    assert trainer.eval_policies.trained() is initial and dtype(initial) == torch.bfloat16
    before = trainer.evaluate()
    assert before["eval/num_episodes"] == 3 and before["eval/opponent/num_episodes"] == 3

    trainer.train_iteration(0)
    handed: list[dict] = []
    trained = trainer.eval_policies.trained()  # built, then given the weights
    original = type(trained).update_weights

    def record(self, weights):
        handed.append({k: v.clone() for k, v in weights.items()})
        return original(self, weights)

    monkeypatch.setattr(type(trained), "update_weights", record)
    after = trainer.evaluate()
    assert trained is not initial and trained is not trainer.learner.sampler.policy
    assert dtype(trained) == torch.bfloat16 and trainer.eval_policies.opponent() is initial
    # one hand-over per evaluation, of exactly the trained weights
    [weights] = handed
    now = merged_weights(trainer.learner.unwrapped)
    assert weights.keys() == now.keys()
    assert all(torch.equal(weights[k], now[k]) for k in now)
    assert after["eval/num_episodes"] == 3 and after["eval/opponent/num_episodes"] == 6
    trainer.finish()

    # "sampler": the evaluation plays the trained side on the sampler itself, as before
    fp32 = ISTrainer(
        tiny_config(tmp_path / "b", tiny_model_dir, sampler="vllm", eval_precision="sampler")
    )
    assert fp32.eval_policies.trained() is fp32.learner.sampler.policy
    fp32.finish()


@pytest.mark.slow
@pytest.mark.training
def test_bf16_training_on_a_cpu_samples_and_evaluates_in_bf16(tmp_path, tiny_model_dir):
    # precision="bf16" on a CPU with bf16 arithmetic: the trainer autocasts, the
    # sampler's engine is bf16 like it, so the evaluation plays the trained side on
    # the sampler (no engine of its own) and the opponent on a bf16 engine; the
    # weights stay fp32.
    pytest.importorskip("vllm")
    import torch

    from baselines.is_trainer.trainer import ISTrainer
    from baselines.precision import fastest_precision

    if fastest_precision() != "bf16":
        pytest.skip("this CPU has no bf16 arithmetic (avx512_bf16, amx_bf16)")
    config = tiny_config(
        tmp_path,
        tiny_model_dir,
        env_kwargs={"num_agents": 3, "max_rounds": 1},
        sampler="vllm",
        precision="bf16",
        eval_every=1,
        eval_groups=1,
        num_threads=1,
    )
    trainer = ISTrainer(config)
    assert trainer.learner.bf16 and trainer.accelerator.mixed_precision == "bf16"
    assert trainer.learner.sampler.policy.llm.llm_engine.model_config.dtype == torch.bfloat16
    metrics = trainer.train_iteration(0)
    # Sampler and trainer both round to bf16, differently: a KL of bf16's rounding,
    # neither fp32's (about 1e-11 here) nor an off-policy one.
    assert 1e-7 < metrics["optim/kl_sample_train_v2"] < 5e-3
    assert all(p.dtype == torch.float32 for p in trainer.learner.unwrapped.parameters())
    assert trainer.eval_policies.trained() is trainer.learner.sampler.policy
    opponent = trainer.eval_policies.opponent()
    assert opponent is not trainer.learner.sampler.policy
    assert opponent.llm.llm_engine.model_config.dtype == torch.bfloat16
    trainer.finish()
