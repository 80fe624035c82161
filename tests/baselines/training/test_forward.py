"""The shared forward pass on the tiny model: tempered logprobs, shared prompts, microbatches."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("transformers")

from baselines.magrpo.passes import completion_datum  # noqa: E402
from baselines.samplers.base import Completion, SampleRequest, SamplingParams  # noqa: E402
from baselines.training.forward import (  # noqa: E402
    forward_logprobs,
    shared_prompt_logprobs,
    split_microbatches,
    split_prompt_groups,
)
from baselines.training.losses import reinforce_loss  # noqa: E402

pytestmark = pytest.mark.slow  # loads the tiny model

CPU = torch.device("cpu")


@pytest.mark.parametrize("actions_only", [False, True])
def test_training_logprobs_match_the_samplers(tiny_model, actions_only):
    # The forward pass on prompt + sampled tokens must reproduce the sampler's logprobs
    # (temperature 1, top_p 1): the completion is aligned with its targets, never
    # re-tokenized, and padding changes nothing.
    from baselines.samplers import TransformersPolicy

    model, tokenizer = tiny_model
    policy = TransformersPolicy(model, tokenizer)
    requests = [
        SampleRequest([{"role": "user", "content": "Write aux."}]),
        SampleRequest([{"role": "user", "content": "Write a longer function called x_or_y."}]),
    ]
    completions = policy.sample(requests, SamplingParams(max_tokens=6, seed=3))
    data = [completion_datum(c, 1.0) for c in completions]
    assert all(d is not None for d in data)
    with torch.no_grad():
        logprobs_B_T, _, batch = forward_logprobs(
            model, data, "padded", CPU, actions_only=actions_only
        )
    mask = batch["mask"].bool()
    trained = logprobs_B_T[mask]
    assert len(trained) == sum(len(c.tokens) for c in completions)
    assert torch.allclose(trained, batch["sampling_logprobs"][mask], atol=1e-4)
    assert logprobs_B_T.shape == (2, max(len(d) for d in data))
    padding = torch.ones_like(mask)
    for row, d in enumerate(data):
        padding[row, : len(d)] = False
    assert float(logprobs_B_T[padding].abs().sum()) == 0.0


def test_shared_prompt_gives_the_logprobs_and_gradients_of_separate_rows(tiny_model_dir):
    # Three completions of one prompt, of different lengths (one of a single token):
    # the prompt run once with its cache repeated must match three full rows.
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    prompt = tuple(range(5, 17))
    completions = [(40, 41, 42, 43), (50,), (60, 61)]
    advantages = [1.5, -0.5, -1.0]
    data = [
        completion_datum(Completion(prompt, c, (0.0,) * len(c), "", "eos"), a)
        for c, a in zip(completions, advantages, strict=True)
    ]

    def gradients(loss):
        model.zero_grad()
        loss.backward()
        return {n: p.grad.clone() for n, p in model.named_parameters() if p.grad is not None}

    separate, _, batch = forward_logprobs(model, data, "padded", CPU, temperature=0.7)
    shared, mask = shared_prompt_logprobs(model, prompt, completions, CPU, temperature=0.7)
    assert mask.tolist() == [[1, 1, 1, 1], [1, 0, 0, 0], [1, 1, 0, 0]]
    # Separate rows hold prompt + completion; the completion columns start after the prompt.
    columns = slice(len(prompt) - 1, len(prompt) - 1 + mask.shape[1])
    assert torch.allclose(shared, separate[:, columns] * mask, atol=1e-5)
    expected = gradients(reinforce_loss(separate, batch["advantages"], batch["weights"], 3))
    advantages_K_C = torch.tensor(advantages)[:, None] * mask
    got = gradients(reinforce_loss(shared, advantages_K_C, mask, 3))
    assert expected.keys() == got.keys() and len(got) > 10
    for name, grad in expected.items():
        assert torch.allclose(got[name], grad, atol=1e-5, rtol=1e-4), name
    with pytest.raises(ValueError, match="none empty"):
        shared_prompt_logprobs(model, prompt, [(1,), ()], CPU)


def test_temperature_divides_the_logits(tiny_model):
    model, _ = tiny_model
    prompt = tuple(range(5, 12))
    datum = completion_datum(Completion(prompt, (40, 41), (0.0, 0.0), "", "eos"), 1.0)
    with torch.no_grad():
        plain, _, batch = forward_logprobs(model, [datum], "packed", CPU)
        hot, _, _ = forward_logprobs(model, [datum], "packed", CPU, temperature=2.0)
        logits = model(input_ids=torch.tensor([datum.model_input.tolist()])).logits[0] / 2.0
    expected = torch.log_softmax(logits.float(), -1).gather(
        -1, torch.tensor(datum.target_tokens.tolist()).unsqueeze(-1)
    )[:, 0]
    assert torch.allclose(hot, expected, atol=1e-5)
    assert not torch.allclose(hot, plain, atol=1e-3)
    assert batch["weights"].sum() == 2


def test_microbatch_splits_by_hand():
    assert split_microbatches([2, 5, 2, 3], 6, "padded", longest_first=True) == [[1], [3, 0], [2]]
    assert split_microbatches([2, 5, 2, 3], 6, "padded") == [[0], [1], [2, 3]]
    prompts = [(1, 2), (7,), (1, 2), (1, 2)]
    assert split_prompt_groups(prompts, [3, 4, 5, 3], max_tokens=12) == [[2, 0], [3], [1]]
    assert split_prompt_groups(prompts, [3, 4, 5, 3], max_tokens=1) == [[2], [0], [3], [1]]
