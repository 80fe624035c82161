"""The expert-iteration family: one group per problem, one episode per strategy slot.

* Training: the episodes of one problem form a group, one per entry of the
  strategy mix (the run option ``strategy_mix``, or ``num_generations``
  episodes of one ``strategy``); only the solver's trajectories join the
  groups (a critic's reward measures the improvement it caused, not the
  solver's success). The solver takes two turns with ``two_turn_feedback``,
  one otherwise.
* Problems: math (``default``/``arithmetic``, ``gsm8k``) or code
  (``humaneval``, ``mbpp``, ``coophumaneval``; MBPP trains on its train split).
* Evaluation: one ``iid`` episode (no help) per held-out problem.
* The report: the solver's final attempt earns its score (plus
  ``format_reward`` when formatted); the critic earns attempt 2's score minus
  attempt 1's.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from llm_envs.family import EpisodePlan, EpisodeRewards, FamilyBase, derive_seed, fmt, ordered
from llm_envs.tasks.code_datasets import CODE_DATASETS
from llm_envs.tasks.math_sources import MATH_TASKS

__all__ = ["ExpertIterationFamily"]


def _title(problem: Any) -> str:
    """A math problem's question, a code problem's id and function."""
    question = getattr(problem, "question", None)
    return question if question is not None else f"{problem.task_id} ({problem.entry_point})"


class ExpertIterationFamily(FamilyBase):
    """Expert iteration as a family (see the module docstring).

    Args:
        env_kwargs: :func:`llm_envs.expert_iteration.env` arguments.
        task: ``default``/``arithmetic`` (procedural arithmetic), ``gsm8k``,
            or a code data set: ``humaneval``, ``mbpp``, ``coophumaneval``.
        seed: the run's seed (problem order).
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings.
        strategy_mix: episodes per strategy in every training group; None
            (the default) for ``num_generations`` episodes of ``strategy``.
        strategy: the strategy of every training episode, without ``strategy_mix``
            (default ``iid``).
        num_generations: training episodes per problem, without ``strategy_mix``
            (default 4).

    Raises:
        ValueError: a bad setting, or ``strategy_mix`` together with
            ``strategy`` or ``num_generations``.
    """

    name: ClassVar[str] = "expert_iteration"
    run_options: ClassVar[tuple[str, ...]] = ("strategy_mix", "strategy", "num_generations")
    tasks: ClassVar[tuple[str, ...]] = (*MATH_TASKS, *CODE_DATASETS)
    headline_metrics: ClassVar[tuple[str, ...]] = ("correct", "formatted")

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        task: str = "default",
        seed: int = 0,
        task_kwargs: Mapping[str, Any] | None = None,
        strategy_mix: Mapping[str, int] | None = None,
        strategy: str | None = None,
        num_generations: int | None = None,
    ) -> None:
        from llm_envs.expert_iteration import Strategy, env, normalize_mix
        from llm_envs.tasks.code_datasets import code_problems
        from llm_envs.tasks.math_sources import math_problems

        for key in ("problems", "strategy"):
            if key in env_kwargs:
                raise ValueError(
                    f"pass {key} through the run's settings (task, strategy_mix or strategy), "
                    f"not env_kwargs[{key!r}]"
                )
        if strategy_mix is not None and (strategy, num_generations) != (None, None):
            raise ValueError(
                f"give strategy_mix ({dict(strategy_mix)}) or strategy and num_generations "
                f"({strategy!r}, {num_generations!r}), not both"
            )
        self.env_kwargs = dict(env_kwargs)
        probe = env(**self.env_kwargs)
        self.agents = tuple(probe.possible_agents)
        probe.close()
        mix = strategy_mix or {strategy or "iid": 4 if num_generations is None else num_generations}
        self.mix = dict(mix)
        pairs = normalize_mix(self.mix)
        two_turns = any(s == Strategy.TWO_TURN_FEEDBACK and n > 0 for s, n in pairs)
        self.max_agent_turns = 2 if two_turns else 1  # the solver's attempts
        self.seed = seed
        if task in CODE_DATASETS:
            if task_kwargs:
                raise ValueError(
                    f"task_kwargs are settings of the arithmetic task, got {dict(task_kwargs)} "
                    f"with task={task!r}; drop them"
                )
            self.train_problems: Sequence[Any] = code_problems(task, "train")
            self.eval_problems: Sequence[Any] = code_problems(task, "eval")
        else:
            self.train_problems = math_problems(task, "train", seed, task_kwargs)
            self.eval_problems = math_problems(task, "eval", seed, task_kwargs)
        self.num_eval_problems = (
            None if task in ("default", "arithmetic") else len(self.eval_problems)
        )

    def _plan(self, problems: list[Any], mix: Mapping[str, int], seed: int) -> EpisodePlan:
        from llm_envs.expert_iteration import plan_groups

        plan = plan_groups(problems, mix, seed=seed)
        return EpisodePlan(
            envs=plan.make_envs(**self.env_kwargs),
            seeds=plan.seeds,
            options=plan.options,
            group_keys=[spec.group for spec in plan.specs],
            trained_agents=[frozenset({"solver"})] * len(plan),
            grouped_agents=("solver",),
            titles=[_title(spec.problem) for spec in plan.specs],
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One group of ``sum(strategy_mix)`` episodes per problem index."""
        problems = [ordered(self.train_problems, g, self.seed) for g in group_indices]
        first = group_indices[0] if group_indices else 0
        return self._plan(problems, self.mix, derive_seed(seed, first))

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """One ``iid`` episode per held-out problem index (accuracy without help)."""
        problems = [self.eval_problems[g % len(self.eval_problems)] for g in group_indices]
        first = group_indices[0] if group_indices else 0
        return self._plan(problems, {"iid": 1}, derive_seed(seed, first))

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """Problem ``problem``, strategy ``iid``."""
        from llm_envs.expert_iteration import plan_groups

        chosen = [self.eval_problems[problem % len(self.eval_problems)]]
        plan = plan_groups(chosen, {"iid": 1}, seed=seed)
        return plan.make_envs(**self.env_kwargs)[0], plan.seeds[0], dict(plan.options[0])

    @staticmethod
    def episode_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
        """The solver's final attempt's score (+ ``format_reward``); the critic's improvement."""
        bonus = float(env_kwargs.get("format_reward", 0.0))
        attempts = [t for t in record["turns"] if t["agent"] == "solver"]
        total, how, per_turn = {}, {}, {}
        if attempts:
            final = attempts[-1]["details"]
            earned = float(final["score"]) + (bonus if final.get("formatted") else 0.0)
            parts = [f"attempt {final['attempt']}'s score {fmt(float(final['score']))}"]
            if bonus and final.get("formatted"):
                parts.append(f"format reward {fmt(bonus)}")
            total["solver"], how["solver"] = earned, " + ".join(parts)
            for turn in attempts[:-1]:
                how["solver"] += f" (attempt {turn['details']['attempt']} is not rewarded)"
                per_turn[(turn["round"], "solver")] = "not rewarded (an earlier attempt)"
            per_turn[(attempts[-1]["round"], "solver")] = f"reward {fmt(earned)}"
        if any(t["agent"] == "critic" for t in record["turns"]) and len(attempts) == 2:
            first, second = (float(t["details"]["score"]) for t in attempts)
            total["critic"] = second - first
            how["critic"] = f"attempt 2's score {fmt(second)} - attempt 1's {fmt(first)}"
            per_turn[(1, "critic")] = f"reward {fmt(second - first)}"
        return EpisodeRewards(total, how, per_turn)
