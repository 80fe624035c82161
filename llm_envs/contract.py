"""The environment contract: what every llm-envs environment hands an agent and a trainer.

This module is the single reference for the shapes that cross the boundary
between environments and trainers. Environments import these names; the
:mod:`baselines` package reads them. Nothing here knows about tokens: an
environment speaks text, and turning text into tokens is the trainer's job.

Observation
    A dict ``{"messages": [Message, ...]}``: the chat that the acting agent's
    model should continue. A trainer renders it with the tokenizer's chat
    template (``add_generation_prompt=True``); an API client sends it as is.

Action
    The agent's raw text. Any string is accepted; text that breaks an
    environment's output contract is an *outcome* (a parse error with its
    reward), never an exception.

Infos
    ``infos[agent]`` (returned by ``last()``) carries what a trainer needs and an
    observation must not show. Its keys come in two kinds:

    *Context keys* describe the observation returned alongside them, i.e. the
    turn the agent is about to take:

    - :data:`STOP`: stop strings for sampling this turn.
    - :data:`TRAINING_MESSAGES`: the chat to train this turn's completion on,
      when it differs from the observation (the context swap of expert
      iteration). Absent when there is no swap.
    - :data:`STRATEGY`: the search strategy that produced the context (expert
      iteration).
    - :data:`ROUND` and :data:`TURN`: where the upcoming turn falls in the episode.

    The set :data:`CONTEXT_KEYS` lists them; a trainer attaches them to the turn
    it is about to sample.

    *Outcome keys* describe the agent's previous action, whose reward arrives
    in the same ``last()``:

    - :data:`LOSS_WEIGHT`: how much the previous action's tokens count in the
      loss (``0.0`` for turns that must not be trained on, such as a masked
      parse error). Absent means ``1.0``.
    - environment metrics (parse errors, test results, answer correctness...).

    Every key not in :data:`CONTEXT_KEYS` is an outcome key; a trainer attaches
    it to the turn the agent just took.

    *Reserved keys* (:data:`RESERVED_INFO_KEYS`) are the names of metrics the
    trainers compute themselves (MAGRPO's ``solved``, the importance-sampling
    trainer's ``total_turns``...): an outcome of that name is dropped or
    replaces the trainer's own number, so an environment never uses one. The
    trainers' rollouts warn, once per key, when an info holds one.

    Infos are deterministic for a seed: no wall-clock times, no object ids.

Rewards
    PettingZoo's: a reward given to an agent accumulates until that agent's
    next ``last()``. Final group rewards arrive when the episode ends, before
    each agent's last (dead) step.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Final, Literal, TypedDict

__all__ = [
    "CONTEXT_KEYS",
    "LOSS_WEIGHT",
    "RESERVED_INFO_KEYS",
    "ROUND",
    "STOP",
    "STRATEGY",
    "TRAINING_MESSAGES",
    "TURN",
    "Message",
    "Observation",
    "Role",
    "copy_messages",
]

Role = Literal["system", "user", "assistant"]


class Message(TypedDict):
    """One chat message."""

    role: Role
    content: str


class Observation(TypedDict):
    """What an agent sees: the chat its model should continue."""

    messages: list[Message]


def copy_messages(messages: Iterable[Message]) -> list[Message]:
    """Fresh ``{"role", "content"}`` dicts: a caller editing the copy never edits the original.

    Environments hand out copies (observations, infos, records) so that what a
    trainer does to a chat never reaches the environment's state.

    Example:
        >>> chat: list[Message] = [{"role": "user", "content": "Hi"}]
        >>> copied = copy_messages(chat)
        >>> copied == chat, copied[0] is chat[0]
        (True, False)
    """
    return [{"role": m["role"], "content": m["content"]} for m in messages]


STOP: Final = "stop"
"""Info key (context): ``list[str]`` of stop strings for sampling the upcoming turn."""

TRAINING_MESSAGES: Final = "training_messages"
"""Info key (context): ``list[Message]``, the training context for the upcoming turn."""

STRATEGY: Final = "strategy"
"""Info key (context): ``str``, the search strategy of the upcoming turn."""

ROUND: Final = "round"
"""Info key (context): ``int``, the 1-based round of the upcoming turn, where an env has rounds."""

TURN: Final = "turn"
"""Info key (context): ``int``, the 0-based index of the upcoming turn in the episode."""

CONTEXT_KEYS: Final = frozenset({STOP, TRAINING_MESSAGES, STRATEGY, ROUND, TURN})
"""Info keys that describe the upcoming turn; all other keys describe the previous action."""

LOSS_WEIGHT: Final = "loss_weight"
"""Info key (outcome): ``float`` weight of the previous action's tokens in the loss."""

_EPISODE_METRIC = (
    "the importance-sampling trainer's episode metrics (env/all/{key}): the info's mean "
    "would replace its own count"
)
_GRPO_METRIC = "TRL GRPO's per-completion metrics (env/{key}): the info would replace its own value"
_TREE_METRIC = "MAGRPO's tree metrics (env/turn_T/{key}): an info of that name is not logged"

RESERVED_INFO_KEYS: Final[Mapping[str, str]] = MappingProxyType(
    {
        **{
            key: _EPISODE_METRIC.format(key=key)
            for key in (
                "total_episodes",
                "total_turns",
                "turns_per_episode",
                "ac_tokens_per_turn",
                "ob_tokens_per_turn",
            )
        },
        "num_episodes": (
            "the importance-sampling trainer's evaluation metrics (eval/num_episodes): the "
            "info's mean would replace its episode count"
        ),
        **{
            key: _GRPO_METRIC.format(key=key)
            for key in ("num_turns", "env_token_fraction", "text_deltas")
        },
        **{
            key: _TREE_METRIC.format(key=key)
            for key in ("reward", "nodes", "joint_actions", "stopped_frac", "return", "solved")
        },
    }
)
"""Info keys the trainers reserve for metrics of their own, each with who reserves it and why.

An environment's info of one of these names is never what gets logged under
it: rename it (``solved`` -> ``all_tests_passed``). The rollouts of every
trainer warn at the first info that holds one. The contract's own keys
(:data:`CONTEXT_KEYS`, :data:`LOSS_WEIGHT`) are not here: an environment uses
them, with the meaning and type this module gives them.
"""
