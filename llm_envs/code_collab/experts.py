"""Experts for the ``expert_edits`` mode: any callable, and an OpenAI-compatible chat adapter.

An expert is any callable ``expert(problem, helper_code, main_code) -> edits``
(:class:`Expert`): it reads the problem and the agents' code (cleaned: fences
and prose removed) and proposes concise edits, either one text for every agent
or a text per role (``{"aux": ..., "main": ...}``). The environment puts the
edits in each agent's next prompt.

:class:`OpenAIChatExpert` asks a model behind any OpenAI-compatible
``/chat/completions`` endpoint (OpenAI, DeepSeek, vLLM's server, ...) for JSON
edits. It uses only the standard library (:mod:`urllib`), so ``llm_envs`` keeps
its small dependency set. It never runs code it receives.
"""

from __future__ import annotations

import json
import os
import re
import time
import urllib.error
import urllib.request
from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from llm_envs.arguments import check_int, check_number
from llm_envs.code_collab.feedback import ExpertEdits
from llm_envs.code_collab.rewards import AUX_NAME
from llm_envs.tasks.problems import CodeProblem

__all__ = ["Expert", "ExpertError", "OpenAIChatExpert", "expert_prompt", "parse_expert_reply"]

_RETRYABLE_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
_JSON_OBJECT = re.compile(r"\{.*\}", re.DOTALL)


class Expert(Protocol):
    """Proposes edits for a joint action."""

    def __call__(self, problem: CodeProblem, helper_code: str, main_code: str) -> ExpertEdits:
        """Return one text of edits for every agent, or a text per role."""
        ...


class ExpertError(RuntimeError):
    """The expert endpoint could not be reached or answered nonsense, after every retry."""


def expert_prompt(
    problem: CodeProblem, helper_code: str, main_code: str, *, num_agents: int = 2
) -> str:
    """The review request sent to an expert model.

    It asks for a JSON object with the key ``"main"`` (and ``"aux"`` with two
    agents) whose values are concise edits, a minimal implementation when a
    function is missing, or ``"Perfect! No changes needed!"``.
    """
    entry = problem.entry_point
    if num_agents == 1:
        team = f"One agent implements the entry function `{entry}`."
        keys = '{"main": "<edits for main>"}'
        code = f"Code of `{entry}`:\n{main_code or '<missing>'}"
    else:
        team = (
            f"A helper agent implements the helper function `{AUX_NAME}`; the main agent "
            f"implements the entry function `{entry}`, which may call `{AUX_NAME}`."
        )
        keys = '{"aux": "<edits for aux>", "main": "<edits for main>"}'
        code = (
            f"Code of `{AUX_NAME}` (helper):\n{helper_code or '<missing>'}\n\n"
            f"Code of `{entry}` (main):\n{main_code or '<missing>'}"
        )
    return "\n".join(
        [
            "You are an expert reviewing code written for this task:",
            problem.prompt.strip("\n"),
            "",
            team,
            "Propose concise edits that would make the code pass the task's unit tests.",
            "- If a function is missing, give a minimal correct implementation.",
            '- If a function needs no change, write "Perfect! No changes needed!".',
            f"Answer with JSON only, in this format: {keys}",
            "",
            code,
        ]
    )


def parse_expert_reply(text: str) -> ExpertEdits:
    """Read the edits out of an expert's reply.

    The last JSON object with a ``"main"`` or ``"aux"`` key gives the edits per
    role; a reply without one is used as it is, for every agent.

    Example:
        >>> parse_expert_reply('Sure: {"aux": "return a set", "main": "call aux(n)"}')
        {'aux': 'return a set', 'main': 'call aux(n)'}
        >>> parse_expert_reply("Rename x to n.")
        'Rename x to n.'
    """
    starts = [m.start() for m in re.finditer(r"\{", text)]
    decoder = json.JSONDecoder()
    for start in reversed(starts):
        try:
            value, _ = decoder.raw_decode(text, start)
        except (json.JSONDecodeError, RecursionError):
            # Nesting deeper than the interpreter's limit is no edit either (it
            # raised out of the environment's step). That limit also bounds each
            # start's cost: ~6,000 characters of '{"a":[', 0.02 s for a 2,000-
            # character reply of them (the default max_tokens), 0.5 s for 8,000.
            continue
        if isinstance(value, dict) and ({"aux", "main"} & value.keys()):
            return {
                key: value[key] if isinstance(value[key], str) else json.dumps(value[key])
                for key in ("aux", "main")
                if key in value
            }
    return text.strip()


class OpenAIChatExpert:
    """An expert behind an OpenAI-compatible chat completions endpoint (standard library only).

    Args:
        model: the model name the endpoint serves, e.g. ``"deepseek-coder"``.
        base_url: the API root; requests go to ``{base_url}/chat/completions``.
        api_key: the bearer token; None reads the variable ``api_key_env`` at
            each call, and sends no token when it is unset (local servers).
        api_key_env: the environment variable holding the token.
        num_agents: 1 asks for edits of the entry point only.
        temperature: sampling temperature.
        max_tokens: longest reply.
        timeout: seconds per HTTP request.
        max_retries: further attempts after a failed one (connection errors,
            timeouts, HTTP 408/429/5xx, a reply that is not JSON); other HTTP
            errors (401, 404...) fail at once.
        retry_delay: seconds before the first retry, doubled after each.

    Raises:
        ExpertError: from ``__call__``, once every attempt has failed. The
            environment lets it propagate: silently empty feedback would
            corrupt training without a trace.

    Example:
        >>> expert = OpenAIChatExpert("deepseek-coder", base_url="https://api.deepseek.com")
        >>> expert.url
        'https://api.deepseek.com/chat/completions'
    """

    def __init__(
        self,
        model: str,
        base_url: str = "https://api.openai.com/v1",
        api_key: str | None = None,
        *,
        api_key_env: str = "OPENAI_API_KEY",
        num_agents: int = 2,
        temperature: float = 0.0,
        max_tokens: int = 1024,
        timeout: float = 60.0,
        max_retries: int = 2,
        retry_delay: float = 1.0,
    ) -> None:
        if not isinstance(model, str) or not model:
            raise ValueError(f"model must be a non-empty model name, got {model!r}")
        if not isinstance(base_url, str) or not base_url.startswith(("http://", "https://")):
            raise ValueError(
                f"base_url must be an http(s) URL such as 'https://api.openai.com/v1', "
                f"got {base_url!r}"
            )
        if not isinstance(api_key_env, str) or not api_key_env:
            raise TypeError(f"api_key_env must name an environment variable, got {api_key_env!r}")
        self.model = model
        self.url = base_url.rstrip("/") + "/chat/completions"
        self.api_key = api_key
        self.api_key_env = api_key_env
        self.num_agents = check_int("num_agents", num_agents, minimum=1, maximum=2)
        self.temperature = check_number("temperature", temperature, minimum=0)
        self.max_tokens = check_int("max_tokens", max_tokens, minimum=1)
        self.timeout = check_number(
            "timeout", timeout, minimum=0, open_minimum=True, unit=" of seconds"
        )
        self.max_retries = check_int("max_retries", max_retries, minimum=0)
        self.retry_delay = check_number("retry_delay", retry_delay, minimum=0, unit=" of seconds")

    def __repr__(self) -> str:
        return f"OpenAIChatExpert(model={self.model!r}, url={self.url!r})"

    def __call__(self, problem: CodeProblem, helper_code: str, main_code: str) -> ExpertEdits:
        """Ask the model for edits of this joint action."""
        prompt = expert_prompt(problem, helper_code, main_code, num_agents=self.num_agents)
        return parse_expert_reply(self.complete([{"role": "user", "content": prompt}]))

    def complete(self, messages: Sequence[Mapping[str, str]]) -> str:
        """Send one chat completion request and return the reply's text (with retries)."""
        body = json.dumps(
            {
                "model": self.model,
                "messages": [dict(m) for m in messages],
                "temperature": self.temperature,
                "max_tokens": self.max_tokens,
            }
        ).encode()
        headers = {"Content-Type": "application/json", "Accept": "application/json"}
        key = self.api_key if self.api_key is not None else os.environ.get(self.api_key_env)
        if key:
            headers["Authorization"] = f"Bearer {key}"
        delay = self.retry_delay
        failure = "no attempt made"
        for attempt in range(self.max_retries + 1):
            if attempt:
                time.sleep(delay)
                delay *= 2
            request = urllib.request.Request(self.url, data=body, headers=headers, method="POST")
            try:
                with urllib.request.urlopen(request, timeout=self.timeout) as response:
                    payload = response.read()
            except urllib.error.HTTPError as error:
                detail = error.read(500).decode("utf-8", "replace")
                failure = f"HTTP {error.code} {error.reason}: {detail}"
                if error.code not in _RETRYABLE_STATUS:
                    break
                continue
            except (urllib.error.URLError, TimeoutError, OSError) as error:
                failure = f"{type(error).__name__}: {error}"
                continue
            try:
                return _reply_text(payload)
            except ValueError as error:
                failure = str(error)
        raise ExpertError(
            f"the expert endpoint {self.url} failed after {attempt + 1} attempt(s): {failure}. "
            "Check base_url, model and the API key (api_key= or the "
            f"{self.api_key_env} variable)"
        )


def _reply_text(payload: bytes) -> str:
    try:
        reply: Any = json.loads(payload)
        content = reply["choices"][0]["message"]["content"]
    except (ValueError, KeyError, IndexError, TypeError):
        raise ValueError(f"the reply is not an OpenAI chat completion: {payload[:200]!r}") from None
    if not isinstance(content, str):
        raise ValueError(f"the reply's message content is not text: {content!r:.200}")
    return content
