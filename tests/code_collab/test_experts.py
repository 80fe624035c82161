"""The OpenAI-compatible expert adapter, against a local HTTP server (never the network)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from llm_envs.code_collab import (
    ExpertError,
    OpenAIChatExpert,
    expert_feedback,
    expert_prompt,
    parallel_env,
    parse_expert_reply,
)
from tests.code_collab.cases import IS_BIG, IS_PRIME, USES_AUX
from tests.loopback import JSON, LoopbackServer


class FakeEndpoint(LoopbackServer):
    """A chat-completions endpoint on 127.0.0.1 that answers from a script."""

    def __init__(self) -> None:
        super().__init__()
        self.replies: list[tuple[int, bytes]] = []
        self.requests: list[dict] = []

    def respond(self, method, path, headers, body):
        if method != "POST":
            return 501, {}, b""  # chat completions only
        self.requests.append(
            {"path": path, "authorization": headers.get("Authorization"), "body": body}
        )
        status, payload = self.replies.pop(0) if self.replies else (500, b"{}")
        return status, JSON, payload

    def reply(self, content: str, status: int = 200) -> None:
        payload = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        self.replies.append((status, json.dumps(payload).encode()))

    def reply_raw(self, status: int, payload: bytes) -> None:
        self.replies.append((status, payload))


@pytest.fixture
def endpoint(monkeypatch) -> Iterator[FakeEndpoint]:
    for name in ("http_proxy", "HTTP_PROXY", "https_proxy", "HTTPS_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with FakeEndpoint() as fake:
        yield fake


def expert_for(endpoint: FakeEndpoint, **kwargs) -> OpenAIChatExpert:
    return OpenAIChatExpert("coder-1", base_url=endpoint.url, retry_delay=0.0, **kwargs)


def test_asks_for_json_edits_and_reads_them(endpoint, x_or_y):
    endpoint.reply('Here you go:\n{"aux": "Test primality.", "main": "Return x if aux(n)."}')
    edits = expert_for(endpoint, api_key="sk-test")(x_or_y, IS_BIG, USES_AUX)
    assert edits == {"aux": "Test primality.", "main": "Return x if aux(n)."}
    (request,) = endpoint.requests
    assert request["path"] == "/v1/chat/completions"
    assert request["authorization"] == "Bearer sk-test"
    body = request["body"]
    assert body["model"] == "coder-1" and body["temperature"] == 0.0
    (message,) = body["messages"]
    assert message == {"role": "user", "content": expert_prompt(x_or_y, IS_BIG, USES_AUX)}
    assert IS_BIG in message["content"] and USES_AUX in message["content"]
    assert '{"aux": "<edits for aux>", "main": "<edits for main>"}' in message["content"]


def test_key_from_the_environment_or_none(endpoint, x_or_y, monkeypatch):
    endpoint.reply("{}")
    endpoint.reply("{}")
    expert_for(endpoint)(x_or_y, IS_BIG, USES_AUX)
    monkeypatch.setenv("CODER_KEY", "from-env")
    expert_for(endpoint, api_key_env="CODER_KEY")(x_or_y, IS_BIG, USES_AUX)
    assert [r["authorization"] for r in endpoint.requests] == [None, "Bearer from-env"]


def test_single_agent_prompt_asks_for_main_only(endpoint, x_or_y):
    endpoint.reply('{"main": "Handle n < 2."}')
    edits = expert_for(endpoint, num_agents=1)(x_or_y, "", USES_AUX)
    assert edits == {"main": "Handle n < 2."}
    content = endpoint.requests[0]["body"]["messages"][0]["content"]
    assert '{"main": "<edits for main>"}' in content and "aux" not in content.split("Code of")[0]


def test_retries_server_errors_then_succeeds(endpoint, x_or_y):
    endpoint.reply_raw(503, b"busy")
    endpoint.reply_raw(200, b"not json")
    endpoint.reply("Rename n.")
    assert expert_for(endpoint, max_retries=2)(x_or_y, IS_BIG, USES_AUX) == "Rename n."
    assert len(endpoint.requests) == 3


def test_client_errors_fail_at_once_with_the_fix(endpoint, x_or_y):
    endpoint.reply_raw(401, b'{"error": "bad key"}')
    with pytest.raises(ExpertError, match=r"HTTP 401.*bad key.*API key"):
        expert_for(endpoint, max_retries=3)(x_or_y, IS_BIG, USES_AUX)
    assert len(endpoint.requests) == 1


def test_gives_up_after_the_retries(endpoint, x_or_y):
    for _ in range(3):
        endpoint.reply_raw(500, b"oops")
    with pytest.raises(ExpertError, match="after 3 attempt"):
        expert_for(endpoint, max_retries=2)(x_or_y, IS_BIG, USES_AUX)


def test_unreachable_endpoint(x_or_y):
    expert = OpenAIChatExpert(
        "m", base_url="http://127.0.0.1:9/v1", max_retries=0, timeout=2.0, retry_delay=0.0
    )
    with pytest.raises(ExpertError, match=r"127\.0\.0\.1:9"):
        expert(x_or_y, IS_BIG, USES_AUX)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"model": ""}, "model must be"),
        ({"base_url": "api.openai.com"}, "base_url must be an http"),
        ({"num_agents": 3}, r"num_agents must be an int in \[1, 2\], got 3"),
        ({"max_retries": -1}, "max_retries must be"),
        ({"timeout": 0}, "timeout must be"),
        ({"timeout": float("nan")}, "timeout must be a finite number of seconds > 0, got nan"),
        ({"temperature": float("inf")}, "temperature must be a finite number >= 0, got inf"),
        ({"temperature": -0.5}, "temperature must be a finite number >= 0, got -0.5"),
        ({"max_tokens": 0}, "max_tokens must be an int >= 1, got 0"),
        ({"retry_delay": -1}, "retry_delay must be a finite number of seconds >= 0, got -1"),
    ],
)
def test_bad_arguments(kwargs, message):
    with pytest.raises(ValueError, match=message):
        OpenAIChatExpert(**{"model": "m", **kwargs})


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"num_agents": True}, r"num_agents must be an int in \[1, 2\], got True \(a bool\)"),
        ({"max_tokens": 1024.0}, r"max_tokens must be an int >= 1, got 1024.0 \(a float\)"),
        ({"max_retries": "2"}, r"max_retries must be an int >= 0, got '2' \(a str\)"),
        ({"timeout": True}, r"timeout must be a finite number of seconds > 0, got True"),
        ({"temperature": "0.7"}, r"temperature must be a finite number >= 0, got '0.7'"),
        ({"api_key_env": None}, "api_key_env must name an environment variable, got None"),
    ],
)
def test_arguments_of_the_wrong_type(kwargs, message):
    with pytest.raises(TypeError, match=message):
        OpenAIChatExpert(**{"model": "m", **kwargs})


@pytest.mark.parametrize(
    ("reply", "edits"),
    [
        ('{"aux": "a", "main": "m"}', {"aux": "a", "main": "m"}),
        ('first {"x": 1} then {"main": "m"} done', {"main": "m"}),
        ('{"aux": {"line": 2}}', {"aux": '{"line": 2}'}),
        ("no json here", "no json here"),
        ('{"unrelated": "keys"}', '{"unrelated": "keys"}'),
        ('{"aux": "unterminated', '{"aux": "unterminated'),
    ],
)
def test_parse_expert_reply(reply, edits):
    assert parse_expert_reply(reply) == edits


def test_env_with_the_http_expert(endpoint, x_or_y):
    endpoint.reply('{"aux": "Return True only for primes.", "main": "Perfect! No changes needed!"}')
    game = parallel_env(
        problems=[x_or_y], external_mode="expert_edits", expert=expert_for(endpoint)
    )
    game.reset(seed=0)
    observations, *_ = game.step({"helper": IS_BIG, "main": USES_AUX})
    assert observations["helper"]["messages"][-1]["content"] == expert_feedback(
        x_or_y, "helper", "Return True only for primes."
    )
    assert "Perfect! No changes needed!" in observations["main"]["messages"][-1]["content"]
    _, rewards, *_ = game.step({"helper": IS_PRIME, "main": USES_AUX})
    assert rewards["main"] == 4.0
    assert len(endpoint.requests) == 1
