"""A policy that answers with scripted text agents (a family's ``agents`` module), no model.

Useful for tests, demos and fixed opponents. With a tokenizer, prompts and
answers are tokenized like a model's would be; without one, UTF-8 bytes stand
in for tokens, so the whole token-level pipeline runs without transformers.
Scripted tokens carry logprob 0 (the agent chose them with certainty).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from baselines.samplers.base import ChatRenderer, Completion, SampleRequest, SamplingParams
from llm_envs.family import Agent as TextAgent

__all__ = ["ScriptedPolicy", "byte_render"]


def byte_render(messages: Sequence[Mapping[str, str]]) -> tuple[int, ...]:
    """Render a chat as UTF-8 bytes, one "token" per byte (for tokenizer-free tests)."""
    text = "".join(f"<{m['role']}>{m['content']}\n" for m in messages) + "<assistant>"
    return tuple(text.encode("utf-8"))


class ScriptedPolicy:
    """Answers each request with the text agent assigned to its agent name.

    Args:
        agents: one :class:`~llm_envs.family.Agent` for every agent, or a
            mapping from agent name to agent.
        tokenizer: a Hugging Face tokenizer with a chat template, or ``None``
            for byte tokens.
    """

    def __init__(
        self, agents: TextAgent | Mapping[str, TextAgent], tokenizer: Any | None = None
    ) -> None:
        self.agents = agents
        self.tokenizer = tokenizer
        self.renderer = ChatRenderer(tokenizer) if tokenizer is not None else None

    def _agent(self, name: str | None) -> TextAgent:
        if not isinstance(self.agents, Mapping):
            return self.agents
        if name is None or name not in self.agents:
            raise KeyError(
                f"ScriptedPolicy has no agent for {name!r}; it knows {sorted(self.agents)}"
            )
        return self.agents[name]

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Ask each request's agent for its text and tokenize it."""
        out = []
        for r in requests:
            observation: Any = {"messages": [dict(m) for m in r.messages]}
            text = self._agent(r.agent)(observation, r.info)
            if self.renderer is None:
                prompt = byte_render(r.messages)
                tokens = tuple(text.encode("utf-8"))
            else:
                prompt = self.renderer(r.messages)
                tokens = tuple(self.renderer.tokenizer.encode(text, add_special_tokens=False))
            out.append(Completion(prompt, tokens, (0.0,) * len(tokens), text, "eos"))
        return out
