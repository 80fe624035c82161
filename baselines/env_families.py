"""What a trainer needs from each environment family: episodes to play and how they group.

A family turns "the groups with these global indices" into an
:class:`EpisodeBatch`: fresh environments, their reset seeds and options, who
plays whom, and how finished episodes become
:class:`~baselines.types.TrajectoryGroup` objects. Everything is a pure
function of the config seed and the group indices, so an iteration's data is
the same after a resume, and processes of a multi-process run can each take a
share of the indices without talking to each other.

* :class:`DebateFamily` (seed 001): a group is one debate; training is
  self-play; evaluation plays each question ``num_agents`` times with the
  trained policy in role ``i`` of debate ``i`` and a fixed policy in the other
  roles ("Evaluation mode: role-averaged vs fixed opponents").
* :class:`ExpertIterationFamily` (seed 003): a group is the episodes of one
  problem, one per entry of the strategy mix; evaluation plays ``iid``
  episodes of held-out problems.

This module never imports torch and never reads environment text.
"""

from __future__ import annotations

import zlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from baselines.policies.base import Policy
from baselines.rollouts import EpisodeResult, group_by, group_episodes
from baselines.types import TrajectoryGroup

__all__ = [
    "DebateFamily",
    "EnvFamily",
    "EpisodeBatch",
    "ExpertIterationFamily",
    "derive_seed",
    "make_family",
]


def derive_seed(*keys: int) -> int:
    """A 31-bit seed that depends on every key (numpy's ``SeedSequence`` mixing).

    Example:
        >>> derive_seed(0, 1) == derive_seed(0, 1) != derive_seed(1, 0)
        True
    """
    return int(np.random.SeedSequence([int(k) & 0xFFFFFFFF for k in keys]).generate_state(1)[0])


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


class EnvFamily(Protocol):
    """An environment family as the trainer sees it."""

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodeBatch:
        """The episodes of the training groups with these global indices."""
        ...

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodeBatch:
        """The episodes of the evaluation groups with these indices."""
        ...

    def demonstrations(
        self,
        group_indices: Sequence[int],
        seed: int,
        mistake_rate: float = 0.25,
        broken_rate: float = 0.0,
    ) -> tuple[EpisodeBatch, dict[str, Any]]:
        """Training episodes and a scripted teacher per agent, for a warm start."""
        ...

    @property
    def needs_fixed_opponent(self) -> bool:
        """Whether evaluation plays the trained policy against a fixed one."""
        ...


def _ordered(items: Sequence[Any], index: int, seed: int) -> Any:
    """Item ``index`` of an endless stream of seeded permutations of ``items`` (epochs)."""
    epoch, position = divmod(index, len(items))
    order = np.random.default_rng([seed & 0xFFFFFFFF, epoch]).permutation(len(items))
    return items[int(order[position])]


def _math_problems(
    task: str, split: str, seed: int, task_kwargs: Mapping[str, Any] | None = None
) -> Sequence[Any]:
    from llm_envs.tasks import ArithmeticTask, load_gsm8k

    settings = dict(task_kwargs or {})
    if task in ("default", "arithmetic"):
        if "operations" in settings:  # JSON gives a list; the task wants a tuple
            settings["operations"] = tuple(settings["operations"])
        settings.setdefault("num_problems", 1_000_000)
        # Another seed for evaluation: problems the policy has (almost surely) not trained on.
        return ArithmeticTask(seed=seed if split == "train" else seed + 1, **settings)
    if settings:
        raise ValueError(f"task_kwargs are for the arithmetic task, got {settings} for {task!r}")
    if task == "gsm8k":
        return load_gsm8k("train" if split == "train" else "test")
    raise ValueError(f"unknown task {task!r}; choose default, arithmetic or gsm8k")


class DebateFamily:
    """Seed 001's debates: one group per debate.

    Args:
        env_kwargs: :func:`llm_envs.debate.env` arguments (``reward`` and the
            :class:`~llm_envs.debate.DebateConfig` fields).
        task: ``default`` (the built-in questions, for training and evaluation),
            ``arithmetic`` or ``gsm8k`` (problems with reference answers; the
            answers are metrics only, never reward).
        seed: the run's seed (question order).
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings.
    """

    needs_fixed_opponent = True

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        task: str,
        seed: int,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        from llm_envs.debate import DEFAULT_QUESTIONS, DebateQuestion, env

        if "questions" in env_kwargs:
            raise ValueError("pass debate questions through `task`, not env_kwargs['questions']")
        self.env_kwargs = dict(env_kwargs)
        env(**self.env_kwargs).close()  # a bad argument fails here, before a model is loaded
        self.num_agents = int(self.env_kwargs.get("num_agents", 3))
        self.seed = seed
        if task == "default":
            self.train_questions: Sequence[Any] = DEFAULT_QUESTIONS
            self.eval_questions: Sequence[Any] = DEFAULT_QUESTIONS
        else:

            def as_questions(problems: Sequence[Any]) -> Sequence[Any]:
                return _LazyMap(problems, lambda p: DebateQuestion(p.question, answer=p.answer))

            self.train_questions = as_questions(_math_problems(task, "train", seed, task_kwargs))
            self.eval_questions = as_questions(_math_problems(task, "eval", seed, task_kwargs))

    def _batch(
        self,
        questions: list[Any],
        seeds: list[int],
        roles: list[frozenset[str]],
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> EpisodeBatch:
        from llm_envs.debate import env

        kwargs = self.env_kwargs if env_kwargs is None else env_kwargs
        return EpisodeBatch(
            envs=[env(**kwargs) for _ in questions],
            seeds=seeds,
            options=[{"question": q} for q in questions],
            to_groups=lambda results: group_episodes(results),
            trained_agents=roles,
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodeBatch:
        """One self-play debate per group index."""
        everyone = frozenset(f"agent_{i}" for i in range(self.num_agents))
        questions = [_ordered(self.train_questions, g, self.seed) for g in group_indices]
        return self._batch(
            questions, [derive_seed(seed, g) for g in group_indices], [everyone] * len(questions)
        )

    def demonstrations(
        self,
        group_indices: Sequence[int],
        seed: int,
        mistake_rate: float = 0.25,
        broken_rate: float = 0.0,
    ) -> tuple[EpisodeBatch, dict[str, Any]]:
        """Training debates and a teacher per agent (:class:`~llm_envs.agents.JudgingDebater`).

        Each teacher answers with the question's reference answer, or (with
        probability ``mistake_rate``, seeded) that answer plus one, so the
        debates hold disagreements to judge and vote on. With probability
        ``broken_rate`` a debate has one seat (seeded) whose answers break the
        contract (:class:`~llm_envs.agents.MalformedDebater`): those debates
        mask parse errors, so the seat's turns weigh nothing (it is not
        imitated) and the teachers see "no valid answer" and vote it last.

        Raises:
            ValueError: if a question has no reference answer (the built-in
                questions): the teacher could not answer it.
        """
        from llm_envs.agents import JudgingDebater
        from llm_envs.tasks.math_answers import format_number, parse_number

        batch = self.training(group_indices, seed)
        answers = {o["question"].text: o["question"].answer for o in batch.options}
        if any(a is None for a in answers.values()):
            raise ValueError(
                "a warm start needs questions with reference answers for its teacher; "
                "use --task arithmetic (or gsm8k), or --warm-start-steps 0"
            )

        def solver(agent: int) -> Callable[[str], str | None]:
            def solve(question: str) -> str | None:
                answer = answers.get(question)
                rng = np.random.default_rng(
                    [seed & 0xFFFFFFFF, agent, zlib.crc32(question.encode())]
                )
                value = parse_number(answer) if answer is not None else None
                if value is not None and rng.random() < mistake_rate:
                    return format_number(value + 1)
                return answer

            return solve

        teachers: dict[str, Any] = {
            f"agent_{i}": JudgingDebater(i, self.num_agents, solver=solver(i))
            for i in range(self.num_agents)
        }
        if broken_rate > 0:
            batch, teachers = self._with_broken_seats(batch, teachers, seed, broken_rate)
        return batch, teachers

    def _with_broken_seats(
        self, batch: EpisodeBatch, teachers: dict[str, Any], seed: int, rate: float
    ) -> tuple[EpisodeBatch, dict[str, Any]]:
        """``batch`` with parse errors masked, and a teacher that breaks the contract in some seats.

        The teachers are keyed by agent for every debate alike, so a broken
        seat is a teacher that writes prose in the debates chosen for it and
        defers to the judging teacher elsewhere.
        """
        from llm_envs.agents import MalformedDebater

        rng = np.random.default_rng([seed & 0xFFFFFFFF, 0xB40C])
        broken: dict[str, set[str]] = {agent: set() for agent in teachers}
        for options in batch.options:
            if rng.random() < rate:
                seat = f"agent_{int(rng.integers(self.num_agents))}"
                broken[seat].add(options["question"].text)
        masked = self._batch(
            [o["question"] for o in batch.options],
            batch.seeds,
            list(batch.trained_agents),
            {**self.env_kwargs, "on_parse_error": "mask"},
        )
        return masked, {
            agent: _BrokenIn(broken[agent], MalformedDebater("prose"), teacher)
            for agent, teacher in teachers.items()
        }

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodeBatch:
        """``num_agents`` debates per question; the trained policy plays role i in debate i.

        Parse errors are masked (``on_parse_error="mask"``) whatever the training
        debates do: a broken answer by the fixed opponent does not end the
        debate before the trained policy has spoken, so every role gets all its
        turns and the metrics average over roles for real.
        """
        n = self.num_agents
        questions, seeds, roles = [], [], []
        for g in group_indices:
            question = self.eval_questions[g % len(self.eval_questions)]
            for role in range(n):
                questions.append(question)
                seeds.append(derive_seed(seed, g))  # the same debate setting for every role
                roles.append(frozenset({f"agent_{role}"}))
        return self._batch(questions, seeds, roles, {**self.env_kwargs, "on_parse_error": "mask"})


class ExpertIterationFamily:
    """Seed 003's expert iteration: one group per problem, one episode per strategy slot.

    Args:
        env_kwargs: :func:`llm_envs.expert_iteration.env` arguments.
        task: ``default``/``arithmetic`` (procedural arithmetic) or ``gsm8k``.
        strategy_mix: episodes per strategy in every group.
        seed: the run's seed (problem order).
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings.
    """

    needs_fixed_opponent = False

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        task: str,
        strategy_mix: Mapping[str, int],
        seed: int,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        from llm_envs.expert_iteration import env, normalize_mix

        if "problems" in env_kwargs:
            raise ValueError("pass problems through `task`, not env_kwargs['problems']")
        self.env_kwargs = dict(env_kwargs)
        env(**self.env_kwargs).close()
        self.mix = dict(strategy_mix)
        normalize_mix(self.mix)
        self.seed = seed
        self.train_problems = _math_problems(task, "train", seed, task_kwargs)
        self.eval_problems = _math_problems(task, "eval", seed, task_kwargs)

    def _batch(self, problems: list[Any], mix: Mapping[str, int], seed: int) -> EpisodeBatch:
        from llm_envs.expert_iteration import plan_groups

        plan = plan_groups(problems, mix, seed=seed)
        return EpisodeBatch(
            envs=plan.make_envs(**self.env_kwargs),
            seeds=plan.seeds,
            options=plan.options,
            # Critics (feedback_source="critic") are kept out: their reward measures
            # the improvement they caused, not the solver's success.
            to_groups=lambda results: group_by(results, plan.group_key, agents=["solver"]),
            trained_agents=[frozenset({"solver"})] * len(plan),
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodeBatch:
        """One group of ``sum(strategy_mix)`` episodes per problem index."""
        problems = [_ordered(self.train_problems, g, self.seed) for g in group_indices]
        first = group_indices[0] if group_indices else 0
        return self._batch(problems, self.mix, derive_seed(seed, first))

    def demonstrations(
        self,
        group_indices: Sequence[int],
        seed: int,
        mistake_rate: float = 0.25,
        broken_rate: float = 0.0,
    ) -> tuple[EpisodeBatch, dict[str, Any]]:
        """No teacher yet: a warm start is for the debate."""
        raise ValueError(
            "a warm start has a teacher for --env debate only; use --warm-start-steps 0 "
            "for expert_iteration"
        )

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodeBatch:
        """One ``iid`` episode per held-out problem index (accuracy without help)."""
        problems = [self.eval_problems[g % len(self.eval_problems)] for g in group_indices]
        first = group_indices[0] if group_indices else 0
        return self._batch(problems, {"iid": 1}, derive_seed(seed, first))


class _BrokenIn:
    """A teacher that answers as ``broken`` in the debates on ``questions``, else as ``teacher``."""

    def __init__(self, questions: set[str], broken: Any, teacher: Any) -> None:
        self.questions, self.broken, self.teacher = questions, broken, teacher

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        from llm_envs.agents import question_in

        agent = self.broken if question_in(observation) in self.questions else self.teacher
        return str(agent(observation, info))


class _LazyMap(Sequence[Any]):
    """``items`` with ``fn`` applied on access (a million-problem task costs nothing)."""

    def __init__(self, items: Sequence[Any], fn: Callable[[Any], Any]) -> None:
        self.items, self.fn = items, fn

    def __len__(self) -> int:
        return len(self.items)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return [self.fn(x) for x in self.items[index]]
        return self.fn(self.items[index])


def make_family(
    env: str,
    env_kwargs: Mapping[str, Any],
    task: str,
    seed: int,
    strategy_mix: Mapping[str, int] | None = None,
    task_kwargs: Mapping[str, Any] | None = None,
) -> DebateFamily | ExpertIterationFamily:
    """The family called ``env`` (``debate`` or ``expert_iteration``)."""
    if env == "debate":
        return DebateFamily(env_kwargs, task, seed, task_kwargs)
    if env == "expert_iteration":
        mix = strategy_mix or {"iid": 4}
        return ExpertIterationFamily(env_kwargs, task, mix, seed, task_kwargs)
    raise ValueError(f"unknown env {env!r}; choose debate or expert_iteration")
