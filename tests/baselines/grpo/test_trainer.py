"""TRL GRPOTrainer with the llm-envs rollout functions, on CPU with the tiny model.

What is checked: a few steps change the parameters; the rollout returns one
completion per prompt it receives (TRL 1.16 repeats each prompt
num_generations times); environment tokens reach TRL with env_mask 0 and stay
out of the loss; the reward function receives the environment's returns.
"""

from __future__ import annotations

import dataclasses
import itertools
import os

import pytest

from baselines.grpo.reward import env_reward
from baselines.grpo.rollout_func import FamilyRollout
from baselines.samplers import ScriptedPolicy
from llm_envs.debate import scripted_debaters
from llm_envs.expert_iteration import ScriptedMathSolver

torch = pytest.importorskip("torch")
pytest.importorskip("trl")

os.environ.setdefault("TRL_EXPERIMENTAL_SILENCE", "1")


class Recorder:
    """Wraps a rollout function and keeps what TRL passed in and what came back."""

    def __init__(self, inner):
        self.inner = inner
        self.calls: list[tuple[list, dict]] = []

    def __getattr__(self, name):
        return getattr(self.inner, name)

    def __call__(self, prompts, trainer):
        out = self.inner(prompts, trainer)
        self.calls.append((list(prompts), out))
        return out


class StopAwareScripted(ScriptedPolicy):
    """Scripted answers that end on a stop string report it, as a model sampler would."""

    def sample(self, requests, params):
        out = super().sample(requests, params)
        return [
            dataclasses.replace(c, stop_reason="stop")
            if r.stop and c.text.endswith(tuple(r.stop))
            else c
            for r, c in zip(requests, out, strict=True)
        ]


class AlternatingSolvers:
    """Request i of each call is answered right (even i) or wrong, with no fix (odd i)."""

    def __init__(self, tokenizer):
        self.policies = [
            ScriptedPolicy(ScriptedMathSolver(first_attempt="right"), tokenizer),
            ScriptedPolicy(ScriptedMathSolver(fix_after_feedback=False), tokenizer),
        ]

    def sample(self, requests, params):
        return [self.policies[i % 2].sample([r], params)[0] for i, r in enumerate(requests)]


def make_trainer(model_dir, rollout, tmp_path, *, steps=2, items=2, lr=1e-3):
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    g = rollout.num_generations
    args = GRPOConfig(
        output_dir=str(tmp_path),
        bf16=False,
        use_cpu=True,
        report_to="none",
        gradient_checkpointing=False,
        per_device_train_batch_size=items * g,
        num_generations=g,
        max_steps=steps,
        logging_steps=1,
        learning_rate=lr,
        scale_rewards="none",
        save_strategy="no",
        max_completion_length=64,
        disable_tqdm=True,
    )
    return GRPOTrainer(
        model=AutoModelForCausalLM.from_pretrained(model_dir, dtype=torch.float32),
        processing_class=AutoTokenizer.from_pretrained(model_dir),
        reward_funcs=[env_reward],
        train_dataset=rollout.dataset(),
        rollout_func=rollout,
        args=args,
    )


def train_and_capture(trainer):
    """Train; return the parameter change and TRL's prepared batches (masks, ids, advantages)."""
    before = {n: p.detach().clone() for n, p in trainer.model.named_parameters()}
    batches = []
    prepare = trainer._generate_and_score_completions

    def capture(inputs):
        out = prepare(inputs)
        batches.append(out)
        return out

    trainer._generate_and_score_completions = capture
    trainer.train()
    changed = sum(
        (p.detach() - before[n]).abs().sum().item() for n, p in trainer.model.named_parameters()
    )
    return changed, batches


def check_one_completion_per_prompt(calls, group_size):
    for prompts, out in calls:
        # TRL 1.16 hands over every prompt already repeated num_generations times, in a row.
        assert len(prompts) % group_size == 0
        for start in range(0, len(prompts), group_size):
            assert len(set(map(str, prompts[start : start + group_size]))) == 1
        for key in ("prompt_ids", "completion_ids", "logprobs", "env_mask", "env_reward"):
            assert len(out[key]) == len(prompts), key
        rows = zip(out["completion_ids"], out["logprobs"], out["env_mask"], strict=True)
        for ids, lps, mask in rows:
            assert len(ids) == len(lps) == len(mask) > 0


def check_trl_loss_mask_is_env_mask(calls, batches):
    """TRL's loss mask (completion_mask * tool_mask) is our env_mask, padding aside."""
    assert len(calls) == len(batches)
    for (_, out), batch in zip(calls, batches, strict=True):
        loss_mask = (batch["completion_mask"] * batch["tool_mask"]).tolist()
        for row, mask in zip(loss_mask, out["env_mask"], strict=True):
            assert row == mask + [0] * (len(row) - len(mask))


def logged(trainer, key):
    return [h[key] for h in trainer.state.log_history if key in h]


@pytest.mark.slow
@pytest.mark.training
def test_debate_trains_with_the_trainers_own_model(tiny_model_dir, tmp_path):
    rollout = Recorder(
        FamilyRollout.for_env(
            "debate", {"num_agents": 3, "max_rounds": 2}, num_groups=8, max_tokens_per_turn=12
        )
    )
    trainer = make_trainer(tiny_model_dir, rollout, tmp_path)
    changed, batches = train_and_capture(trainer)

    assert changed > 0
    assert len(rollout.calls) == 2
    check_one_completion_per_prompt(rollout.calls, group_size=3)
    check_trl_loss_mask_is_env_mask(rollout.calls, batches)
    # Reward wiring: TRL's logged reward is the mean of the returns the rollout computed.
    means = logged(trainer, "rewards/env_reward/mean")
    for (_, out), mean in zip(rollout.calls, means, strict=True):
        assert mean == pytest.approx(sum(out["env_reward"]) / len(out["env_reward"]), abs=1e-6)
    assert logged(trainer, "env/num_turns")


@pytest.mark.slow
@pytest.mark.training
def test_multi_turn_debate_masks_what_the_others_said(tiny_model_dir, tmp_path):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    policy = StopAwareScripted(scripted_debaters(3, seed=0), tok)
    rollout = Recorder(
        FamilyRollout.for_env(
            "debate",
            {"num_agents": 3, "max_rounds": 3},
            num_groups=8,
            max_tokens_per_turn=64,
            policy=policy,
        )
    )
    trainer = make_trainer(tiny_model_dir, rollout, tmp_path, steps=1)
    changed, batches = train_and_capture(trainer)

    assert changed > 0
    check_one_completion_per_prompt(rollout.calls, group_size=3)
    check_trl_loss_mask_is_env_mask(rollout.calls, batches)
    (_, out), batch = rollout.calls[0], batches[0]
    rows = zip(out["completion_ids"], out["env_mask"], out["env_reward"], strict=True)
    for ids, mask, reward in rows:
        text = tok.decode(ids)
        # Several answers, separated by the others' answers as masked env tokens.
        runs = "".join(str(value) for value, _ in itertools.groupby(mask))
        assert runs.startswith("101"), runs
        assert "Agent" in tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
        assert text.count("<solution>") >= 2
        assert ids[-1] == tok.convert_tokens_to_ids("<|im_end|>") and mask[-1] == 0  # closed
        assert -1.0 <= reward <= 1.0

    # Environment tokens are out of the loss: the trailing end-of-turn tokens (masked,
    # and no later token reads them) can be anything without changing the gradient.
    def gradient(inputs):
        trainer.model.zero_grad()
        trainer._compute_loss(trainer.model, inputs).backward()
        return torch.cat([p.grad.flatten() for p in trainer.model.parameters()])

    lengths = batch["completion_mask"].sum(dim=1)
    rows = torch.arange(len(lengths))
    base = gradient(batch)
    changed_env = {**batch, "completion_ids": batch["completion_ids"].clone()}
    changed_env["completion_ids"][rows, lengths - 1] = 7
    assert torch.equal(gradient(changed_env), base)
    # The check can fail: making that last token a trained one changes the gradient.
    trained_last = {**batch, "tool_mask": batch["tool_mask"].clone()}
    trained_last["tool_mask"][rows, lengths - 1] = 1
    assert not torch.allclose(gradient(trained_last), base)


@pytest.mark.slow
@pytest.mark.training
@pytest.mark.parametrize("strategy", ["iid", "two_turn_feedback"])
def test_expert_iteration_trains(tiny_model_dir, tmp_path, strategy):
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tiny_model_dir)
    rollout = Recorder(
        FamilyRollout.for_env(
            "expert_iteration",
            task="arithmetic",
            seed=1,
            num_groups=8,
            options={"strategy": strategy, "num_generations": 2},
            max_tokens_per_turn=32,
            policy=AlternatingSolvers(tok),
        )
    )
    trainer = make_trainer(tiny_model_dir, rollout, tmp_path)
    changed, batches = train_and_capture(trainer)

    assert changed > 0
    check_one_completion_per_prompt(rollout.calls, group_size=2)
    check_trl_loss_mask_is_env_mask(rollout.calls, batches)
    for _, out in rollout.calls:
        # Right, wrong, right, wrong...: each group has one of each, so every advantage is +-0.5.
        assert out["env_reward"] == [1.0, 0.0] * (len(out["env_reward"]) // 2)
        for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
            trained = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 1])
            masked = tok.decode([t for t, m in zip(ids, mask, strict=True) if m == 0])
            assert trained.count("boxed") == 1  # one trained answer
            if strategy == "two_turn_feedback":
                # Attempt 1 (loss weight 0 by default) and the feedback are context only.
                assert "I think" in masked and "Feedback" in masked
                assert "Feedback" not in trained
            else:
                assert set(mask) == {1}


@pytest.mark.slow
def test_two_turn_feedback_with_the_trainers_own_model(tiny_model_dir, tmp_path):
    rollout = FamilyRollout.for_env(
        "expert_iteration",
        task="arithmetic",
        num_groups=4,
        options={"strategy": "two_turn_feedback", "num_generations": 2},
        max_tokens_per_turn=8,
    )
    trainer = make_trainer(tiny_model_dir, rollout, tmp_path)
    prompts = [p for p in rollout.dataset_prompts()[:2] for _ in range(2)]
    out = rollout(prompts, trainer)

    assert len(out["completion_ids"]) == 4
    for ids, mask in zip(out["completion_ids"], out["env_mask"], strict=True):
        # attempt 1 and the feedback (0), attempt 2 (1), maybe the closing token (0).
        first_one = mask.index(1)
        assert set(mask[:first_one]) == {0} and first_one > 8
        assert 1 <= sum(mask) <= 8
        assert len(ids) == len(mask)
    assert all(m["num_turns"] == 2 for m in out["env_metrics"])


@pytest.mark.slow
def test_with_vllm_colocate_the_rollout_samples_through_trls_engine(tiny_model_dir):
    # TRL's colocated engine is a vllm.LLM it keeps in sync; a CPU engine stands in for it.
    from types import SimpleNamespace

    pytest.importorskip("vllm")
    from baselines.grpo.sampling import trainer_policy
    from baselines.samplers import VLLMPolicy

    engine = VLLMPolicy(str(tiny_model_dir), dtype="float32", max_model_len=2048)
    trainer = SimpleNamespace(
        use_vllm=True,
        vllm_mode="colocate",
        vllm_generation=SimpleNamespace(llm=engine.llm),
        processing_class=engine.tokenizer,
        args=SimpleNamespace(vllm_enable_sleep_mode=False),
        temperature=1.0,
        top_p=1.0,
    )
    rollout = FamilyRollout.for_env(
        "debate", {"num_agents": 2, "max_rounds": 2}, num_groups=1, max_tokens_per_turn=8
    )
    prompts = rollout.dataset_prompts() * 2
    out = rollout(prompts, trainer)
    check_one_completion_per_prompt([(prompts, out)], group_size=2)
    for lps, mask in zip(out["logprobs"], out["env_mask"], strict=True):
        sampled = [lp for lp, m in zip(lps, mask, strict=True) if m == 1]
        assert all(lp < 0 for lp in sampled)  # the engine's logprobs, not placeholders
    with trainer_policy(trainer) as policy:
        assert policy.llm is engine.llm
    trainer.vllm_mode = "server"
    with pytest.raises(ValueError, match="colocate"), trainer_policy(trainer):
        pass
