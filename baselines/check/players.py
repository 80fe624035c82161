"""Who plays the checked family's episodes: its own scripted players, and two that fail on purpose.

* The family's players, asked through the registry's family object alone: its
  reference players (:meth:`~llm_envs.capabilities.ReferencePlayers.reference_players`), its
  named scripted sets (:meth:`~llm_envs.capabilities.ScriptedPlayers.scripted_players`) and,
  where it has one, the teacher of a warm start
  (:meth:`~llm_envs.capabilities.Teacher.demonstrations`).
* :func:`empty_answer`: the empty string, every turn.
* :class:`RandomText`: words of random letters, drawn from a seed and the
  observation (so a replay draws the same words).

A family without one of its optional players simply has fewer: the check
that needs it is skipped, naming it (:class:`Missing`).
"""

from __future__ import annotations

import random
import string
import zlib
from collections.abc import Mapping, Sequence
from typing import Any

from llm_envs.capabilities import Teacher, provides
from llm_envs.family import Agent

__all__ = [
    "EMPTY",
    "RANDOM_TEXT",
    "REFERENCE",
    "TEACHER",
    "Missing",
    "PlayerSet",
    "RandomText",
    "empty_answer",
    "player_sets",
    "reference_players",
]

EMPTY = "empty"
"""The player that answers ``""``."""
RANDOM_TEXT = "random_text"
"""The player that answers random words (:class:`RandomText`)."""
REFERENCE = "reference"
"""The family's reference players."""
TEACHER = "teacher"
"""The family's scripted teacher (a warm start's)."""

PlayerSet = Agent | Mapping[str, Agent]
"""One player for every seat, or a player per seat
(what :class:`~baselines.samplers.scripted.ScriptedPolicy` takes)."""

_LETTERS = string.ascii_letters + string.digits + "<>/=.,!?"


class Missing(Exception):
    """The family lacks an optional capability a check needs: the check is skipped, naming it."""

    def __init__(self, capability: str, reason: str) -> None:
        super().__init__(f"{capability}: {reason}")
        self.capability = capability
        self.reason = reason


def empty_answer(observation: Any, info: Mapping[str, Any], /) -> str:
    """The empty answer: what a model that stops at once writes."""
    return ""


class RandomText:
    """Random words (1 to 30 of 1 to 8 letters, digits and tag characters), seeded.

    The words depend on the seed and the observation only, so two plays of a
    seeded episode draw the same words (the determinism check relies on it).

    Example:
        >>> chat = {"messages": [{"role": "user", "content": "What is 2 + 3?"}]}
        >>> RandomText(0)(chat, {}) == RandomText(0)(chat, {}) != RandomText(1)(chat, {})
        True
    """

    def __init__(self, seed: int) -> None:
        self.seed = seed

    def __call__(self, observation: Any, info: Mapping[str, Any], /) -> str:
        """Words drawn from the seed and the observation."""
        messages = observation.get("messages") if isinstance(observation, Mapping) else None
        seen = repr(messages[-1:] if isinstance(messages, list) else observation)
        size = len(messages) if isinstance(messages, list) else 0
        rng = random.Random(f"{self.seed}:{size}:{zlib.crc32(seen.encode('utf-8', 'replace'))}")
        words = (
            "".join(rng.choice(_LETTERS) for _ in range(rng.randint(1, 8)))
            for _ in range(rng.randint(1, 30))
        )
        return " ".join(words)


def _capability(family: Any, name: str) -> Any:
    method = getattr(family, name, None)
    if not callable(method):
        raise Missing(name, f"the family has no {name}()")
    return method


def reference_players(family: Any) -> dict[str, Agent]:
    """The family's reference players, a player per seat.

    Raises:
        Missing: the family has none (its own message says why).
    """
    method = _capability(family, "reference_players")
    try:
        return dict(method())
    except ValueError as exc:
        raise Missing("reference_players", str(exc)) from None


def player_sets(family: Any, seed: int, groups: Sequence[int]) -> dict[str, PlayerSet]:
    """Every player the family has for its training plan, and the two failing ones.

    The family's scripted sets by their names (``reference``, ``random``...),
    its teacher as :data:`TEACHER` (for ``groups`` and ``seed``, the episodes
    of ``family.training(groups, seed)``), then :data:`EMPTY` and
    :data:`RANDOM_TEXT`. Fresh players on every call: a stateful player
    (a seeded random mover) starts over.
    """
    sets: dict[str, PlayerSet] = {}
    scripted = getattr(family, "scripted_players", None)
    if callable(scripted):
        sets.update({str(name): players for name, players in scripted(seed).items()})
    if provides(family, Teacher):
        try:
            _, teachers = family.demonstrations(list(groups), seed)
        except ValueError:
            pass  # a task without answers has no teacher (the family says so)
        else:
            sets[TEACHER] = teachers
    sets[EMPTY] = empty_answer
    sets[RANDOM_TEXT] = RandomText(seed)
    return sets
