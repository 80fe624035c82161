"""The code-collaboration family: a team writes one program, scored by the tests.

* Training: one group per problem, ``episodes_per_group`` episodes of it, every
  seat played by the trained policy (one model as helper and main).
* Evaluation: one episode per problem of the data set.
* The report: every agent acting in a turn receives that turn's team reward
  (the joint action's, shift included).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from llm_envs.family import EpisodePlan, EpisodeRewards, FamilyBase, derive_seed, fmt, ordered

__all__ = ["CodeCollabFamily"]


class CodeCollabFamily(FamilyBase):
    """Code collaboration as a family (see the module docstring).

    Args:
        env_kwargs: :func:`llm_envs.code_collab.parallel_env` arguments.
        task: ``default`` (``coophumaneval``), ``coophumaneval``, ``humaneval`` or ``mbpp``.
        seed: the run's seed (problem order).
        task_kwargs: none are taken.
        episodes_per_group: episodes of one problem per training group.
    """

    name: ClassVar[str] = "code_collab"
    tasks: ClassVar[tuple[str, ...]] = ("default", "coophumaneval", "humaneval", "mbpp")
    headline_metrics: ClassVar[tuple[str, ...]] = ("pass_rate", "total")
    metric_titles: ClassVar[Mapping[str, str]] = {"pass_rate": "pass rate", "total": "code reward"}

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
        episodes_per_group: int = 4,
    ) -> None:
        from llm_envs.code_collab import load_problems, parallel_env

        if "problems" in env_kwargs:
            raise ValueError("pass code problems through `task`, not env_kwargs['problems']")
        if task_kwargs:
            raise ValueError(f"code collaboration takes no task_kwargs, got {dict(task_kwargs)}")
        if episodes_per_group < 1:
            raise ValueError(f"episodes_per_group must be >= 1, got {episodes_per_group}")
        self.env_kwargs = dict(env_kwargs)
        dataset: Any = "coophumaneval" if task == "default" else task  # checked by the loader
        self.problems = tuple(load_problems(dataset))
        self.num_eval_problems = len(self.problems)
        probe = parallel_env(problems=self.problems, **self.env_kwargs)  # checks env_kwargs
        self.agents = tuple(probe.possible_agents)
        probe.close()
        self.seed = seed
        self.episodes_per_group = episodes_per_group

    def _plan(self, problems: list[Any], seeds: list[int], keys: list[int]) -> EpisodePlan:
        from llm_envs.code_collab import parallel_env

        return EpisodePlan(
            envs=[parallel_env(problems=self.problems, **self.env_kwargs) for _ in problems],
            seeds=seeds,
            options=[{"problem": p} for p in problems],
            group_keys=list(keys),
            trained_agents=[frozenset(self.agents)] * len(problems),
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """``episodes_per_group`` episodes of one problem per group index."""
        n = self.episodes_per_group
        problems, seeds, keys = [], [], []
        for g in group_indices:
            problem = ordered(self.problems, g, self.seed)
            for k in range(n):
                problems.append(problem)
                seeds.append(derive_seed(seed, g, k))
                keys.append(g)
        return self._plan(problems, seeds, keys)

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One episode per problem index."""
        problems = [self.problems[g % len(self.problems)] for g in group_indices]
        return self._plan(
            problems, [derive_seed(seed, g) for g in group_indices], list(group_indices)
        )

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """Problem ``problem`` of the data set."""
        from llm_envs.code_collab import parallel_env

        env = parallel_env(problems=self.problems, **self.env_kwargs)
        return env, seed, {"problem": self.problems[problem % len(self.problems)]}

    @staticmethod
    def episode_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
        """Each turn's team reward, received by every agent that acted in it."""
        rewards = [float(r) for r in record["summary"]["rewards"]]
        agents = list(dict.fromkeys(t["agent"] for t in record["turns"]))
        total, how, per_turn = {}, {}, {}
        for agent in agents:
            rounds = sorted({t["round"] for t in record["turns"] if t["agent"] == agent})
            total[agent] = sum(rewards[r - 1] for r in rounds)
            parts = [f"turn {r}: {fmt(rewards[r - 1])}" for r in rounds]
            shared = " (the team reward, shared)" if len(agents) > 1 else ""
            how[agent] = " + ".join(parts) + shared
            for r in rounds:
                per_turn[(r, agent)] = f"team reward {fmt(rewards[r - 1])}"
        return EpisodeRewards(total, how, per_turn)
