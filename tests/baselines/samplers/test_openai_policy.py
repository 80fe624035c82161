"""OpenAIPolicy against a real OpenAI-compatible server: `vllm serve` of a tiny model, loopback."""

from __future__ import annotations

import json
import urllib.request

import pytest

from baselines.samplers import SampleRequest, SamplingParams
from baselines.samplers.openai_policy import OpenAIPolicy, ServerError

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.slow

CHATS = [
    [{"role": "user", "content": "What is 17 * 23?"}],
    [{"role": "system", "content": "You are Agent 0."}, {"role": "user", "content": "Debate!"}],
]


def forward_logprobs(model, prompt, tokens):
    ids = torch.tensor([list(prompt) + list(tokens)])
    with torch.no_grad():
        logprobs = model(ids).logits[0].float().log_softmax(-1)
    return [logprobs[len(prompt) - 1 + i, t].item() for i, t in enumerate(tokens)]


def test_token_completions_match_a_forward_pass(vllm_server, tiny_model):
    model, tokenizer = tiny_model
    policy = OpenAIPolicy(vllm_server, "tiny", tokenizer=tokenizer, max_concurrency=4)
    completions = policy.sample([SampleRequest(c) for c in CHATS], SamplingParams(24, seed=0))
    for chat, c in zip(CHATS, completions, strict=True):
        assert c.prompt_tokens == policy.renderer(chat)
        assert len(c.tokens) == len(c.logprobs) > 0
        assert c.logprobs == pytest.approx(
            forward_logprobs(model, c.prompt_tokens, c.tokens), abs=1e-4
        )
        assert tokenizer.decode(c.tokens, skip_special_tokens=True).startswith(c.text)


def test_stop_strings_over_http(vllm_server, tiny_model):
    _, tokenizer = tiny_model
    policy = OpenAIPolicy(vllm_server, "tiny", tokenizer=tokenizer)
    requests = [SampleRequest(chat, stop=(" ",)) for chat in CHATS] * 3
    completions = policy.sample(requests, SamplingParams(48, seed=1))
    stopped = [c for c in completions if c.stop_reason == "stop"]
    assert stopped
    for c in stopped:
        assert c.text.endswith(" ") and c.text.count(" ") == 1


def test_text_only_chat_mode(vllm_server):
    policy = OpenAIPolicy(vllm_server, "tiny")
    (c,) = policy.sample([SampleRequest(CHATS[0])], SamplingParams(8, seed=0))
    assert c.prompt_tokens == ()
    assert isinstance(c.text, str) and len(c.tokens) == len(c.logprobs) <= 8


def test_client_errors_are_clear(vllm_server, tiny_model, free_port):
    policy = OpenAIPolicy(vllm_server, "no-such-model")
    with pytest.raises(ServerError, match="404"):
        policy.sample([SampleRequest(CHATS[0])], SamplingParams(4))
    dead = OpenAIPolicy(f"http://127.0.0.1:{free_port}/v1", "tiny", retries=1, timeout=2)
    with pytest.raises(ServerError, match="failed after 1 attempts"):
        dead.sample([SampleRequest(CHATS[0])], SamplingParams(4))
    with pytest.raises(ValueError, match="base_url must start with http"):
        OpenAIPolicy("localhost:8000", "tiny")


def test_models_endpoint_lists_the_served_model(vllm_server):
    with urllib.request.urlopen(vllm_server.removesuffix("/v1") + "/v1/models", timeout=5) as r:
        assert "tiny" in json.dumps(json.loads(r.read()))
