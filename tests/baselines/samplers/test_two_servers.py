"""Two real ``vllm serve`` processes behind one trainer sampler: both sample, both get new weights.

The sampler is built the way the trainer builds it (``build_sampler`` with an
``ISTrainerConfig`` naming two URLs and a weights folder). Every completion is
checked against a forward pass of the weights its server should hold: since
round-robin sends half the requests to each server, a server that missed the
push would fail the check.
"""

from __future__ import annotations

import copy

import pytest

from baselines.is_trainer.config import ISTrainerConfig
from baselines.samplers import SampleRequest, SamplingParams
from baselines.samplers.server_pool import ServerPool

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

CHATS = [
    [{"role": "user", "content": "What is 17 * 23?"}],
    [{"role": "user", "content": "Debate: is 7 prime?"}],
    [{"role": "system", "content": "You are Agent 0."}, {"role": "user", "content": "Go."}],
    [{"role": "user", "content": "def add(a, b):"}],
]
REQUESTS = [SampleRequest(chat) for chat in CHATS] * 2


def next_token_logprobs(model, prompt, tokens):
    """The model's log-distribution over the next token at each completion position."""
    ids = torch.tensor([list(prompt) + list(tokens)])
    with torch.no_grad():
        logprobs = model(ids).logits[0].float().log_softmax(-1)
    return logprobs[len(prompt) - 1 : len(prompt) - 1 + len(tokens)]


def largest_gap(model, completions):
    """The largest difference between a sampled token's logprob and ``model``'s."""
    gaps = [0.0]
    for c in completions:
        rows = next_token_logprobs(model, c.prompt_tokens, c.tokens)
        expected = rows[range(len(c.tokens)), list(c.tokens)].tolist()
        gaps += [abs(a - b) for a, b in zip(c.logprobs, expected, strict=True)]
    return max(gaps)


def greedy_gap(model, completions):
    """How far below ``model``'s most likely next token the sampled tokens fall, at worst."""
    gaps = [0.0]
    for c in completions:
        rows = next_token_logprobs(model, c.prompt_tokens, c.tokens)
        chosen = rows[range(len(c.tokens)), list(c.tokens)]
        gaps.append((rows.max(-1).values - chosen).max().item())
    return max(gaps)


def build(urls, routing, weights_dir, model, tokenizer, tiny_model_dir):
    from baselines.samplers.build import build_sampler

    config = ISTrainerConfig(
        sampler="openai",
        sampler_url=",".join(urls),
        sampler_routing=routing,
        sampler_weights_dir=str(weights_dir),
    )
    return build_sampler(
        "openai",
        model=model,
        tokenizer=tokenizer,
        model_path=str(tiny_model_dir),
        cuda=False,
        seed=0,
        process_index=0,
        max_model_len=512,
        config=config.sampling,
        num_processes=1,
    )


def test_a_pool_of_two_servers_samples_on_both_and_pushes_to_both(
    vllm_server, second_vllm_server, tiny_model, tiny_model_dir, tmp_path
):
    model, tokenizer = tiny_model
    urls = [vllm_server, second_vllm_server]
    sampler = build(urls, "round_robin", tmp_path / "w", model, tokenizer, tiny_model_dir)
    pool = sampler.policy
    assert isinstance(pool, ServerPool) and [p.base_url for p in pool.policies] == urls
    assert sampler.refresh is not None and sampler.every_process is False  # one process
    params = SamplingParams(max_tokens=12, seed=5)
    # vLLM raises any temperature below 0.01 to 0.01; there a token 0.1 below the
    # best is drawn with odds e^-10, so "greedy" means within 0.1 of the best.
    greedy = SamplingParams(max_tokens=12, temperature=0.01)

    before = pool.sample(REQUESTS, params)
    assert pool.served == [4, 4]
    assert largest_gap(model, before) < 1e-4
    greedy_before = pool.sample(REQUESTS, greedy)
    assert greedy_gap(model, greedy_before) < 0.1

    changed = copy.deepcopy(model)
    noise = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for parameter in changed.parameters():
            parameter.add_(0.05 * torch.randn(parameter.shape, generator=noise))
    try:
        sampler.refresh(changed.state_dict())
        after = pool.sample(REQUESTS, params)
        assert largest_gap(changed, after) < 1e-4  # four requests from each server
        assert largest_gap(model, after) > 1e-2
        assert [c.tokens for c in after] != [c.tokens for c in before]  # same seeds
        greedy_after = pool.sample(REQUESTS, greedy)
        assert greedy_gap(changed, greedy_after) < 0.1 < greedy_gap(model, greedy_after)
        assert pool.served == [16, 16]  # four calls of eight requests, half on each

        balanced = build(urls, "least_loaded", tmp_path / "w2", model, tokenizer, tiny_model_dir)
        assert largest_gap(changed, balanced.policy.sample(REQUESTS, params)) < 1e-4
        assert sum(balanced.policy.served) == len(REQUESTS) and min(balanced.policy.served) > 0
    finally:
        sampler.refresh(model.state_dict())  # the servers are shared with other tests
    assert largest_gap(model, pool.sample(REQUESTS, params)) < 1e-4
