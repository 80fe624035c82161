"""What an evaluation plays in each environment: its seats, its problems, one fresh episode.

An :class:`Arena` answers three questions for :mod:`baselines.eval.run`:
which agents there are (the seats, in ``possible_agents`` order), how problem
``p`` becomes a fresh environment with its reset seed and options, and what an
evaluation records of a finished episode beyond its transcript (a debate's
vote ledger). Problems come from the same sources as training
(:mod:`baselines.env_families`): the *evaluation* problems of a task (for
``arithmetic``, another seed than training's), so a trained model is scored
on problems it has not trained on.

* :class:`DebateArena`: one debate per (question, seating); a vote ledger per
  episode, for the ratings; the ``reference`` entrant (:meth:`DebateArena.reference`):
  a scripted debater that knows each question's answer and votes by it; with a
  reference answer, ``answer_in_text``: whether
  the question's own answer checker accepts some line of the agent's last
  output, rather than its ``<solution>`` (did the model state the right answer
  anywhere, contract or not: ``13 + 21 = 34`` followed by rambling counts). A
  metric of the evaluation only: it never changes the environment's outcome,
  and it says something about models that never follow the XML contract.
* :class:`ExpertIterationArena`: one ``iid`` episode (no help) per problem.
* :class:`CodeCollabArena`: one episode per code problem.

Environments are text in, text out: nothing here sees a token.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

from baselines.eval.seating import SeatingMode
from baselines.policies.base import Policy

__all__ = [
    "Arena",
    "CodeCollabArena",
    "DebateArena",
    "Episode",
    "ExpertIterationArena",
    "make_arena",
]

_NO_REFERENCE = (
    "the reference entrant is a debater; env={env!r} has none: name models for every seat"
)

Episode = tuple[Any, int, dict[str, Any]]
"""A fresh environment, its reset seed and its reset options."""


class Arena(Protocol):
    """An environment as an evaluation plays it."""

    name: str
    """The environment's name (``debate``...)."""
    agents: tuple[str, ...]
    """Its agents, in ``possible_agents`` order: the seats."""
    num_problems: int | None
    """How many distinct problems there are (None: as many as asked)."""

    def episode(self, problem: int, seed: int) -> Episode:
        """A fresh environment for problem ``problem``, reset with ``seed``."""
        ...

    def extras(self, env: Any) -> dict[str, Any]:
        """What to record of a finished episode besides its transcript (JSON values)."""
        ...

    def default_seating(self, num_models: int) -> SeatingMode:
        """The seating of ``seating='auto'``."""
        ...

    def reference(self) -> Policy:
        """The sampler of the ``reference`` entrant (ValueError where there is none)."""
        ...


def _unwrapped(env: Any) -> Any:
    return getattr(env, "unwrapped", env)


class DebateArena:
    """Debates (seed 001): questions from ``task``, one debate per question and seating.

    Args:
        env_kwargs: :func:`llm_envs.debate.env` arguments.
        task: ``default`` (the built-in questions), ``arithmetic`` or ``gsm8k``.
        seed: the evaluation's seed (which arithmetic problems).
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings.
    """

    name = "debate"

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        task: str,
        seed: int,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        from baselines.env_families import DebateFamily
        from llm_envs.debate import env

        family = DebateFamily(env_kwargs, task, seed, task_kwargs)  # checks env_kwargs
        self.env_kwargs = dict(env_kwargs)
        self.questions: Sequence[Any] = family.eval_questions
        self.num_problems = len(self.questions) if task == "default" else None
        probe = env(**self.env_kwargs)
        self.agents = tuple(probe.possible_agents)
        probe.close()

    def episode(self, problem: int, seed: int) -> Episode:
        """Debate question ``problem``."""
        from llm_envs.debate import env

        question = self.questions[problem % len(self.questions)]
        return env(**self.env_kwargs), seed, {"question": question}

    def extras(self, env: Any) -> dict[str, Any]:
        """The vote ledger, and ``answer_in_text`` per agent when there is a reference answer."""
        debate = _unwrapped(env)
        out: dict[str, Any] = {"votes": [[v.author, v.a, v.op, v.b] for v in debate.votes]}
        if debate.question.answer is not None:
            last: dict[str, str] = {}
            for turn in debate.turns:
                last[debate.possible_agents[turn.agent]] = turn.text
            out["answer_in_text"] = {
                agent: any(debate.question.is_correct(line) for line in text.splitlines())
                for agent, text in last.items()
            }
        return out

    def default_seating(self, num_models: int) -> SeatingMode:
        """``rotations`` for several models (a tournament), ``self`` for one."""
        return "rotations" if num_models > 1 else "self"

    def reference(self) -> Policy:
        """A debater in every seat that knows each question's reference answer and votes by it.

        Each seat is a :class:`~llm_envs.agents.JudgingDebater` whose solver is the
        question's reference answer: it answers that, and ranks the others'
        answers in three levels (agrees with the reference, differs, broke the
        contract). In a tournament it is an anchor of known strength and a judge
        for every pair of the other models, which a third model that never votes
        (or votes by seat) is not.

        Raises:
            ValueError: a question without a reference answer (the built-in
                questions), or chat observations (it reads the answers from the prompt).
        """
        from baselines.policies.scripted import ScriptedPolicy
        from llm_envs.agents import JudgingDebater

        if self.env_kwargs.get("observation_mode", "prompt") != "prompt":
            raise ValueError(
                "the reference entrant reads the other answers from the prompt; "
                "leave observation_mode at 'prompt' in --env-kwargs"
            )
        answers: dict[str, str] = {}
        for question in self.questions:
            if question.answer is None:
                raise ValueError(
                    "the reference entrant answers with each question's reference answer, and "
                    f"{question.text!r} has none; use --task arithmetic or gsm8k"
                )
            # (Agents find the question by its first line: llm_envs.agents.question_in.)
            answers[question.text.split("\n", 1)[0]] = question.answer
        seats = len(self.agents)
        return ScriptedPolicy(
            {
                agent: JudgingDebater(index, seats, solver=answers.get, max_votes=seats * seats)
                for index, agent in enumerate(self.agents)
            }
        )


class ExpertIterationArena:
    """Expert iteration (seed 003) without help: one ``iid`` episode per held-out problem.

    Args:
        env_kwargs: :func:`llm_envs.expert_iteration.env` arguments.
        task: ``default``/``arithmetic`` or ``gsm8k``.
        seed: the evaluation's seed.
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings.
    """

    name = "expert_iteration"

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        task: str,
        seed: int,
        task_kwargs: Mapping[str, Any] | None = None,
    ) -> None:
        from baselines.env_families import ExpertIterationFamily
        from llm_envs.expert_iteration import env

        family = ExpertIterationFamily(env_kwargs, task, {"iid": 1}, seed, task_kwargs)
        self.env_kwargs = dict(env_kwargs)
        self.problems: Sequence[Any] = family.eval_problems
        self.num_problems = None if task in ("default", "arithmetic") else len(self.problems)
        probe = env(**self.env_kwargs)
        self.agents = tuple(probe.possible_agents)
        probe.close()

    def episode(self, problem: int, seed: int) -> Episode:
        """Problem ``problem``, strategy ``iid``."""
        from llm_envs.expert_iteration import plan_groups

        plan = plan_groups([self.problems[problem % len(self.problems)]], {"iid": 1}, seed=seed)
        return plan.make_envs(**self.env_kwargs)[0], plan.seeds[0], dict(plan.options[0])

    def extras(self, env: Any) -> dict[str, Any]:
        """Nothing: the solver's infos say it all."""
        return {}

    def default_seating(self, num_models: int) -> SeatingMode:
        """``self``: each model solves on its own."""
        return "self"

    def reference(self) -> Policy:
        """None here: the ``reference`` entrant plays debates only."""
        raise ValueError(_NO_REFERENCE.format(env=self.name))


class CodeCollabArena:
    """Code collaboration (seed 004): one episode per problem of a code data set.

    Args:
        env_kwargs: :func:`llm_envs.code_collab.parallel_env` arguments.
        task: ``default`` (``coophumaneval``), ``coophumaneval``, ``humaneval`` or ``mbpp``.
    """

    name = "code_collab"

    def __init__(self, env_kwargs: Mapping[str, Any], task: str) -> None:
        from llm_envs.code_collab import load_problems, parallel_env

        if "problems" in env_kwargs:
            raise ValueError("pass code problems through `task`, not env_kwargs['problems']")
        self.env_kwargs = dict(env_kwargs)
        dataset: Any = "coophumaneval" if task == "default" else task  # checked by the loader
        self.problems = tuple(load_problems(dataset))
        self.num_problems = len(self.problems)
        probe = parallel_env(problems=self.problems, **self.env_kwargs)  # checks env_kwargs
        self.agents = tuple(probe.possible_agents)
        probe.close()

    def episode(self, problem: int, seed: int) -> Episode:
        """Problem ``problem`` of the data set."""
        from llm_envs.code_collab import parallel_env

        env = parallel_env(problems=self.problems, **self.env_kwargs)
        return env, seed, {"problem": self.problems[problem % len(self.problems)]}

    def extras(self, env: Any) -> dict[str, Any]:
        """Nothing: the team reward and test results are in the infos."""
        return {}

    def default_seating(self, num_models: int) -> SeatingMode:
        """``self``: the team reward is shared, so each model is measured as a whole team."""
        return "self"

    def reference(self) -> Policy:
        """None here: the ``reference`` entrant plays debates only."""
        raise ValueError(_NO_REFERENCE.format(env=self.name))


def make_arena(
    env: str, env_kwargs: Mapping[str, Any], task: str, seed: int, task_kwargs: Mapping[str, Any]
) -> DebateArena | ExpertIterationArena | CodeCollabArena:
    """The arena of ``env`` (``debate``, ``expert_iteration`` or ``code_collab``).

    Raises:
        ValueError: an unknown environment, or arguments it refuses.
    """
    if env == "debate":
        return DebateArena(env_kwargs, task, seed, task_kwargs)
    if env == "expert_iteration":
        return ExpertIterationArena(env_kwargs, task, seed, task_kwargs)
    if env == "code_collab":
        return CodeCollabArena(env_kwargs, task)
    raise ValueError(f"unknown env {env!r}; choose debate, expert_iteration or code_collab")
