"""Episode plans as a trainer plays them: environments, policies per seat, trajectory groups.

An environment family (:mod:`llm_envs.family`, built from a run's settings by
:func:`family_of`) says which episodes to play and which of them form a group;
:func:`batch_of` turns its plan into an :class:`EpisodeBatch`, which adds what
only a trainer knows: the policy of each seat, and the token-level
:class:`~baselines.types.TrajectoryGroup` objects of the finished episodes.
Everything is a pure function of the family's plan, so an iteration's data is
the same after a resume, and processes of a multi-process run can each take a
share of the groups without talking.

This module never imports torch, never reads environment text, and never names
a family.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Protocol

from baselines.rollouts import EpisodeResult, group_by
from baselines.samplers.base import Policy
from baselines.types import TrajectoryGroup
from llm_envs.family import EpisodePlan, Family
from llm_envs.registration import make_family
from llm_envs.seeding import derive_seed

__all__ = [
    "EpisodeBatch",
    "FamilySettings",
    "batch_of",
    "derive_seed",
    "family_of",
    "one_per_setting",
]


class FamilySettings(Protocol):
    """The settings of a run that name its family (read-only, so a frozen config has them)."""

    @property
    def env(self) -> str:
        """The family's registered name."""

    @property
    def env_kwargs(self) -> dict[str, Any]:
        """Its environments' arguments."""

    @property
    def task(self) -> str:
        """Where its problems come from."""

    @property
    def task_kwargs(self) -> dict[str, Any]:
        """The task's settings."""

    @property
    def seed(self) -> int:
        """The seed of its plans."""


def family_of(settings: FamilySettings, **options: Any) -> Family:
    """The family ``settings`` name; ``options`` are further run settings it may read.

    Raises:
        ValueError: an unknown env, or settings the family refuses (its message).
    """
    return make_family(
        settings.env,
        settings.env_kwargs,
        task=settings.task,
        seed=settings.seed,
        task_kwargs=settings.task_kwargs,
        **options,
    )


@dataclass
class EpisodeBatch:
    """Episodes to roll out together, and how to read them afterwards.

    Attributes:
        envs: fresh environments, one per episode.
        seeds: reset seed of each episode.
        options: reset options of each episode (the problem, the strategy).
        to_groups: finished episodes -> trajectory groups (advantages are
            centred within each).
        trained_agents: for each episode, the agents played by the trained
            policy (all of them in self-play).
    """

    envs: list[Any]
    seeds: list[int]
    options: list[dict[str, Any]]
    to_groups: Callable[[list[EpisodeResult]], list[TrajectoryGroup]]
    trained_agents: list[frozenset[str]] = field(default_factory=list)

    def assignment(self, trained: Policy, fixed: Policy | None) -> Callable[[int, str], Policy]:
        """``(env_index, agent) -> policy``: ``trained`` for the trained agents, else ``fixed``."""

        def assign(env_index: int, agent: str) -> Policy:
            if fixed is None or not self.trained_agents:
                return trained
            return trained if agent in self.trained_agents[env_index] else fixed

        return assign


def batch_of(plan: EpisodePlan) -> EpisodeBatch:
    """The batch that plays ``plan``: its episodes, grouped by the plan's group keys."""
    keys = list(plan.group_keys)

    def to_groups(results: list[EpisodeResult]) -> list[TrajectoryGroup]:
        return group_by(results, lambda r: keys[r.env_index], agents=plan.grouped_agents)

    return EpisodeBatch(
        envs=plan.envs,
        seeds=plan.seeds,
        options=plan.options,
        to_groups=to_groups,
        trained_agents=list(plan.trained_agents),
    )


def one_per_setting(plan: EpisodePlan) -> tuple[EpisodePlan, list[frozenset[str]]]:
    """The plan with each setting played once, for an opponent with the trained weights.

    A role-rotated evaluation plays one setting (reset seed and options) once
    per seating: the trained policy in some seats, the fixed opponent in the
    others. While both are the same weights, those episodes differ only in
    their random draws, and one episode of each setting measures the same
    thing. This keeps the first episode of each setting; its trained seats are
    every seat any copy trained, and the second value gives, per kept episode,
    every seat any copy left to the opponent (a seat is often both).

    Example:
        >>> trained = [frozenset("a"), frozenset("b"), frozenset("a")]
        >>> plan = EpisodePlan(
        ...     envs=["e0", "e1", "e2"], seeds=[5, 5, 6], options=[{"q": 1}, {"q": 1}, {"q": 1}],
        ...     group_keys=[0, 1, 2], trained_agents=trained,
        ... )
        >>> kept, opponents = one_per_setting(plan)
        >>> kept.envs, [sorted(t) for t in kept.trained_agents]
        (['e0', 'e2'], [['a', 'b'], ['a']])
    """
    kept: list[int] = []
    trained: list[set[str]] = []
    opponent: list[set[str]] = []
    for i, env in enumerate(plan.envs):
        seats = set(getattr(env, "possible_agents", ()))
        same = next(
            (
                k
                for k, j in enumerate(kept)
                if plan.seeds[j] == plan.seeds[i] and plan.options[j] == plan.options[i]
            ),
            None,
        )
        if same is None:
            kept.append(i)
            trained.append(set(plan.trained_agents[i]))
            opponent.append(seats - plan.trained_agents[i])
        else:
            trained[same] |= plan.trained_agents[i]
            opponent[same] |= seats - plan.trained_agents[i]
    merged = EpisodePlan(
        envs=[plan.envs[i] for i in kept],
        seeds=[plan.seeds[i] for i in kept],
        options=[plan.options[i] for i in kept],
        group_keys=[plan.group_keys[i] for i in kept],
        trained_agents=[frozenset(t) for t in trained],
        grouped_agents=plan.grouped_agents,
        titles=None if plan.titles is None else [plan.titles[i] for i in kept],
    )
    return merged, [frozenset(o) for o in opponent]
