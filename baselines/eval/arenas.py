"""What an evaluation plays: a registered family's seats, problems and fresh episodes.

An :class:`Arena` answers, for :mod:`baselines.eval.run`, which agents there
are (the seats, in ``possible_agents`` order), how problem ``p`` becomes a
fresh environment with its reset seed and options, what to record of a
finished episode beyond its transcript, the seating of ``seating='auto'``,
and the ``reference`` entrant's sampler. It asks the environment's family
(:mod:`llm_envs.family`) every question, so any registered family can be
evaluated; problems are the family's *evaluation* problems (for
``arithmetic``, another seed than training's), so a trained model is scored on
problems it has not trained on.

Environments are text in, text out: nothing here sees a token.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, cast

from baselines.eval.seating import SeatingMode
from baselines.samplers.base import Policy
from llm_envs.capabilities import EvaluationDetails, ReferencePlayers, ScriptedPlayers, require
from llm_envs.family import Family
from llm_envs.registration import make_family

__all__ = ["Arena", "Episode", "make_arena"]

Episode = tuple[Any, int, dict[str, Any]]
"""A fresh environment, its reset seed and its reset options."""


_NAME = "name a model for every seat"


class Arena:
    """A family as an evaluation plays it.

    Args:
        family: the environment family, built from the evaluation's settings.
    """

    def __init__(self, family: Family) -> None:
        self.family = family
        self.name = family.name
        self.agents: tuple[str, ...] = tuple(family.agents)
        self.num_problems: int | None = family.num_eval_problems

    def episode(self, problem: int, seed: int) -> Episode:
        """A fresh environment for problem ``problem``, reset with ``seed``."""
        return self.family.eval_episode(problem, seed)

    def extras(self, env: Any) -> dict[str, Any]:
        """What to record of a finished episode besides its transcript (JSON values)."""
        return cast(EvaluationDetails, self.family).eval_extras(env)

    def default_seating(self, num_models: int) -> SeatingMode:
        """The seating of ``seating='auto'``."""
        return cast(SeatingMode, cast(EvaluationDetails, self.family).default_seating(num_models))

    def reference(self) -> Policy:
        """The sampler of the ``reference`` entrant: the family's reference players.

        Raises:
            ValueError: where the family has none (its message names the fix).
        """
        from baselines.samplers.scripted import ScriptedPolicy

        family = require(self.family, ReferencePlayers, by="the reference entrant", otherwise=_NAME)
        return ScriptedPolicy(family.reference_players())

    def scripted(self, model: str, seed: int = 0) -> Policy:
        """The sampler of a scripted entrant: ``reference``, or ``scripted:SET``.

        ``scripted:SET`` is a set of the family's scripted players
        (:meth:`~llm_envs.capabilities.ScriptedPlayers.scripted_players`, seeded with
        ``seed``), such as a game's random player, ``scripted:random``.

        Raises:
            ValueError: a set the family does not have (the message lists them).
        """
        from baselines.samplers.scripted import ScriptedPolicy

        if model == "reference":
            return self.reference()
        name = model.removeprefix("scripted:")
        family = require(self.family, ScriptedPlayers, by=f"model {model!r}", otherwise=_NAME)
        sets = family.scripted_players(seed)
        if name not in sets:
            raise ValueError(
                f"model {model!r}: --env {self.name} has scripted players "
                f"{sorted(sets) or 'none'} for these settings"
            )
        return ScriptedPolicy(sets[name])


def make_arena(
    env: str, env_kwargs: Mapping[str, Any], task: str, seed: int, task_kwargs: Mapping[str, Any]
) -> Arena:
    """The arena of the registered family ``env``.

    Raises:
        ValueError: an unknown environment (the message lists the registered
            ones), or arguments it refuses.
    """
    family = make_family(env, dict(env_kwargs), task=task, seed=seed, task_kwargs=dict(task_kwargs))
    return Arena(family)
