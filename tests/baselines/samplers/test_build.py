"""The trainer's samplers: backend choice, and new weights reaching a remote vLLM server."""

from __future__ import annotations

import copy

import pytest

from baselines.samplers import SampleRequest, SamplingParams
from baselines.samplers.build import RemoteWeightSync, resolve_sampler_kind

torch = pytest.importorskip("torch")


def test_sampler_choice():
    has_vllm = pytest.importorskip("importlib.util").find_spec("vllm") is not None
    assert resolve_sampler_kind("auto", num_processes=1) == ("vllm" if has_vllm else "transformers")
    assert resolve_sampler_kind("auto", num_processes=2) == "transformers"
    assert resolve_sampler_kind("openai", num_processes=4) == "openai"
    if has_vllm:
        with pytest.raises(ValueError, match="cannot serve 2 processes"):
            resolve_sampler_kind("vllm", num_processes=2)


def forward_logprobs(model, prompt, tokens):
    ids = torch.tensor([list(prompt) + list(tokens)])
    with torch.no_grad():
        logprobs = model(ids).logits[0].float().log_softmax(-1)
    return [logprobs[len(prompt) - 1 + i, t].item() for i, t in enumerate(tokens)]


@pytest.mark.slow
def test_remote_weight_sync_makes_the_server_sample_the_new_weights(
    vllm_server, tiny_model, tmp_path
):
    from baselines.samplers import OpenAIPolicy

    model, tokenizer = tiny_model
    policy = OpenAIPolicy(vllm_server, "tiny", tokenizer=tokenizer)
    request = [SampleRequest([{"role": "user", "content": "What is 17 * 23?"}])]
    params = SamplingParams(max_tokens=8, seed=3)

    changed = copy.deepcopy(model)
    with torch.no_grad():
        for parameter in changed.parameters():
            parameter.add_(0.05 * torch.randn_like(parameter))
    sync = RemoteWeightSync(vllm_server, tmp_path / "weights", changed.config)
    sync(changed.state_dict())
    (after,) = policy.sample(request, params)
    expected = forward_logprobs(changed, after.prompt_tokens, after.tokens)
    assert after.logprobs == pytest.approx(expected, abs=1e-4)
    stale = forward_logprobs(model, after.prompt_tokens, after.tokens)
    assert max(abs(a - b) for a, b in zip(after.logprobs, stale, strict=True)) > 1e-2

    sync(model.state_dict())  # and back; the previous folder is cleaned up
    (back,) = policy.sample(request, params)
    assert back.logprobs == pytest.approx(
        forward_logprobs(model, back.prompt_tokens, back.tokens), abs=1e-4
    )
    assert [p.name for p in (tmp_path / "weights").iterdir()] == ["weights_000002"]
