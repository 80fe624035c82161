"""The sampler interface every policy implements, and the chat-template renderer.

A policy turns chat observations into sampled completions: prompt tokens (the
observation rendered with the chat template), the sampled completion tokens,
the sampler's logprob of each of them, and the completion text. Completion
tokens are the sampled ones: text is decoded from them, never the other way
round (the expert-iteration plan: "Completion tokens are reused verbatim").

Stop strings follow one rule in every backend: sampling ends at the first
stop string, the completion keeps the token that completed it, and the text
runs up to and including the stop string (the environment sees the closing
tag it asked for). Text that a final token carries past the stop string is
cut from ``text`` but stays in ``tokens``, since it was sampled.

Nothing here imports torch: backends import their heavy dependencies when built.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol, runtime_checkable

from llm_envs.contract import CONTEXT_KEYS, STOP

__all__ = [
    "ChatRenderer",
    "Completion",
    "Policy",
    "SampleRequest",
    "SamplingParams",
    "StopReason",
    "cut_at_stop",
]

StopReason = Literal["stop", "eos", "length"]
"""Why sampling ended: a stop string, the end-of-sequence token, or ``max_tokens``."""


@dataclass(frozen=True)
class SamplingParams:
    """How to sample. The defaults sample from the model's own distribution.

    Attributes:
        max_tokens: most completion tokens per request.
        temperature: softmax temperature.
        top_p: nucleus sampling mass.
        seed: base seed; request ``i`` of a call uses ``seed + i`` where the
            backend supports per-request seeds.

    Every backend returns the logprobs of the distribution the tokens were drawn
    from, temperature and ``top_p`` applied: that is the behaviour policy ``q``
    of importance sampling. With the defaults it is the model's own distribution,
    so on-policy ratios start at 1.
    """

    max_tokens: int = 256
    temperature: float = 1.0
    top_p: float = 1.0
    seed: int | None = None

    def __post_init__(self) -> None:
        if self.max_tokens < 1:
            raise ValueError(f"max_tokens must be >= 1, got {self.max_tokens}")
        if not self.temperature > 0:
            raise ValueError(
                f"temperature must be > 0, got {self.temperature}; for greedy decoding "
                "use a small temperature such as 0.01 (vLLM samples any lower one at 0.01)"
            )
        if not 0 < self.top_p <= 1:
            raise ValueError(f"top_p must be in (0, 1], got {self.top_p}")


@dataclass(frozen=True)
class SampleRequest:
    """One completion to sample.

    Attributes:
        messages: the chat to continue (an environment observation's ``messages``).
        stop: stop strings (an environment's ``info["stop"]``).
        agent: the environment's agent name, for policies that act per agent
            (scripted agents, fixed opponents).
        info: the environment's context infos for this turn (scripted agents read them).
    """

    messages: Sequence[Mapping[str, str]]
    stop: Sequence[str] = ()
    agent: str | None = None
    info: Mapping[str, Any] = field(default_factory=dict)

    @classmethod
    def for_turn(cls, agent: str, observation: Any, info: Mapping[str, Any]) -> SampleRequest:
        """The request for ``agent``'s upcoming turn, from what the environment handed it.

        The one place where an environment's observation and infos become a
        request (used by :mod:`baselines.rollouts` and the MAGRPO tree): the
        chat is ``observation["messages"]``, the stop strings ``info["stop"]``,
        and ``info`` keeps only the context keys
        (:data:`llm_envs.contract.CONTEXT_KEYS`: ``stop``, ``training_messages``,
        ``strategy``, ``round``, ``turn``), which describe the turn about to be
        sampled; outcome keys describe the previous action and are dropped.

        Raises:
            TypeError: the observation is not a chat (``{"messages": [...]}``).

        Example:
            >>> observation = {"messages": [{"role": "user", "content": "2+2?"}]}
            >>> r = SampleRequest.for_turn("solver", observation, {"stop": ["</a>"], "correct": 1})
            >>> r.stop, r.agent, dict(r.info)
            (('</a>',), 'solver', {'stop': ['</a>']})
        """
        if not isinstance(observation, Mapping) or "messages" not in observation:
            raise TypeError(
                f"the observation of {agent} is not a chat ({{'messages': [...]}}); "
                "sampling needs llm-envs observations"
            )
        context = {k: v for k, v in info.items() if k in CONTEXT_KEYS}
        return cls(observation["messages"], tuple(info.get(STOP, ())), agent, context)


@dataclass(frozen=True)
class Completion:
    """A sampled completion, in tokens and text.

    Attributes:
        prompt_tokens: the rendered observation the sampler conditioned on.
        tokens: the sampled completion tokens.
        logprobs: the sampler's logprob of each sampled token.
        text: the completion text (see the module docstring for stop strings).
        stop_reason: why sampling ended.
    """

    prompt_tokens: tuple[int, ...]
    tokens: tuple[int, ...]
    logprobs: tuple[float, ...]
    text: str
    stop_reason: StopReason

    def __post_init__(self) -> None:
        if len(self.tokens) != len(self.logprobs):
            raise ValueError(
                f"a completion needs one logprob per token, got {len(self.tokens)} tokens "
                f"and {len(self.logprobs)} logprobs"
            )
        if not all(math.isfinite(lp) for lp in self.logprobs):
            raise ValueError("sampled-token logprobs must be finite")


@runtime_checkable
class Policy(Protocol):
    """Samples one completion per request, batching the requests however it can."""

    def sample(self, requests: Sequence[SampleRequest], params: SamplingParams) -> list[Completion]:
        """Return one :class:`Completion` per request, in order."""
        ...


def cut_at_stop(text: str, stop: Sequence[str]) -> tuple[str, bool]:
    """Cut ``text`` right after the earliest stop string; say whether one was found.

    Example:
        >>> cut_at_stop("<a>1</a> and more", ["</a>"])
        ('<a>1</a>', True)
        >>> cut_at_stop("no stop here", ["</a>"])
        ('no stop here', False)
    """
    best = -1
    for s in stop:
        if not s:
            continue
        i = text.find(s)
        if i != -1 and (best == -1 or i + len(s) < best):
            best = i + len(s)
    return (text[:best], True) if best != -1 else (text, False)


def finished_text(text: str, stop: Sequence[str], reason: str | None) -> tuple[str, StopReason]:
    """An engine's sample cut after its earliest stop string, and why it ended.

    ``stop`` when a stop string is in ``text``, else ``length`` when the engine
    says it hit the token limit (``reason``, the engine's ``finish_reason``,
    is ``"length"`` in vLLM and OpenAI-compatible servers), else ``eos``.

    Example:
        >>> finished_text("<a>1</a> more", ["</a>"], "length")
        ('<a>1</a>', 'stop')
        >>> finished_text("<a>1", ["</a>"], "length"), finished_text("<a>1", ["</a>"], "stop")
        (('<a>1', 'length'), ('<a>1', 'eos'))
    """
    text, found = cut_at_stop(text, stop)
    if found:
        return text, "stop"
    return text, "length" if reason == "length" else "eos"


class ChatRenderer:
    """Renders chat messages into prompt tokens with a tokenizer's chat template.

    The same renderer must render the sampling observation and the training
    context (the expert-iteration plan: "Renderer must match model family"), so trainers build
    one and hand it to both the policy and the data pipeline.

    Args:
        tokenizer: a Hugging Face tokenizer with a chat template.
    """

    def __init__(self, tokenizer: Any) -> None:
        if getattr(tokenizer, "chat_template", None) is None:
            raise ValueError(
                f"{type(tokenizer).__name__} has no chat template; set tokenizer.chat_template "
                "or use an instruction-tuned model"
            )
        self.tokenizer = tokenizer

    def __call__(self, messages: Sequence[Mapping[str, str]]) -> tuple[int, ...]:
        """Render ``messages`` with the generation prompt, as token ids."""
        ids = self.tokenizer.apply_chat_template(
            [dict(m) for m in messages], add_generation_prompt=True, tokenize=True
        )
        if isinstance(ids, Mapping) or hasattr(ids, "input_ids"):
            ids = ids["input_ids"]
        return tuple(int(t) for t in ids)

    def decode(self, tokens: Sequence[int]) -> str:
        """Decode completion tokens to text, special tokens dropped."""
        return str(self.tokenizer.decode(list(tokens), skip_special_tokens=True))

    @property
    def eos_token_ids(self) -> frozenset[int]:
        """Token ids that end a completion: the tokenizer's eos (and the template's end of turn)."""
        ids = set()
        if self.tokenizer.eos_token_id is not None:
            ids.add(int(self.tokenizer.eos_token_id))
        for name in ("<|im_end|>", "<|eot_id|>", "<end_of_turn>"):
            tid = self.tokenizer.convert_tokens_to_ids(name)
            if isinstance(tid, int) and tid != self.tokenizer.unk_token_id and tid >= 0:
                ids.add(tid)
        return frozenset(ids)
