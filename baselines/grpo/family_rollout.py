"""A TRL rollout function for any registered environment family.

:class:`FamilyRollout` needs nothing but the family (:mod:`llm_envs.family`):
the data set is one row per training group, and each block of TRL's repeated
prompts plays the family's own plan for that group.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from baselines.grpo.adapters import EnvRollout, _blocks, _Plan, _prompt_text
from llm_envs.family import derive_seed

__all__ = ["FamilyRollout"]


class FamilyRollout(EnvRollout):
    """Any registered environment family for TRL: one data-set row per training group.

    The data set holds one prompt per group index (``"<family> group <g>"``, a
    key, never shown to a model). TRL repeats it ``num_generations`` times;
    the block becomes the family's training plan for group ``g``
    (:meth:`llm_envs.family.Family.training`), and its entries are the
    plan's trajectories in order: each episode's grouped agents (every agent
    where the plan does not say). So TRL's group is the family's group, and
    ``num_generations`` is the number of trajectories in one: a three-agent
    debate's three debaters, a two-player game's two players.

    Args:
        family: the environment family (:func:`llm_envs.registration.make_family`).
        num_groups: rows of the data set (group indices ``0 .. num_groups - 1``).
        **kwargs: :class:`EnvRollout` arguments; ``seed`` seeds the plans.

    Raises:
        ValueError: a family whose groups hold fewer than two trajectories
            (GRPO centres returns within a group) or differ in size.
    """

    def __init__(self, family: Any, *, num_groups: int = 1000, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if num_groups < 1:
            raise ValueError(f"num_groups must be >= 1, got {num_groups}")
        self.family = family
        self.num_groups = num_groups
        self.prefix = f"{family.name} group "
        self.num_generations = len(self._rows(family.training([0], self.seed)))
        if self.num_generations < 2:
            raise ValueError(
                f"a group of --env {family.name} holds {self.num_generations} trajectory; GRPO "
                "centres returns within a group and needs at least two"
            )

    @staticmethod
    def _rows(plan: Any) -> list[tuple[int, str]]:
        rows: list[tuple[int, str]] = []
        for index, env in enumerate(plan.envs):
            agents = plan.grouped_agents or getattr(env, "possible_agents", ())
            rows.extend((index, agent) for agent in agents)
        return rows

    def dataset_prompts(self) -> list[str]:
        """One key per group index."""
        return [f"{self.prefix}{g}" for g in range(self.num_groups)]

    def _plan(self, prompts: Sequence[Any]) -> _Plan:
        size = self.num_generations
        keys = _blocks(prompts, size, f"one group of --env {self.family.name} per prompt")
        envs: list[Any] = []
        options: list[dict[str, Any]] = []
        seeds: list[int] = []
        rows: list[tuple[int, str]] = []
        for key in keys:
            text = _prompt_text(key)
            if not text.startswith(self.prefix) or not text[len(self.prefix) :].isdigit():
                raise KeyError(
                    f"prompt {text[:80]!r} is not a group of this rollout; build the data set "
                    "with .dataset()"
                )
            group = int(text[len(self.prefix) :])
            plan = self.family.training([group], derive_seed(self.seed, group))
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
