"""Samplers: sampled-token logprobs agree with a forward pass, stop strings, weight refresh."""

from __future__ import annotations

import copy
import io
import re
import time

import pytest

from baselines.progress import Phase, heartbeat, phase
from baselines.samplers import (
    ChatRenderer,
    Completion,
    SampleRequest,
    SamplingParams,
    ScriptedPolicy,
    cut_at_stop,
)
from baselines.samplers.base import finished_text
from llm_envs.debate import scripted_debaters

torch = pytest.importorskip("torch")

CHATS = [
    [{"role": "user", "content": "What is 17 * 23?"}],
    [{"role": "system", "content": "You are Agent 0."}, {"role": "user", "content": "Debate!"}],
    [{"role": "user", "content": "def aux(x):"}],
]


def forward_logprobs(model, completion: Completion, temperature: float = 1.0) -> list[float]:
    """Log p(token | prefix) of each completion token under ``model`` (the trainer's view)."""
    ids = torch.tensor([list(completion.prompt_tokens) + list(completion.tokens)])
    with torch.no_grad():
        logits = model(ids).logits[0].float() / temperature
    logprobs = logits.log_softmax(-1)
    start = len(completion.prompt_tokens)
    return [logprobs[start - 1 + i, token].item() for i, token in enumerate(completion.tokens)]


@pytest.mark.parametrize(
    ("text", "stop", "expected"),
    [
        ("abc</x> tail", ["</x>"], ("abc</x>", True)),
        ("a</y>b</x>", ["</x>", "</y>"], ("a</y>", True)),
        ("none", ["</x>"], ("none", False)),
        ("empty stop", [""], ("empty stop", False)),
        ("ab", [], ("ab", False)),
    ],
)
def test_cut_at_stop(text, stop, expected):
    assert cut_at_stop(text, stop) == expected


@pytest.mark.parametrize(
    ("text", "reason", "expected"),
    [
        ("a</x>b", "length", ("a</x>", "stop")),  # a stop string wins over the engine's reason
        ("a</x>b", None, ("a</x>", "stop")),
        ("ab", "length", ("ab", "length")),
        ("ab", "stop", ("ab", "eos")),  # the engine's stop (its eos token), no stop string
        ("ab", None, ("ab", "eos")),
    ],
)
def test_finished_text_says_why_a_sample_ended(text, reason, expected):
    assert finished_text(text, ["</x>"], reason) == expected


def test_sampling_params_validation():
    with pytest.raises(ValueError, match="max_tokens must be >= 1, got 0"):
        SamplingParams(max_tokens=0)
    with pytest.raises(ValueError, match="temperature must be > 0"):
        SamplingParams(temperature=0)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=1.5)


def test_completion_needs_one_logprob_per_token():
    with pytest.raises(ValueError, match="one logprob per token"):
        Completion((1,), (2, 3), (-0.1,), "x", "eos")


@pytest.mark.slow
def test_renderer_needs_a_chat_template(tiny_model):
    _, tokenizer = tiny_model
    bare = copy.copy(tokenizer)
    bare.chat_template = None
    with pytest.raises(ValueError, match="no chat template"):
        ChatRenderer(bare)
    renderer = ChatRenderer(tokenizer)
    assert tokenizer.decode(renderer(CHATS[0])).endswith("<|im_start|>assistant\n")


@pytest.mark.slow
class TestTransformersPolicy:
    @pytest.fixture(scope="class")
    def policy(self, tiny_model):
        from baselines.samplers import TransformersPolicy

        model, tokenizer = tiny_model
        return TransformersPolicy(model, tokenizer, batch_size=2)

    @pytest.mark.parametrize("temperature", [1.0, 0.7])
    def test_logprobs_match_a_forward_pass(self, policy, tiny_model, temperature):
        requests = [SampleRequest(chat) for chat in CHATS]
        params = SamplingParams(max_tokens=24, temperature=temperature, seed=0)
        completions = policy.sample(requests, params)
        assert len(completions) == 3
        for c in completions:
            assert c.prompt_tokens == policy.renderer(CHATS[completions.index(c)])
            assert len(c.tokens) == len(c.logprobs) > 0
            expected = forward_logprobs(tiny_model[0], c, temperature)
            assert c.logprobs == pytest.approx(expected, abs=1e-4)

    def test_stop_strings_end_text_and_tokens(self, policy):
        # A random model emits spaces often: " " is a stop string it will hit.
        requests = [SampleRequest(chat, stop=(" ",)) for chat in CHATS] * 2
        completions = policy.sample(requests, SamplingParams(max_tokens=48, seed=1))
        stopped = [c for c in completions if c.stop_reason == "stop"]
        assert stopped, "a random model should produce a space within 48 tokens"
        for c in stopped:
            assert c.text.endswith(" ") and c.text.count(" ") == 1
            shorter = policy.renderer.decode(c.tokens[:-1])
            assert " " not in shorter, "tokens must end with the token completing the stop"

    def test_each_row_counts_once_when_it_stops(self, policy, monkeypatch):
        counted: list[int] = []
        advance = Phase.advance

        def record(self, count=1):
            counted.append(count)
            advance(self, count)

        monkeypatch.setattr(Phase, "advance", record)
        requests = [SampleRequest(chat, stop=(" ",)) for chat in CHATS] * 2
        policy.sample(requests, SamplingParams(max_tokens=48, seed=1))
        assert sum(counted) == 6  # every row once, whether it stopped early or ran out
        # rows counted as they stop, not only when their batch (of 3) ends
        assert len([c for c in counted if c]) > 3, counted

    def test_same_seed_same_samples(self, policy):
        requests = [SampleRequest(CHATS[0])]
        a = policy.sample(requests, SamplingParams(max_tokens=16, seed=5))
        b = policy.sample(requests, SamplingParams(max_tokens=16, seed=5))
        assert a == b

    def test_a_long_batch_moves_the_heartbeat_lines(self, policy, monkeypatch):
        # Each decoding step slowed to 20 ms: a batch spans many 50 ms heartbeats.
        forward = policy.model.forward

        def slow(*args, **kwargs):
            time.sleep(0.02)
            return forward(*args, **kwargs)

        monkeypatch.setattr(policy.model, "forward", slow)
        out = io.StringIO()
        requests = [SampleRequest(chat) for chat in CHATS]  # batches of 2 rows and 1
        with heartbeat(every=0.05, stream=out), phase("sampling", 3, "episodes"):
            policy.sample(requests, SamplingParams(max_tokens=12, seed=0))
        lines = [line for line in out.getvalue().splitlines() if line.startswith("generate: ")]
        assert lines and all(line.endswith(" (sampling: 0/3 episodes)") for line in lines)
        found = [
            re.search(r"^generate: (\d)/3 completions, .*batch (\d)/2, token (\d+)/12", line)
            for line in lines
        ]
        counts = [tuple(map(int, m.groups())) for m in found if m]
        assert counts == sorted(counts) and len(set(counts)) >= 4, lines
        # the first batch's rows are counted by the time the second runs
        assert {done for done, batch, _ in counts if batch == 2} == {2}, lines


@pytest.mark.slow
class TestVLLMPolicy:
    @pytest.fixture(scope="class")
    def policy(self, tiny_model_dir):
        pytest.importorskip("vllm")
        from baselines.samplers import VLLMPolicy

        return VLLMPolicy(str(tiny_model_dir), dtype="float32", max_model_len=512)

    def test_logprobs_match_a_transformers_forward_pass(self, policy, tiny_model):
        requests = [SampleRequest(chat) for chat in CHATS]
        for temperature in (1.0, 0.7):
            params = SamplingParams(max_tokens=24, temperature=temperature, seed=0)
            for chat, c in zip(CHATS, policy.sample(requests, params), strict=True):
                assert c.prompt_tokens == policy.renderer(chat)
                expected = forward_logprobs(tiny_model[0], c, temperature)
                assert c.logprobs == pytest.approx(expected, abs=1e-4)

    def test_stop_strings(self, policy):
        requests = [SampleRequest(chat, stop=(" ",)) for chat in CHATS] * 2
        completions = policy.sample(requests, SamplingParams(max_tokens=48, seed=1))
        stopped = [c for c in completions if c.stop_reason == "stop"]
        assert stopped
        for c in stopped:
            assert c.text.endswith(" ") and c.text.count(" ") == 1
            assert " " not in policy.renderer.decode(c.tokens[:-1])

    def test_seeded_prompts_past_one_steps_token_budget(self, policy):
        # 20 different prompts of about 400 tokens are more than one engine step
        # takes (4,096 tokens by default on CPU). With chunked prefill a split
        # prompt's seeded generator was rewound, which a CPU generator cannot do:
        # the engine crashed ("CPU Generator does not use offset").
        chats = [
            [{"role": "user", "content": f"{i} Count the words: " + "alpha beta " * 45}]
            for i in range(20)
        ]
        prompts = [policy.renderer(chat) for chat in chats]
        assert sum(map(len, prompts)) > 4096 and max(map(len, prompts)) + 8 <= 512
        requests = [SampleRequest(chat) for chat in chats]
        completions = policy.sample(requests, SamplingParams(max_tokens=8, seed=11))
        assert [c.prompt_tokens for c in completions] == prompts
        assert all(len(c.tokens) == len(c.logprobs) > 0 for c in completions)

    def test_each_finished_completion_advances_the_phase(self, policy, monkeypatch):
        counted: list[tuple[str, int]] = []
        advance = Phase.advance

        def record(self, count=1):
            counted.append((self.name, count))
            advance(self, count)

        monkeypatch.setattr(Phase, "advance", record)
        requests = [SampleRequest(chat, stop=(" ",)) for chat in CHATS] * 2
        policy.sample(requests, SamplingParams(max_tokens=48, seed=1))
        assert counted == [("generate", 1)] * 6

    def test_weight_refresh_follows_the_updated_model(self, policy, tiny_model):
        model, _ = tiny_model
        updated = copy.deepcopy(model)
        with torch.no_grad():
            for p in updated.parameters():
                p.add_(torch.randn_like(p) * 0.05)
        requests = [SampleRequest(CHATS[0])]
        params = SamplingParams(max_tokens=16, seed=3)
        before = policy.sample(requests, params)[0]
        try:
            policy.update_weights(updated.state_dict())
            after = policy.sample(requests, params)[0]
            assert after.logprobs == pytest.approx(forward_logprobs(updated, after), abs=1e-4)
            old = forward_logprobs(model, after)
            assert max(abs(a - b) for a, b in zip(after.logprobs, old, strict=True)) > 1e-3
        finally:
            policy.update_weights(model.state_dict())
        restored = policy.sample(requests, params)[0]
        assert restored.logprobs == pytest.approx(forward_logprobs(model, restored), abs=1e-4)
        assert before.prompt_tokens == restored.prompt_tokens


@pytest.mark.slow
def test_scripted_policy_with_bytes_and_with_a_tokenizer(tiny_model):
    agents = scripted_debaters(2)
    request = SampleRequest(CHATS[0], agent="agent_1", info={"round": 1, "turn": 1})
    (c,) = ScriptedPolicy(agents).sample([request], SamplingParams())
    assert c.text.startswith("<solution>\n42\n</solution>")
    assert bytes(c.tokens).decode() == c.text and set(c.logprobs) == {0.0}
    _, tokenizer = tiny_model
    (t,) = ScriptedPolicy(agents, tokenizer).sample([request], SamplingParams())
    assert tokenizer.decode(t.tokens) == t.text
    with pytest.raises(KeyError, match="no agent for 'agent_9'"):
        ScriptedPolicy(agents).sample([SampleRequest(CHATS[0], agent="agent_9")], SamplingParams())
