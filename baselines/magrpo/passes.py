"""The forward passes of one agent's MAGRPO step: completions in, logprobs on their tokens out.

An agent's trained completions (those with a non-zero advantage) are cut into
microbatches (:func:`agent_passes`), each a :class:`Pass` run on the model
when called, so that the caller's backward frees one graph before the next
pass builds its own:

* ``share_prompts``: the completions of a node share their prompt, which runs
  through the model once (:func:`baselines.training.forward.shared_prompt_logprobs`);
  a pass is a group of such completions;
* otherwise one row per prompt + completion, right padded, in microbatches of
  at most ``max_tokens_per_microbatch`` tokens, longest first.

The sampled tokens are the ones trained on, never re-tokenized. Nothing here
knows about processes: the trainer decides how many passes each runs.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import torch

from baselines.data.datums import trajectory_to_data
from baselines.samplers.base import Completion
from baselines.training.forward import (
    forward_logprobs,
    shared_prompt_logprobs,
    split_microbatches,
    split_prompt_groups,
)
from baselines.types import Datum, Trajectory, Transition

__all__ = ["Pass", "PassResult", "PassSettings", "agent_passes", "completion_datum"]


class PassResult(NamedTuple):
    """One pass over completion tokens, each tensor ``(rows, columns)``."""

    logprobs_B_T: torch.Tensor
    advantages_B_T: torch.Tensor
    """Each completion's advantage on its tokens, 0 elsewhere."""
    mask_B_T: torch.Tensor
    """1.0 on completion tokens, 0 on prompt and padding."""
    sampled_B_T: torch.Tensor
    """The sampler's logprobs of the same tokens."""
    width: int
    """Tokens run through the model."""


Pass = Callable[[Any], PassResult]
"""A microbatch's forward pass: called with the model, it returns the logprobs."""


@dataclass(frozen=True)
class PassSettings:
    """How an agent's passes run (the trainer's settings and its model's).

    Attributes:
        device: where the model is.
        share_prompts: one prompt pass per node's completions (see the module docstring).
        max_tokens_per_microbatch: the token budget of a microbatch.
        temperature: the sampling temperature; logits are divided by it.
        pad_token_id: the token that fills padded rows.
        actions_only: project to the vocabulary at completion tokens only
            (``logits_to_keep``; one row per completion).
    """

    device: torch.device
    share_prompts: bool
    max_tokens_per_microbatch: int
    temperature: float
    pad_token_id: int
    actions_only: bool


def agent_passes(trained: Sequence[tuple[Completion, float]], settings: PassSettings) -> list[Pass]:
    """The passes over ``trained`` (completion, advantage) pairs (see the module docstring)."""
    limit = settings.max_tokens_per_microbatch
    if settings.share_prompts:
        chunks = split_prompt_groups(
            [c.prompt_tokens for c, _ in trained], [len(c.tokens) for c, _ in trained], limit
        )
        return [
            functools.partial(_shared_prompt_pass, [trained[i] for i in chunk], settings)
            for chunk in chunks
        ]
    data = [d for c, a in trained if (d := completion_datum(c, a)) is not None]
    batches = split_microbatches([len(d) for d in data], limit, "padded", longest_first=True)
    return [
        functools.partial(_padded_pass, [data[i] for i in batch], settings) for batch in batches
    ]


def completion_datum(completion: Completion, advantage: float) -> Datum | None:
    """The one-turn Datum of ``completion`` with ``advantage``; None for an empty completion."""
    transition = Transition(completion.prompt_tokens, completion.tokens, completion.logprobs)
    data = trajectory_to_data(Trajectory((transition,)), advantage)
    return data[0] if data else None


def _shared_prompt_pass(
    chunk: Sequence[tuple[Completion, float]], settings: PassSettings, model: Any
) -> PassResult:
    completions = [c for c, _ in chunk]
    prompt = completions[0].prompt_tokens
    logprobs_K_C, mask_K_C = shared_prompt_logprobs(
        model,
        prompt,
        [c.tokens for c in completions],
        settings.device,
        temperature=settings.temperature,
        pad_token_id=settings.pad_token_id,
    )
    sampled_K_C = torch.zeros_like(mask_K_C)
    for row, c in enumerate(completions):
        sampled_K_C[row, : len(c.logprobs)] = torch.tensor(c.logprobs)
    advantages_K = torch.tensor([a for _, a in chunk], device=settings.device)
    width = len(prompt) + sum(len(c.tokens) for c in completions)
    return PassResult(logprobs_K_C, advantages_K[:, None] * mask_K_C, mask_K_C, sampled_K_C, width)


def _padded_pass(data: Sequence[Datum], settings: PassSettings, model: Any) -> PassResult:
    logprobs_B_T, _, inputs = forward_logprobs(
        model,
        list(data),
        "padded",
        settings.device,
        pad_token_id=settings.pad_token_id,
        actions_only=settings.actions_only,
        temperature=settings.temperature,
    )
    return PassResult(
        logprobs_B_T,
        inputs["advantages"],
        inputs["weights"],
        inputs["sampling_logprobs"],
        sum(len(d) for d in data),
    )
