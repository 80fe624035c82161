"""One agent's multi-turn trajectory as one TRL completion: sampled tokens plus masked env tokens.

TRL's ``GRPOTrainer`` trains on one ``prompt + completion`` sequence per
generation. A multi-turn trajectory becomes such a sequence::

    prompt      = the agent's first observation, rendered with the chat template
    completion  = action_1 + env_1 + action_2 + env_2 + ... + action_K [+ close]
    env_mask    =  1 ... 1    0...0     1 ... 1    0...0         1...1   [0...0]

``env_k`` holds the tokens that turn the sequence so far into the next
observation: the template's end of turn, the environment's next user message
and the next generation prompt. ``close`` ends a final action that stopped on
a stop string with the template's end-of-turn token, so TRL does not count the
completion as truncated. Environment tokens are context only: ``env_mask`` 0
keeps them out of the loss, and their logprob is 0.0 (TRL reads sampling
logprobs only under ``env_mask`` 1).

How ``env_k`` is found (:func:`env_tokens_between`):

1. *Token prefix.* When the next observation's tokens start with
   ``prompt_k + action_k``, ``env_k`` is the rest: the sequence equals what the
   sampler conditioned on at turn ``k + 1``, token for token.
2. *Text delta.* Otherwise (the sampled tokens are not how the tokenizer would
   encode their own text, or the template writes an end of turn that the
   sample lacks), both observations are rendered as text and ``env_k`` is the
   tokenized text that follows ``prompt_text_k + decoded action_k``. An end-of-turn
   token the sampler already produced is not written twice.
3. *Overhang.* A sample that stopped on a stop string may end in a token
   whose text runs past the stop string; the environment saw the text cut at
   the stop string. ``env_k`` then follows the cut text, and the sequence keeps
   the overhang (a few characters the sampler produced and the next turn did
   not see). Counted in :attr:`AssembledCompletion.num_overhangs`.
4. Anything else means the chat template does not extend a conversation by a
   prefix (e.g. it rewrites earlier assistant messages):
   :class:`TemplateNotPrefixStableError`, which points to the importance-sampling
   trainer, whose Datums start afresh whenever a context does not extend.

Sampled action tokens are never re-tokenized: they and their logprobs go into
the completion exactly as sampled.

This module never runs a model or an environment; it needs only a tokenizer.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from baselines.samplers.base import ChatRenderer, StopReason
from baselines.types import Tokens, as_tokens

__all__ = [
    "ENV_LOGPROB",
    "AssembledCompletion",
    "DeltaMethod",
    "EnvDelta",
    "SampledTurn",
    "TemplateNotPrefixStableError",
    "assemble_completion",
    "closing_tokens",
    "env_tokens_between",
    "format_completion",
    "mask_runs",
]

ENV_LOGPROB = 0.0
"""The logprob given to environment tokens: a finite placeholder that TRL never
uses, because every environment token has ``env_mask`` 0."""

DeltaMethod = Literal["tokens", "text", "overhang"]
"""How the environment tokens between two turns were found (see the module docstring)."""


class TemplateNotPrefixStableError(ValueError):
    """The chat template does not extend a conversation by a prefix, even as text."""


@dataclass(frozen=True)
class SampledTurn:
    """One sampled turn, as the assembler needs it.

    Attributes:
        messages: the chat the sampler continued (the observation's messages).
        prompt_ids: that chat rendered with the chat template (generation prompt included).
        action_ids: the sampled tokens, as sampled.
        logprobs: the sampler's logprob of each sampled token.
        text: the action text the environment received (cut at a stop string).
        stop_reason: why sampling ended.
        trained: whether the turn's tokens are trained on (``loss_weight > 0``).
    """

    messages: Sequence[Mapping[str, str]]
    prompt_ids: Tokens
    action_ids: Tokens
    logprobs: tuple[float, ...]
    text: str
    stop_reason: StopReason = "eos"
    trained: bool = True

    def __post_init__(self) -> None:
        object.__setattr__(self, "prompt_ids", as_tokens(self.prompt_ids, "prompt_ids"))
        object.__setattr__(self, "action_ids", as_tokens(self.action_ids, "action_ids"))
        object.__setattr__(self, "logprobs", tuple(float(x) for x in self.logprobs))
        if len(self.logprobs) != len(self.action_ids):
            raise ValueError(
                f"a turn needs one logprob per action token, got {len(self.action_ids)} tokens "
                f"and {len(self.logprobs)} logprobs"
            )


@dataclass(frozen=True)
class EnvDelta:
    """The environment tokens between two turns and how they were found."""

    tokens: Tokens
    method: DeltaMethod


@dataclass
class AssembledCompletion:
    """A trajectory as TRL's rollout functions return it (one row of each field).

    Attributes:
        prompt_ids: the first observation's tokens.
        completion_ids: sampled and environment tokens, in order.
        logprobs: sampling logprobs of sampled tokens, :data:`ENV_LOGPROB` for env tokens.
        env_mask: 1 for tokens to train on, 0 for environment tokens and for
            the tokens of turns with ``loss_weight`` 0.
        num_text_deltas: deltas found at the text level (method 2 or 3).
        num_overhangs: deltas that kept sampled text the next turn did not see (method 3).
    """

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    logprobs: list[float] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    num_text_deltas: int = 0
    num_overhangs: int = 0

    def extend(self, tokens: Sequence[int], logprobs: Sequence[float] | None, mask: int) -> None:
        """Append tokens with their logprobs (env tokens: None) and one mask value for all."""
        self.completion_ids.extend(tokens)
        self.logprobs.extend(logprobs if logprobs is not None else [ENV_LOGPROB] * len(tokens))
        self.env_mask.extend([mask] * len(tokens))


def _render_text(tokenizer: Any, messages: Sequence[Mapping[str, str]], generation: bool) -> str:
    return str(
        tokenizer.apply_chat_template(
            [dict(m) for m in messages], tokenize=False, add_generation_prompt=generation
        )
    )


def _decode(tokenizer: Any, ids: Sequence[int]) -> str:
    # Special tokens kept and no space clean-up: the text must be the tokens' exact text.
    return str(
        tokenizer.decode(list(ids), skip_special_tokens=False, clean_up_tokenization_spaces=False)
    )


def _encode(tokenizer: Any, text: str) -> Tokens:
    # Special-token text (an end-of-turn marker) becomes its special token, as in the template.
    return tuple(int(t) for t in tokenizer.encode(text, add_special_tokens=False))


def _eos_ids(tokenizer: Any, eos_token_ids: frozenset[int] | None) -> frozenset[int]:
    return eos_token_ids if eos_token_ids is not None else ChatRenderer(tokenizer).eos_token_ids


def _text_delta(
    tokenizer: Any, prev_text: str, turn: SampledTurn, next_text: str, eos: frozenset[int]
) -> tuple[str, DeltaMethod] | None:
    """The text after ``prev_text + action`` in ``next_text`` (methods 2 and 3), or None."""
    decoded = _decode(tokenizer, turn.action_ids)
    head = prev_text + decoded
    if next_text.startswith(head):
        return next_text[len(head) :], "text"
    action = list(turn.action_ids)
    while action and action[-1] in eos:
        action.pop()
    core = _decode(tokenizer, action)
    if len(action) < len(turn.action_ids) and next_text.startswith(prev_text + core):
        # The sample ended on an end-of-sequence token that differs from the template's
        # end of turn: both stay, the sampled one as a model token, the template's as env.
        return next_text[len(prev_text + core) :], "text"
    if core.startswith(turn.text) and next_text.startswith(prev_text + turn.text):
        return next_text[len(prev_text + turn.text) :], "overhang"
    return None


def env_tokens_between(
    tokenizer: Any,
    turn: SampledTurn,
    next_messages: Sequence[Mapping[str, str]],
    next_prompt_ids: Sequence[int],
    *,
    eos_token_ids: frozenset[int] | None = None,
) -> EnvDelta:
    r"""The environment tokens between ``turn`` and the next observation of the same agent.

    Args:
        tokenizer: the Hugging Face tokenizer (with its chat template) that rendered both prompts.
        turn: the earlier turn.
        next_messages: the agent's next observation (its ``messages``).
        next_prompt_ids: ``next_messages`` rendered with the chat template.
        eos_token_ids: tokens that end a sample; defaults to the sampler's
            (:attr:`baselines.samplers.ChatRenderer.eos_token_ids`).

    Returns:
        The tokens to append after ``turn.action_ids`` and the method that found them.

    Raises:
        TemplateNotPrefixStableError: the next observation does not extend
            ``turn``'s prompt and action, even as text.

    Example:
        >>> from transformers import AutoTokenizer
        >>> from baselines.models import tiny_checkpoint
        >>> tok = AutoTokenizer.from_pretrained(tiny_checkpoint())
        >>> render = ChatRenderer(tok)
        >>> chat = [{"role": "user", "content": "1 + 1?"}]
        >>> turn = SampledTurn(chat, render(chat), tok.encode("2<|im_end|>"), [0.0, 0.0], "2")
        >>> chat2 = [*chat, {"role": "assistant", "content": "2"},
        ...          {"role": "user", "content": "Sure?"}]
        >>> delta = env_tokens_between(tok, turn, chat2, render(chat2))
        >>> delta.method, tok.decode(delta.tokens)
        ('tokens', '\n<|im_start|>user\nSure?<|im_end|>\n<|im_start|>assistant\n')
    """
    head = turn.prompt_ids + turn.action_ids
    nxt = as_tokens(next_prompt_ids, "next_prompt_ids")
    if nxt[: len(head)] == head:
        return EnvDelta(nxt[len(head) :], "tokens")
    prev_text = _render_text(tokenizer, turn.messages, generation=True)
    next_text = _render_text(tokenizer, next_messages, generation=True)
    found = _text_delta(tokenizer, prev_text, turn, next_text, _eos_ids(tokenizer, eos_token_ids))
    if found is None:
        raise TemplateNotPrefixStableError(
            "the chat template does not extend the conversation by a prefix: the next "
            "observation, rendered as text, does not start with the previous prompt and "
            f"action (previous prompt ends {prev_text[-60:]!r}, action {turn.text[-60:]!r}, "
            f"next prompt has {next_text[len(prev_text) - 60 : len(prev_text) + 60]!r} there). "
            "TRL's GRPOTrainer needs one growing sequence per trajectory; train this "
            "environment and model with the importance-sampling trainer (baselines.is_trainer), "
            "which starts a new Datum whenever a context does not extend"
        )
    suffix, method = found
    return EnvDelta(_encode(tokenizer, suffix), method)


def closing_tokens(
    tokenizer: Any, turn: SampledTurn, *, eos_token_ids: frozenset[int] | None = None
) -> Tokens:
    """The template's end-of-turn tokens after a final action that stopped on a stop string.

    Returns the rendered text after ``prompt + action``, tokenized, up to and
    including the first end-of-sequence token; empty when the action already
    ended with one, was cut by the length limit, or the template writes no such
    token right after an assistant message.

    Example:
        >>> from transformers import AutoTokenizer
        >>> from baselines.models import tiny_checkpoint
        >>> tok = AutoTokenizer.from_pretrained(tiny_checkpoint())
        >>> chat = [{"role": "user", "content": "Say <a>1</a>"}]
        >>> action = tok.encode("<a>1</a>")
        >>> turn = SampledTurn(chat, ChatRenderer(tok)(chat), action, [0.0] * len(action),
        ...                    "<a>1</a>", stop_reason="stop")
        >>> tok.decode(closing_tokens(tok, turn))
        '<|im_end|>'
    """
    eos = _eos_ids(tokenizer, eos_token_ids)
    if turn.stop_reason != "stop" or (turn.action_ids and turn.action_ids[-1] in eos):
        return ()
    prev_text = _render_text(tokenizer, turn.messages, generation=True)
    closed = [*turn.messages, {"role": "assistant", "content": turn.text}]
    full_text = _render_text(tokenizer, closed, generation=False)
    found = _text_delta(tokenizer, prev_text, turn, full_text, eos)
    if found is None:
        return ()
    tokens = _encode(tokenizer, found[0])
    end = next((i + 1 for i, t in enumerate(tokens) if t in eos), 0)
    return tokens[:end]


def assemble_completion(
    tokenizer: Any,
    turns: Sequence[SampledTurn],
    *,
    close_final_turn: bool = True,
    eos_token_ids: frozenset[int] | None = None,
) -> AssembledCompletion:
    """Assemble one agent's turns into a prompt, a completion, its logprobs and its env mask.

    Args:
        tokenizer: the tokenizer whose chat template rendered every prompt.
        turns: the agent's turns in order; each turn's messages must extend the
            previous turn's messages and action (a chat observation).
        close_final_turn: append :func:`closing_tokens` (env tokens) after the last action.
        eos_token_ids: see :func:`env_tokens_between`.

    Raises:
        ValueError: no turns.
        TemplateNotPrefixStableError: see :func:`env_tokens_between`.
    """
    if not turns:
        raise ValueError("a completion needs at least one turn")
    eos = _eos_ids(tokenizer, eos_token_ids)
    out = AssembledCompletion(prompt_ids=list(turns[0].prompt_ids))
    for k, turn in enumerate(turns):
        out.extend(turn.action_ids, turn.logprobs, 1 if turn.trained else 0)
        if k + 1 < len(turns):
            nxt = turns[k + 1]
            delta = env_tokens_between(
                tokenizer, turn, nxt.messages, nxt.prompt_ids, eos_token_ids=eos
            )
            out.extend(delta.tokens, None, 0)
            out.num_text_deltas += delta.method != "tokens"
            out.num_overhangs += delta.method == "overhang"
        elif close_final_turn:
            out.extend(closing_tokens(tokenizer, turn, eos_token_ids=eos), None, 0)
    return out


def mask_runs(
    tokenizer: Any, completion_ids: Sequence[int], env_mask: Sequence[int]
) -> list[tuple[int, int, str]]:
    """A completion as its runs of trained and masked tokens, for people to read.

    Returns:
        ``(mask, num_tokens, text)`` per maximal run of equal ``env_mask``
        values, in order: ``mask`` 1 for tokens the loss trains on (the agent's
        own samples), 0 for context (what the environment said in between, and a
        closing end of turn); ``text`` is the run decoded with its special tokens.

    Raises:
        ValueError: ``completion_ids`` and ``env_mask`` differ in length.
    """
    if len(completion_ids) != len(env_mask):
        raise ValueError(
            f"completion_ids has {len(completion_ids)} tokens but env_mask {len(env_mask)}: "
            "pass one TRL completion's completion_ids and env_mask"
        )
    runs: list[tuple[int, int, str]] = []
    start = 0
    for end in range(1, len(env_mask) + 1):
        if end == len(env_mask) or env_mask[end] != env_mask[start]:
            ids = list(completion_ids[start:end])
            runs.append((int(env_mask[start]), len(ids), _decode(tokenizer, ids)))
            start = end
    return runs


def format_completion(
    tokenizer: Any,
    prompt_ids: Sequence[int],
    completion_ids: Sequence[int],
    env_mask: Sequence[int],
    *,
    prompt_chars: int | None = None,
) -> str:
    """One TRL generation as text: its prompt, then each run of :func:`mask_runs` under a header.

    Args:
        tokenizer: the tokenizer that made the ids.
        prompt_ids: one generation's prompt, as a rollout function hands it to
            TRL (e.g. ``rollout.last_output["prompt_ids"][0]``).
        completion_ids: that generation's completion.
        env_mask: that completion's mask (1: trained, 0: context).
        prompt_chars: show only the prompt's last this many characters (None: all).

    Returns:
        Lines ``--- prompt, N tokens ---`` and ``--- env_mask M (trained|masked:
        context only), N tokens ---``, each followed by its decoded text.
    """
    prompt = _decode(tokenizer, prompt_ids)
    cut = prompt_chars is not None and len(prompt) > prompt_chars
    lines = [f"--- prompt, {len(prompt_ids)} tokens{' (its end)' if cut else ''} ---"]
    lines.append(prompt[-prompt_chars:] if cut and prompt_chars else prompt)
    for mask, size, text in mask_runs(tokenizer, completion_ids, env_mask):
        label = "trained" if mask else "masked: context only"
        lines += [f"--- env_mask {mask} ({label}), {size} tokens ---", text]
    return "\n".join(lines)
