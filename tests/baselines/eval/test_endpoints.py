"""Models behind OpenAI-compatible servers: retries, backoff, the API key, and eval over HTTP.

A local ``http.server`` plays the server and fails on purpose: 500s then a
success (retried), 429 with ``Retry-After`` (retried after the wait), 400 (not
retried), always 503 (a clear error naming the URL after N attempts).
"""

from __future__ import annotations

import itertools
import json
import time

import pytest

from baselines.eval.__main__ import main
from baselines.samplers import SampleRequest, SamplingParams
from baselines.samplers.openai_policy import OpenAIPolicy, ServerError
from llm_envs.debate import format_answer
from tests.loopback import JSON, LoopbackServer

CHAT = [SampleRequest([{"role": "user", "content": "What is 1 + 1?"}])]
SECRET = "sk-test-do-not-print"


class FakeServer(LoopbackServer):
    """An OpenAI-compatible chat endpoint answering from a script of statuses."""

    def __init__(self, statuses, text="2", retry_after=None):
        super().__init__()
        self.statuses = list(statuses)  # popped per request; empty: 200 from then on
        self.text = text
        self.retry_after = retry_after
        self.requests = []  # (time, headers, body) of every request

    def respond(self, method, path, headers, body):
        if method != "POST":
            return 501, {}, b""  # chat completions only
        self.requests.append((time.monotonic(), dict(headers), body))
        status = self.statuses.pop(0) if self.statuses else 200
        if status != 200:
            wait = {"Retry-After": str(self.retry_after)} if self.retry_after is not None else {}
            return status, wait if status == 429 else {}, b'{"error": "on purpose"}'
        answer = {"choices": [{"message": {"content": self.text}, "finish_reason": "stop"}]}
        return 200, JSON, json.dumps(answer).encode()


def policy(url, **kwargs):
    return OpenAIPolicy(url, "fake", **{"backoff": 0.01, "retries": 4, **kwargs})


def test_server_errors_are_retried_until_the_answer_comes():
    with FakeServer([500, 502, 503]) as server:
        (completion,) = policy(server.url).sample(CHAT, SamplingParams(8))
    assert completion.text == "2"
    assert len(server.requests) == 4


def test_backoff_doubles_between_attempts():
    with FakeServer([500, 500, 500]) as server:
        policy(server.url, backoff=0.05).sample(CHAT, SamplingParams(8))
    times = [t for t, _, _ in server.requests]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert gaps[0] >= 0.05 and gaps[1] >= 0.1 and gaps[2] >= 0.2


def test_too_many_requests_waits_for_retry_after():
    with FakeServer([429], retry_after=0.3) as server:
        policy(server.url).sample(CHAT, SamplingParams(8))
    (first, *_), (second, *_) = server.requests
    assert second - first >= 0.3


def test_a_server_that_stays_down_fails_naming_the_url_after_n_attempts():
    with FakeServer([503] * 10) as server:
        with pytest.raises(ServerError) as error:
            policy(server.url, retries=3).sample(CHAT, SamplingParams(8))
        assert len(server.requests) == 3
    message = str(error.value)
    assert f"POST {server.url}/chat/completions failed after 3 attempts" in message
    assert "HTTP 503" in message


def test_a_client_error_is_not_retried(free_port):
    with FakeServer([400]) as server:
        with pytest.raises(ServerError, match="-> 400"):
            policy(server.url).sample(CHAT, SamplingParams(8))
        assert len(server.requests) == 1
    with pytest.raises(ServerError, match=r"failed after 2 attempts.*Check that the server is up"):
        policy(f"http://127.0.0.1:{free_port}/v1", retries=2).sample(CHAT, SamplingParams(8))


def test_the_api_key_comes_from_the_named_variable_and_is_never_shown(monkeypatch):
    monkeypatch.setenv("MY_KEY", SECRET)
    with FakeServer([401]) as server:
        p = policy(server.url, api_key_env="MY_KEY")
        with pytest.raises(ServerError) as error:
            p.sample(CHAT, SamplingParams(8))
    (_, headers, _) = server.requests[0]
    assert headers["Authorization"] == f"Bearer {SECRET}"
    assert "check the API key in the MY_KEY variable" in str(error.value)
    assert SECRET not in str(error.value) and SECRET not in repr(p)
    with pytest.raises(ValueError, match="api_key_env must name an environment variable"):
        OpenAIPolicy("http://x/v1", "m", api_key_env="")


def debate_answer():
    return format_answer("2", comparisons=["Agent 0 > Agent 1"], consensus=True, reason="ok")


def test_eval_against_a_server_that_fails_then_resumes(tmp_path, monkeypatch, capsys):
    monkeypatch.setenv("EVAL_KEY", SECRET)
    out = tmp_path / "run"
    args = [
        "--env-kwargs", '{"num_agents": 2, "max_rounds": 1}', "--problems", "2",
        "--concurrency", "1", "--retries", "2", "--api-key-env", "EVAL_KEY",
        "--num-bootstrap", "50", "--output-dir", str(out), "--no-progress",
    ]  # fmt: skip
    # Two debates of two turns each; the server fails for good at the third request.
    with FakeServer([200, 200] + [500] * 2, text=debate_answer()) as server:
        models = ["--models", f"api={server.url}#fake"]
        assert main([*args, *models]) == 1
        err = capsys.readouterr().err
        assert f"POST {server.url}/chat/completions failed after 2 attempts" in err
        assert "run the same command again" in err
        results = (out / "episodes" / "eval.jsonl").read_text().splitlines()
        assert [json.loads(line)["episode_id"] for line in results] == ["p00000-s000"]

        assert main([*args, *models]) == 0  # the server is back
        # Only the missing debate was played again; then the majority vote's answers alone
        # (2 problems x 2 agents).
        assert len(server.requests) == 2 + 2 + 2 + 2 * 2
        assert all(h["Authorization"] == f"Bearer {SECRET}" for _, h, _ in server.requests)
    printed = capsys.readouterr().out
    assert "| api | 2 |" in printed
    for path in out.rglob("*"):
        if path.is_file():
            assert SECRET not in path.read_text(errors="replace"), path
