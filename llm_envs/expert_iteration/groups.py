"""Group helpers: for each problem, a group of episodes that mixes search strategies.

The expert-iteration plan treats each search strategy as a *stratum*: the samples of one problem
form a group whose returns are centred together, and each sample is tagged with
its strategy so that the trainer can count ``n_s`` and weight strata ("Stratified
mixture of experts"). An :class:`EpisodePlan` lays out such groups in rollout
order: one reset seed, one ``options`` dict (``{"problem": ..., "strategy":
...}``) and one group index per episode. Every episode's infos carry its
strategy (the ``strategy`` context key), which the rollout code copies onto the
trajectory.

With :mod:`baselines` (this module never imports it)::

    from baselines.rollouts import group_by, rollout
    from llm_envs.expert_iteration import plan_groups

    plan = plan_groups(problems, {"iid": 4, "answer_hint": 2, "two_turn_feedback": 2}, seed=step)
    results = rollout(plan.make_envs(), policy, seeds=plan.seeds, options=plan.options)
    groups = group_by(results, plan.group_key, agents=["solver"])

``agents=["solver"]`` keeps critics (``feedback_source="critic"``) out of the
solver's groups: their rewards measure something else (see
:mod:`llm_envs.expert_iteration.env`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from pettingzoo import AECEnv

from llm_envs.contract import Observation
from llm_envs.expert_iteration.prompts import Problem
from llm_envs.expert_iteration.strategies import Strategy
from llm_envs.tasks.problems import CodeProblem, MathProblem

__all__ = [
    "EpisodePlan",
    "EpisodeSpec",
    "StrategyMix",
    "normalize_mix",
    "plan_group",
    "plan_groups",
]

StrategyMix = Mapping[Strategy | str, int]
"""Episodes per strategy in one group, e.g. ``{"iid": 4, "answer_hint": 2}``."""


class _HasEnvIndex(Protocol):
    env_index: int


@dataclass(frozen=True)
class EpisodeSpec:
    """One planned episode.

    Attributes:
        problem: the problem it poses.
        strategy: its search strategy.
        seed: its reset seed.
        group: the index of its group in the plan (one group per problem).
    """

    problem: Problem
    strategy: Strategy
    seed: int
    group: int

    @property
    def options(self) -> dict[str, Any]:
        """The reset options that pose this episode's problem with its strategy."""
        return {"problem": self.problem, "strategy": self.strategy.value}


@dataclass(frozen=True)
class EpisodePlan:
    """Episodes of one or more groups, in rollout order (a group's episodes are contiguous).

    Example:
        >>> from llm_envs.tasks import ArithmeticTask
        >>> plan = plan_groups(ArithmeticTask(2, seed=1), {"iid": 2, "two_turn_feedback": 1})
        >>> plan.strategies
        ['iid', 'iid', 'two_turn_feedback', 'iid', 'iid', 'two_turn_feedback']
        >>> plan.seeds, plan.num_groups, [s.group for s in plan.specs]
        ([0, 1, 2, 3, 4, 5], 2, [0, 0, 0, 1, 1, 1])
    """

    specs: tuple[EpisodeSpec, ...]

    def __len__(self) -> int:
        return len(self.specs)

    @property
    def seeds(self) -> list[int]:
        """The reset seed of every episode (``rollout(..., seeds=plan.seeds)``)."""
        return [s.seed for s in self.specs]

    @property
    def options(self) -> list[dict[str, Any]]:
        """The reset options of every episode (``rollout(..., options=plan.options)``)."""
        return [s.options for s in self.specs]

    @property
    def strategies(self) -> list[str]:
        """The strategy of every episode."""
        return [s.strategy.value for s in self.specs]

    @property
    def num_groups(self) -> int:
        """How many groups the plan holds."""
        return len({s.group for s in self.specs})

    def group_key(self, result: _HasEnvIndex) -> int:
        """The group of a finished episode, ``group_by(results, plan.group_key)``."""
        return self.specs[result.env_index].group

    def make_envs(self, **env_kwargs: Any) -> list[AECEnv[str, Observation, str]]:
        """One fresh environment per episode, built by :func:`llm_envs.expert_iteration.env`.

        Args:
            **env_kwargs: :class:`~llm_envs.expert_iteration.ExpertIterationEnv`
                arguments shared by every episode (e.g. ``feedback_source="critic"``);
                the problem and strategy come from :attr:`options` at reset.
        """
        from llm_envs.expert_iteration.env import env

        return [env(**env_kwargs) for _ in self.specs]


def normalize_mix(mix: StrategyMix) -> tuple[tuple[Strategy, int], ...]:
    """Validate a strategy mix and return its ``(strategy, count)`` pairs in the given order.

    Raises:
        ValueError: an unknown strategy, a count that is not an int >= 0, or no episode at all.

    Example:
        >>> normalize_mix({"iid": 2, "answer_hint": 1})
        ((<Strategy.IID: 'iid'>, 2), (<Strategy.ANSWER_HINT: 'answer_hint'>, 1))
    """
    if not isinstance(mix, Mapping):
        raise TypeError(f"mix must map strategies to episode counts, got {mix!r}")
    pairs = []
    for name, count in mix.items():
        try:
            strategy = Strategy(name)
        except ValueError:
            known = [s.value for s in Strategy]
            raise ValueError(f"unknown strategy {name!r} in mix; known: {known}") from None
        if isinstance(count, bool) or not isinstance(count, int) or count < 0:
            raise ValueError(f"mix[{name!r}] must be an int >= 0 episodes, got {count!r}")
        pairs.append((strategy, count))
    if sum(count for _, count in pairs) == 0:
        raise ValueError(f"mix must ask for at least one episode, got {dict(mix)!r}")
    return tuple(pairs)


def plan_group(problem: Problem, mix: StrategyMix, *, seed: int = 0, group: int = 0) -> EpisodePlan:
    """Plan one group: ``mix[s]`` episodes of ``problem`` with each strategy ``s``.

    Args:
        problem: the group's problem.
        mix: episodes per strategy, in the order they are laid out.
        seed: reset seed of the first episode; the others count up from it.
        group: the group index given to every episode.
    """
    return plan_groups([problem], mix, seed=seed, first_group=group)


def plan_groups(
    problems: Iterable[Problem], mix: StrategyMix, *, seed: int = 0, first_group: int = 0
) -> EpisodePlan:
    """Plan one group per problem, each laid out as ``mix``; reset seeds count up from ``seed``.

    Args:
        problems: one group each, in order.
        mix: episodes per strategy in every group.
        seed: reset seed of the plan's first episode.
        first_group: index of the first group (the others count up from it).
    """
    pairs = normalize_mix(mix)
    specs: list[EpisodeSpec] = []
    for offset, problem in enumerate(problems):
        if not isinstance(problem, MathProblem | CodeProblem):
            raise TypeError(
                f"problems must be MathProblem or CodeProblem records, got {type(problem).__name__}"
            )
        for strategy, count in pairs:
            for _ in range(count):
                episode_seed = seed + len(specs)
                specs.append(EpisodeSpec(problem, strategy, episode_seed, first_group + offset))
    return EpisodePlan(tuple(specs))
