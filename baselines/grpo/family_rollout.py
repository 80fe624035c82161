"""A TRL rollout function for any registered environment family.

:class:`FamilyRollout` needs nothing but the family (:mod:`llm_envs.family`):
the data set is one row per training group, and each block of TRL's repeated
prompts plays the family's own plan for that group. It is the only rollout of
``python -m baselines.grpo``: every registered family goes through it, and it
never names one.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from baselines.grpo.adapters import EnvRollout, _blocks, _Plan, _prompt_text
from llm_envs.bridges.trl import refuse_context_swap
from llm_envs.family import EpisodePlan
from llm_envs.registration import make_family
from llm_envs.seeding import derive_seed

__all__ = ["FamilyRollout"]


class FamilyRollout(EnvRollout):
    """Any registered environment family for TRL: one data-set row per training group.

    The data set holds one prompt per group index: ``"<family> group <g>:
    <title>"``, a key and the group's problem in words (the plan's title: a
    debate's question, a problem's text or id; the key alone where the family
    gives none), for TRL's logs and tables; a model never sees it. TRL
    repeats it ``num_generations`` times; the block becomes the family's
    training plan for group ``g`` (:meth:`llm_envs.family.Family.training`,
    seed ``derive_seed(seed, g)``: a group plays the same episodes whenever it
    comes), and its entries are the plan's trajectories in order: each
    episode's grouped agents (every agent where the plan does not say). So
    TRL's group is the family's group, and ``num_generations`` is the number of
    trajectories in one: a three-agent debate's three debaters, the solver of
    each of a problem's episodes, a two-player game's two players.

    Build it with :meth:`for_env` (the family as TRL needs it) or from a family
    built with ``chat_observations=True``.

    Args:
        family: the environment family (:func:`llm_envs.registration.make_family`).
        num_groups: rows of the data set (group indices ``0 .. num_groups - 1``).
        **kwargs: :class:`EnvRollout` arguments; ``seed`` seeds the plans.

    Raises:
        ValueError: a family whose groups hold fewer than two trajectories
            (GRPO centres returns within a group) or differ in size, or whose
            first turns train on another context than they sample on
            (:func:`~llm_envs.bridges.trl.refuse_context_swap`); a ``credit``
            its groups cannot carry (a seat-wise scheme on groups with one
            trajectory per seat, ``agent_turn_groups`` on agents of several turns).

    Example:
        >>> rollout = FamilyRollout.for_env(
        ...     "expert_iteration", num_groups=3, options={"strategy": "iid", "num_generations": 2}
        ... )
        >>> rollout.num_generations, rollout.max_turns, rollout.dataset_prompts()[0][:33]
        (2, 1, 'expert_iteration group 0: What is')
    """

    def __init__(self, family: Any, *, num_groups: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if num_groups < 1:
            raise ValueError(f"num_groups must be >= 1, got {num_groups}")
        self.family = family
        self.num_groups = num_groups
        self.prefix = f"{family.name} group "
        self._key = re.compile(rf"{re.escape(self.prefix)}(\d+)(?::|$)")
        first = self._group_plan(0)
        self.num_generations = len(self._rows(first))
        if self.num_generations < 2:
            raise ValueError(
                f"a group of --env {family.name} holds {self.num_generations} trajectory; GRPO "
                "centres returns within a group and needs at least two"
            )
        self.max_turns = int(getattr(family, "max_agent_turns", 1))
        self.credit_env = family.name
        _refuse_credit_without_comparisons(self.credit, self._rows(first), self.max_turns, family)
        _refuse_first_turn_swaps(first)

    @classmethod
    def for_env(
        cls,
        env: str,
        env_kwargs: Mapping[str, Any] | None = None,
        *,
        task: str = "default",
        task_kwargs: Mapping[str, Any] | None = None,
        seed: int = 0,
        num_groups: int = 1000,
        options: Mapping[str, Any] | None = None,
        **kwargs: Any,
    ) -> FamilyRollout:
        """The rollout of the registered family ``env``, built as TRL needs it.

        Args:
            env: a registered family's name (``debate``, ``expert_iteration``...).
            env_kwargs: its environment's arguments.
            task: its task (:attr:`~llm_envs.family.Family.tasks`).
            task_kwargs: the task's settings.
            seed: the family's problem order and the plans' seeds.
            num_groups: rows of the data set.
            options: run settings for the family (``num_generations``,
                ``strategy``...): it takes those in its ``run_options`` and
                ignores the rest. ``chat_observations`` is always True.
            **kwargs: :class:`EnvRollout` arguments (``policy``,
                ``max_tokens_per_turn``, ``save_episodes``...).
        """
        family = make_family(
            env,
            dict(env_kwargs or {}),
            task=task,
            seed=seed,
            task_kwargs=dict(task_kwargs or {}),
            **{**dict(options or {}), "chat_observations": True},
        )
        return cls(family, num_groups=num_groups, seed=seed, **kwargs)

    def _group_plan(self, group: int) -> EpisodePlan:
        plan: EpisodePlan = self.family.training([group], derive_seed(self.seed, group))
        return plan

    @staticmethod
    def _rows(plan: Any) -> list[tuple[int, str]]:
        rows: list[tuple[int, str]] = []
        for index, env in enumerate(plan.envs):
            agents = plan.grouped_agents or getattr(env, "possible_agents", ())
            rows.extend((index, agent) for agent in agents)
        return rows

    def dataset_prompts(self) -> list[str]:
        """One row per group index: its key and its title (see the class)."""
        rows = []
        for g in range(self.num_groups):
            titles = self._group_plan(g).titles
            rows.append(f"{self.prefix}{g}: {titles[0]}" if titles else f"{self.prefix}{g}")
        return rows

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        size = self.num_generations
        keys = _blocks(prompts, size, f"one group of --env {self.family.name} per prompt")
        envs: list[Any] = []
        options: list[dict[str, Any]] = []
        seeds: list[int] = []
        rows: list[tuple[int, str]] = []
        for key in keys:
            text = _prompt_text(key)
            match = self._key.match(text)
            if match is None:
                raise KeyError(
                    f"prompt {text[:80]!r} is not a group of this rollout; build the data set "
                    "with .dataset()"
                )
            group = int(match.group(1))
            plan = self._group_plan(group)
            block = self._rows(plan)
            if len(block) != size:
                raise ValueError(
                    f"group {group} of --env {self.family.name} holds {len(block)} trajectories, "
                    f"group 0 holds {size}: TRL needs groups of one size"
                )
            rows.extend((len(envs) + index, agent) for index, agent in block)
            envs.extend(plan.envs)
            options.extend(plan.options)
            seeds.extend(plan.seeds)
        return _Plan(envs, options, rows, seeds)


def _refuse_credit_without_comparisons(
    credit: str, rows: Sequence[tuple[int, str]], max_turns: int, family: Any
) -> None:
    """Refuse, before a model is loaded, a credit scheme this family's groups give nothing to."""
    if credit not in ("per_agent_norm", "agent_turn_groups"):
        return
    seats = Counter(agent for _, agent in rows)
    if max(seats.values()) < 2:
        raise ValueError(
            f"credit={credit!r} compares a seat's trajectories within a group, but a group of "
            f"--env {family.name} holds one trajectory per seat ({sorted(seats)}), so every "
            "advantage would be 0; use credit='role_baseline' (a running baseline per seat) "
            "or 'group_mean'"
        )
    if credit == "agent_turn_groups" and max_turns > 1:
        raise ValueError(
            f"credit='agent_turn_groups' gives each turn its own advantage, but an agent of "
            f"--env {family.name} takes up to {max_turns} turns in one TRL completion, which "
            "gets one advantage; use credit='per_agent_norm', or the importance-sampling "
            "trainer (baselines.is_trainer), which trains each turn on its own advantage"
        )


def _refuse_first_turn_swaps(plan: EpisodePlan) -> None:
    """Reset a plan's episodes and refuse a grouped agent whose first turn swaps its context.

    A construction-time check (before a model is loaded); the rollout checks
    every completion again.
    """
    for env, seed, options in zip(plan.envs, plan.seeds, plan.options, strict=True):
        reset = env.reset(seed=seed, options=options)
        infos = reset[1] if isinstance(reset, tuple) else env.infos  # parallel or AEC
        for agent in plan.grouped_agents or infos:
            refuse_context_swap(agent, infos.get(agent, {}))
