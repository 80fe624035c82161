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

from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Unpack, get_args

from llm_envs.client_settings import (
    ARITHMETIC_SETTINGS,
    ClientSettings,
    Flag,
    Number,
    OneOf,
    Text,
    Whole,
)
from llm_envs.expert_iteration.config import OnFirstCorrect
from llm_envs.expert_iteration.strategies import FeedbackSource, HintMode, TrainingContext
from llm_envs.expert_iteration.verifier import CodeReward
from llm_envs.family import Agent, EpisodePlan, EpisodeRewards, FamilyBase, RunSettings
from llm_envs.formatting import fmt
from llm_envs.seeding import derive_seed, ordered
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
    # The prompts and rewards only: code_timeout and code_runner are the server's.
    # (The strategy is a run option; a served episode is the evaluator's, iid.)
    client_settings: ClassVar[ClientSettings] = ClientSettings(
        env_kwargs={
            "system_prompt": Text(4000, nullable=True),
            "augmentation": Text(4000),
            "hint": OneOf(get_args(HintMode)),
            "hint_fraction": Number(0, 1),
            "hint_template": Text(4000, nullable=True),
            "feedback_source": OneOf(get_args(FeedbackSource)),
            "training_context": OneOf(get_args(TrainingContext)),
            "revise_message": Text(4000, nullable=True),
            "attempt1_loss_weight": Number(0, 10),
            "on_first_correct": OneOf(get_args(OnFirstCorrect)),
            "critic_sees_reference": Flag(),
            "code_reward": OneOf(get_args(CodeReward)),
            "format_reward": Number(-10, 10),
            "max_failures_shown": Whole(0, 20),
        },
        task_kwargs=ARITHMETIC_SETTINGS,
    )

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        strategy_mix: Mapping[str, int] | None = None,
        strategy: str | None = None,
        num_generations: int | None = None,
        **run: Unpack[RunSettings],
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
        super().__init__(env_kwargs, **run)
        task, seed, task_kwargs = self.task, self.seed, self.task_kwargs
        probe = env(**self.env_kwargs)
        self.agents = tuple(probe.possible_agents)
        # The solver earns its final attempt's score, in [0, 1], plus format_reward when
        # formatted; the critic the score's change, in [-1, 1].
        bonus = float(probe.unwrapped.config.format_reward)
        self.reward_range = (min(-1.0, bonus), max(1.0, 1.0 + bonus))
        probe.close()
        mix = strategy_mix or {strategy or "iid": 4 if num_generations is None else num_generations}
        self.mix = dict(mix)
        pairs = normalize_mix(self.mix)
        two_turns = any(s == Strategy.TWO_TURN_FEEDBACK and n > 0 for s, n in pairs)
        self.max_agent_turns = 2 if two_turns else 1  # the solver's attempts
        if task in CODE_DATASETS:
            if task_kwargs:
                raise ValueError(
                    f"task_kwargs are settings of the arithmetic task, got {task_kwargs} "
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

    def reference_players(self) -> dict[str, Agent]:
        """A solver that answers right at once, and a critic that judges by the reference.

        Math: the solver writes each problem's reference answer in a box
        (:class:`~llm_envs.expert_iteration.agents.ScriptedMathSolver`); code: the
        data set's reference program in a fenced block. The critic is
        :class:`~llm_envs.expert_iteration.agents.ScriptedCritic` (math only; on
        code it says it cannot tell).

        Raises:
            ValueError: a code data set without reference solutions (CoopHumanEval).
        """
        from llm_envs.expert_iteration.agents import ScriptedCritic, ScriptedMathSolver

        solver: Agent
        if self.task in CODE_DATASETS:
            solver = _ReferenceProgrammer([*self.train_problems, *self.eval_problems])
            return {"solver": solver, "critic": ScriptedCritic()}
        # Arithmetic is computed from the question (a task may hold a million problems);
        # another math task's answers are looked up by question.
        solve = None if self.num_eval_problems is None else _answers_by_question(self)
        solver = ScriptedMathSolver(solve, first_attempt="right")
        return {"solver": solver, "critic": ScriptedCritic(solve)}

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


def _answers_by_question(family: ExpertIterationFamily) -> Callable[[str], str | None]:
    """``prompt -> answer`` of the family's math problems: the one whose question it holds."""
    answers = {
        p.question.strip(): p.answer for p in (*family.train_problems, *family.eval_problems)
    }

    def solve(prompt: str) -> str | None:
        return next((a for q, a in answers.items() if q and q in prompt), None)

    return solve


class _ReferenceProgrammer:
    """Writes the reference program of the code problem its first prompt poses, fenced.

    Raises:
        ValueError: a problem without a reference solution (the message names the fix).
    """

    def __init__(self, problems: Sequence[Any]) -> None:
        from llm_envs.expert_iteration.verifier import reference_program

        self._programs: list[tuple[str, str]] = []
        for problem in problems:
            program = reference_program(problem)
            if program is None:
                raise ValueError(
                    f"the reference solver writes each problem's reference solution, and "
                    f"{problem.task_id} has none; use --task humaneval or mbpp"
                )
            self._programs.append((problem.prompt.strip(), program))
        # Longest prompts first: a prompt contained in another never wins.
        self._programs.sort(key=lambda item: -len(item[0]))

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        first = next((m["content"] for m in observation["messages"] if m["role"] == "user"), "")
        program = next((code for prompt, code in self._programs if prompt in first), None)
        return (
            "I do not know this problem."
            if program is None
            else f"```python\n{program.rstrip()}\n```"
        )
