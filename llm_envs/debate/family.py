"""The debate family: what trainers, the evaluator and the report need from debates.

* Training: one group per question, ``debates_per_question`` debates of it
  (one by default), every seat played by the trained policy (self-play), at most
  ``max_rounds`` turns per agent. Questions come from
  ``task``: ``default`` (the built-in questions), ``arithmetic`` or ``gsm8k``
  (problems with reference answers; the answers are metrics, never reward
  unless shaping asks for them). With the run option ``chat_observations``
  every debate runs in ``observation_mode="chat"``.
* A trainer's evaluation plays each question ``num_agents`` times with the
  trained policy in role ``i`` of debate ``i`` and a fixed policy in the other
  roles (the debate recipe's "role-averaged vs fixed opponents"); beside it,
  the majority vote of ``num_agents`` answers each given alone (the baseline
  debate papers compare with).
* The teacher for a warm start and the evaluator's ``reference`` entrant are
  :class:`~llm_envs.debate.agents.JudgingDebater` seats that know each answer.
* The report adds a record's rewards up as :func:`~llm_envs.debate.env` pays
  them: parse-error penalties, the pairwise reward, and the shaping.
"""

from __future__ import annotations

import threading
import zlib
from collections.abc import Callable, Mapping, Sequence
from typing import Any, ClassVar, Unpack, get_args

import numpy as np

from llm_envs.arguments import check_int
from llm_envs.client_settings import (
    ARITHMETIC_SETTINGS,
    ClientSettings,
    Fields,
    Flag,
    Number,
    OneOf,
    Whole,
)
from llm_envs.debate.config import ObservationMode, OnParseError, VoteCounting
from llm_envs.debate.rewards import RewardMode
from llm_envs.debate.shaping import SHAPING_TERMS
from llm_envs.family import Agent, EpisodePlan, EpisodeRewards, FamilyBase, RunSettings, Sampler
from llm_envs.formatting import fmt
from llm_envs.seeding import derive_seed, ordered

__all__ = ["DebateFamily"]


class DebateFamily(FamilyBase):
    """Debates as a family (see the module docstring).

    Args:
        env_kwargs: :func:`llm_envs.debate.env` arguments (``reward`` and the
            :class:`~llm_envs.debate.DebateConfig` fields).
        task: ``default``, ``arithmetic`` or ``gsm8k``.
        seed: the run's seed (question order, arithmetic problems).
        task_kwargs: :class:`~llm_envs.tasks.ArithmeticTask` settings.
        chat_observations: play every debate in ``observation_mode="chat"`` (each
            agent's observation extends its previous one), for a trainer that
            trains an agent's debate as one sequence.
        debates_per_question: debates of each question in a training group.
            Within one debate the later seats often repeat the first answer,
            so every seat is equally right and a group-centred reward cannot
            tell a correct answer from a wrong one; several debates of the
            question can.

    Raises:
        ValueError: a bad setting, or ``chat_observations`` with
            ``observation_mode="prompt"`` in ``env_kwargs``.
    """

    name: ClassVar[str] = "debate"
    run_options: ClassVar[tuple[str, ...]] = ("chat_observations", "debates_per_question")
    tasks: ClassVar[tuple[str, ...]] = ("default", "arithmetic", "gsm8k")
    headline_metrics: ClassVar[tuple[str, ...]] = ("solution_correct", "answer_in_text")
    metric_titles: ClassVar[Mapping[str, str]] = {
        "solution_correct": "correct",
        "answer_in_text": "answer in text",
        "majority_vote/correct": "majority vote correct",
    }
    fixed_opponent: ClassVar[bool] = True
    teacher_options: ClassVar[tuple[str, ...] | None] = ("mistake_rate", "broken_rate")
    # A served debate's size is the client's to choose within what one request may cost:
    # a prompt holds every agent's answers of each round shown.
    client_settings: ClassVar[ClientSettings] = ClientSettings(
        env_kwargs={
            "num_agents": Whole(2, 8),
            "max_rounds": Whole(1, 5),
            "history_rounds": Whole(-1, 5),
            "max_chars_per_field": Whole(1, 4000),
            "on_parse_error": OneOf(get_args(OnParseError)),
            "observation_mode": OneOf(get_args(ObservationMode)),
            "vote_counting": OneOf(get_args(VoteCounting)),
            "shuffle_answers": Flag(),
            "shuffle_labels": Flag(),
            "reward": OneOf((*get_args(RewardMode), None)),
            "shaping": Fields(dict.fromkeys(SHAPING_TERMS, Number(-10, 10))),
        },
        task_kwargs=ARITHMETIC_SETTINGS,
    )

    def __init__(
        self,
        env_kwargs: Mapping[str, Any],
        *,
        chat_observations: bool = False,
        debates_per_question: int = 1,
        **run: Unpack[RunSettings],
    ) -> None:
        from llm_envs.debate import DEFAULT_QUESTIONS, DebateQuestion, env
        from llm_envs.tasks.math_sources import LazyMap, math_problems

        if "questions" in env_kwargs:
            raise ValueError("pass debate questions through `task`, not env_kwargs['questions']")
        self.debates_per_question = check_int(
            "debates_per_question", debates_per_question, minimum=1
        )
        super().__init__(env_kwargs, **run)
        task, seed, task_kwargs = self.task, self.seed, self.task_kwargs
        if chat_observations:
            if self.env_kwargs.get("observation_mode", "chat") != "chat":
                raise ValueError(
                    "this trainer trains an agent's debate as one growing chat: it needs "
                    f"observation_mode='chat', got {self.env_kwargs['observation_mode']!r}; "
                    "drop observation_mode from env_kwargs"
                )
            self.env_kwargs["observation_mode"] = "chat"
        probe = env(**self.env_kwargs)  # a bad argument fails here, before a model is loaded
        self.agents = tuple(probe.possible_agents)
        self.max_agent_turns = probe.unwrapped.config.max_rounds  # one answer per round
        self.reward_range = _reward_range(self.env_kwargs, self.max_agent_turns)
        probe.close()
        self.num_agents = len(self.agents)
        if task == "default":
            if task_kwargs:
                raise ValueError(
                    f"task_kwargs are settings of the arithmetic task, got {task_kwargs} "
                    "with task='default'; use task='arithmetic' or drop them"
                )
            self.train_questions: Sequence[Any] = DEFAULT_QUESTIONS
            self.eval_questions: Sequence[Any] = DEFAULT_QUESTIONS
            self.num_eval_problems = len(DEFAULT_QUESTIONS)
        else:

            def as_questions(problems: Sequence[Any]) -> Sequence[Any]:
                return LazyMap(problems, lambda p: DebateQuestion(p.question, answer=p.answer))

            self.train_questions = as_questions(math_problems(task, "train", seed, task_kwargs))
            self.eval_questions = as_questions(math_problems(task, "eval", seed, task_kwargs))
            self.num_eval_problems = None

    # ------------------------------------------------------------------ trainers

    def _plan(
        self,
        questions: list[Any],
        seeds: list[int],
        roles: list[frozenset[str]],
        env_kwargs: Mapping[str, Any] | None = None,
    ) -> EpisodePlan:
        from llm_envs.debate import env

        kwargs = self.env_kwargs if env_kwargs is None else env_kwargs
        return EpisodePlan(
            envs=[env(**kwargs) for _ in questions],
            seeds=seeds,
            options=[{"question": q} for q in questions],
            group_keys=list(range(len(questions))),  # a group is one debate
            trained_agents=roles,
            titles=[q.text for q in questions],
        )

    def training(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """``debates_per_question`` self-play debates of one question per group index."""
        return self._debates(group_indices, seed, self.debates_per_question)

    def _debates(self, group_indices: Sequence[int], seed: int, per_question: int) -> EpisodePlan:
        everyone = frozenset(self.agents)
        questions = [ordered(self.train_questions, g, self.seed) for g in group_indices]
        if per_question == 1:
            return self._plan(
                questions,
                [derive_seed(seed, g) for g in group_indices],
                [everyone] * len(questions),
            )
        plan = self._plan(
            [q for q in questions for _ in range(per_question)],
            [derive_seed(seed, g, k) for g in group_indices for k in range(per_question)],
            [everyone] * (len(questions) * per_question),
        )
        plan.group_keys = [g for g in group_indices for _ in range(per_question)]
        return plan

    def demonstrations(
        self,
        group_indices: Sequence[int],
        seed: int,
        mistake_rate: float = 0.25,
        broken_rate: float = 0.0,
    ) -> tuple[EpisodePlan, dict[str, Agent]]:
        """Training debates and a teacher per agent (:class:`~llm_envs.debate.JudgingDebater`).

        Each teacher answers with the question's reference answer, or (with
        probability ``mistake_rate``, seeded) that answer plus one, so the
        debates hold disagreements to judge and vote on. With probability
        ``broken_rate`` a debate has one seat (seeded) whose answers break the
        contract (:class:`~llm_envs.debate.agents.MalformedDebater`): those debates
        mask parse errors, so the seat's turns weigh nothing (it is not
        imitated) and the teachers see "no valid answer" and vote it last.

        Raises:
            ValueError: if a question has no reference answer (the built-in
                questions): the teacher could not answer it.
        """
        from llm_envs.debate.agents import JudgingDebater
        from llm_envs.tasks.math_answers import format_number, parse_number

        plan = self._debates(group_indices, seed, 1)  # the teacher's debates: one per question
        answers = {o["question"].text: o["question"].answer for o in plan.options}
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

        teachers: dict[str, Agent] = {
            f"agent_{i}": JudgingDebater(i, self.num_agents, solver=solver(i))
            for i in range(self.num_agents)
        }
        if broken_rate > 0:
            plan, teachers = self._with_broken_seats(plan, teachers, seed, broken_rate)
        return plan, teachers

    def _with_broken_seats(
        self, plan: EpisodePlan, teachers: dict[str, Agent], seed: int, rate: float
    ) -> tuple[EpisodePlan, dict[str, Agent]]:
        """``plan`` with parse errors masked, and a teacher that breaks the contract in some seats.

        The teachers are keyed by agent for every debate alike, so a broken
        seat is a teacher that writes prose in the debates chosen for it and
        defers to the judging teacher elsewhere.
        """
        from llm_envs.debate.agents import MalformedDebater

        rng = np.random.default_rng([seed & 0xFFFFFFFF, 0xB40C])
        broken: dict[str, set[str]] = {agent: set() for agent in teachers}
        for options in plan.options:
            if rng.random() < rate:
                seat = f"agent_{int(rng.integers(self.num_agents))}"
                broken[seat].add(options["question"].text)
        masked = self._plan(
            [o["question"] for o in plan.options],
            plan.seeds,
            list(plan.trained_agents),
            {**self.env_kwargs, "on_parse_error": "mask"},
        )
        return masked, {
            agent: _BrokenIn(broken[agent], MalformedDebater("prose"), teacher)
            for agent, teacher in teachers.items()
        }

    def evaluation(self, group_indices: Sequence[int], seed: int) -> EpisodePlan:
        """``num_agents`` debates per question; the trained policy plays role i in debate i.

        Parse errors are masked (``on_parse_error="mask"``) whatever the training
        debates do: a broken answer by the fixed opponent does not end the
        debate before the trained policy has spoken, so every role gets all its
        turns and the metrics average over roles for real.
        """
        questions, seeds, roles = [], [], []
        for g in group_indices:
            question = self.eval_questions[g % len(self.eval_questions)]
            for agent in self.agents:
                questions.append(question)
                seeds.append(derive_seed(seed, g))  # the same debate setting for every role
                roles.append(frozenset({agent}))
        return self._plan(questions, seeds, roles, {**self.env_kwargs, "on_parse_error": "mask"})

    def independent_answers(
        self, sample: Sampler, problems: Sequence[int], seed: int
    ) -> dict[str, float]:
        """The majority vote of answers each given alone (:mod:`llm_envs.debate.majority`).

        Problem ``p`` is the question of evaluation group ``p`` (and the
        evaluator's problem ``p``); its answers are sampled from the prompt the
        first agent reads in :meth:`evaluation`'s debate of it, seeded alike.
        """
        from llm_envs.debate.majority import majority_vote

        questions = [self.eval_questions[p % len(self.eval_questions)] for p in problems]
        seeds = [derive_seed(seed, p) for p in problems]
        kwargs = {**self.env_kwargs, "on_parse_error": "mask"}
        return majority_vote(sample, questions, seeds, kwargs, self.num_agents)

    # ------------------------------------------------------------------ the evaluator

    def eval_episode(self, problem: int, seed: int) -> tuple[Any, int, dict[str, Any]]:
        """Debate question ``problem``."""
        from llm_envs.debate import env

        question = self.eval_questions[problem % len(self.eval_questions)]
        return env(**self.env_kwargs), seed, {"question": question}

    def eval_extras(self, env: Any) -> dict[str, Any]:
        """The vote ledger, and ``answer_in_text`` per agent when there is a reference answer.

        ``answer_in_text``: whether the question's own answer checker accepts
        some line of the agent's last output, rather than its ``<solution>``
        (did the model state the right answer anywhere, contract or not). A
        metric of the evaluation only: it never changes the outcome.
        """
        debate = getattr(env, "unwrapped", env)
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

    def default_seating(self, num_models: int) -> str:
        """``rotations`` for several models (a tournament), ``self`` for one."""
        return "rotations" if num_models > 1 else "self"

    def reference_players(self) -> dict[str, Agent]:
        """A debater in every seat that knows each question's reference answer and votes by it.

        Each seat is a :class:`~llm_envs.debate.agents.JudgingDebater` whose solver is the
        question's reference answer: it answers that, and ranks the others'
        answers in three levels (agrees with the reference, differs, broke the
        contract). In a tournament it is an anchor of known strength and a judge
        for every pair of the other models, which a third model that never votes
        (or votes by seat) is not.

        Raises:
            ValueError: a question without a reference answer (the built-in
                questions), or chat observations (it reads the answers from the prompt).
        """
        return self._reference_debaters(self.eval_questions)

    def scripted_players(self, seed: int) -> dict[str, dict[str, Agent]]:
        """``reference``: the reference players, knowing the training questions' answers.

        Questions without reference answers (the built-in ones) have none: ``{}``.
        """
        try:
            return {"reference": self._reference_debaters(self.train_questions)}
        except ValueError:
            return {}

    def _reference_debaters(self, questions: Sequence[Any]) -> dict[str, Agent]:
        """A :class:`~llm_envs.debate.agents.JudgingDebater` per seat, answering ``questions``."""
        from llm_envs.debate.agents import JudgingDebater

        if self.env_kwargs.get("observation_mode", "prompt") != "prompt":
            raise ValueError(
                "the reference entrant reads the other answers from the prompt; "
                "leave observation_mode at 'prompt' in --env-kwargs"
            )
        # A counted set (the built-in questions) is checked whole; a math task's
        # questions all have answers, and may be a million: its first stands for all.
        for question in questions if self.num_eval_problems is not None else questions[:1]:
            _ReferenceAnswers.check(question)
        answers = _ReferenceAnswers(questions)
        seats = len(self.agents)
        return {
            agent: JudgingDebater(index, seats, solver=answers, max_votes=seats * seats)
            for index, agent in enumerate(self.agents)
        }

    # ------------------------------------------------------------------ the report

    @staticmethod
    def episode_rewards(record: Mapping[str, Any], env_kwargs: Mapping[str, Any]) -> EpisodeRewards:
        """Each agent's return, added up the way :func:`llm_envs.debate.env` pays it.

        A -1 penalty per parse error (``on_parse_error="penalize"``, the
        default), plus the final pairwise reward named by ``env_kwargs["reward"]``
        (``win_rate`` by default), plus each answer's shaping when
        ``env_kwargs["shaping"]`` asked for it.
        """
        summary = record["summary"]
        mode = env_kwargs.get("reward", "win_rate")
        penalize = env_kwargs.get("on_parse_error", "penalize") == "penalize"
        pairwise = summary[mode] if mode else [0.0] * len(summary["win_rate"])
        shaping = env_kwargs.get("shaping") or {}
        total, how, per_turn = {}, {}, {}
        for i, value in enumerate(pairwise):
            agent = f"agent_{i}"
            errors = [
                t["round"]
                for t in record["turns"]
                if t["agent"] == agent and t.get("details", {}).get("parse_error")
            ]
            penalty = -1.0 * len(errors) if penalize else 0.0
            parts = [f"parse-error penalty {fmt(penalty)}"] if penalty else []
            parts.append(f"{mode} {fmt(value)}" if mode else "no pairwise reward (reward=None)")
            shaped = _shaping(record, agent, shaping) if shaping else {}
            if shaped:
                parts.append(f"shaping {fmt(sum(shaped.values()))}")
            total[agent] = penalty + float(value) + sum(shaped.values())
            how[agent] = " + ".join(parts)
            for r in errors:
                per_turn[(r, agent)] = "parse-error penalty -1" if penalize else "masked (reward 0)"
            for r, bonus in shaped.items():
                said = per_turn.get((r, agent))
                per_turn[(r, agent)] = (f"{said} + " if said else "") + f"shaping {fmt(bonus)}"
        return EpisodeRewards(total, how, per_turn)


def _reward_range(env_kwargs: Mapping[str, Any], max_rounds: int) -> tuple[float, float]:
    """An agent's lowest and highest return in a debate (docs/envs/debate.md, Rewards).

    A parse error under ``penalize`` costs -1 once (it ends the debate); the pairwise
    reward is in [0, 1] (``win_rate``), [-1, 1] (``win_minus_loss``) or absent; each
    answer's shaping is in [0, the sum of its weights], one answer per round.

    Example:
        >>> _reward_range({}, 3), _reward_range({"reward": "win_minus_loss"}, 3)
        ((-1.0, 1.0), (-2.0, 1.0))
        >>> _reward_range({"on_parse_error": "mask"}, 3)
        (0.0, 1.0)
        >>> _reward_range({"reward": None, "shaping": {"contract": 0.5, "vote": 0.25}}, 2)
        (-1.0, 1.5)
    """
    mode = env_kwargs.get("reward", "win_rate")
    low, high = {"win_rate": (0.0, 1.0), "win_minus_loss": (-1.0, 1.0)}.get(mode, (0.0, 0.0))
    if env_kwargs.get("on_parse_error", "penalize") == "penalize":
        low -= 1.0
    weights = env_kwargs.get("shaping") or {}
    return low, high + max_rounds * float(sum(weights.values()))


def _shaping(
    record: Mapping[str, Any], agent: str, shaping: Mapping[str, float]
) -> dict[int, float]:
    """debate.env(shaping=...): each answer's partial credit, recomputed by the env's own rules."""
    from llm_envs.debate.protocol import parse_comparisons
    from llm_envs.debate.shaping import judging_info, shaping_reward, visible_correctness
    from llm_envs.judgements import Vote

    summary = record["summary"]
    reference = summary.get("reference_answer") is not None
    num_agents = len(summary["win_rate"])
    seen: list[tuple[int, bool]] = []  # (author, solution_correct) of the answers so far
    shaped: dict[int, float] = {}
    for t in record["turns"]:
        author = int(t["agent"].rsplit("_", 1)[-1])
        correct = bool(t["details"].get("solution_correct"))
        if t["agent"] == agent:
            comparisons = parse_comparisons(
                "\n".join(t["details"].get("votes", [])), author
            ).comparisons
            judging = judging_info(
                comparisons,
                [Vote(author, *c) for c in comparisons],
                visible_correctness(seen, author),
                num_agents,
                reference=reference,
            )
            could_vote = "voted" in judging
            shaped[t["round"]] = shaping_reward(
                t["text"],
                correct if reference else None,
                contract=float(shaping.get("contract", 0.0)),
                correct=float(shaping.get("correct", 0.0)),
                judge=float(shaping.get("judge", 0.0)),
                judgement=judging.get("vote_agreement", 0.0) if reference and could_vote else None,
                vote=float(shaping.get("vote", 0.0)),
                voted=judging.get("voted"),
            )
        seen.append((author, correct))
    return shaped


class _ReferenceAnswers:
    """``question's first line -> reference answer``, read from the questions as far as asked.

    A task may hold a million questions (arithmetic): reading them all up front
    cost the reference entrant half a minute; this reads them in order until
    the one asked for, once. (Agents find the question by its first line:
    :func:`llm_envs.debate.agents.question_in`.) Safe to call from many
    threads at once (``llm-envs check`` plays its reference episodes so): one
    reads the questions at a time.

    Raises:
        ValueError: a question without a reference answer (the built-in ones).
    """

    def __init__(self, questions: Sequence[Any]) -> None:
        self._unread = iter(questions)
        self._answers: dict[str, str] = {}
        self._reading = threading.Lock()

    @staticmethod
    def check(question: Any) -> None:
        """Refuse a question without a reference answer (the message says which to use)."""
        if question.answer is None:
            raise ValueError(
                "the reference entrant answers with each question's reference answer, and "
                f"{question.text!r} has none; use --task arithmetic or gsm8k"
            )

    def __call__(self, first_line: str) -> str | None:
        with self._reading:
            while first_line not in self._answers:
                question = next(self._unread, None)
                if question is None:
                    return None
                self.check(question)
                self._answers[question.text.split("\n", 1)[0]] = question.answer
            return self._answers[first_line]


class _BrokenIn:
    """A teacher that answers as ``broken`` in the debates on ``questions``, else as ``teacher``."""

    def __init__(self, questions: set[str], broken: Any, teacher: Any) -> None:
        self.questions, self.broken, self.teacher = questions, broken, teacher

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        from llm_envs.debate.agents import question_in

        agent = self.broken if question_in(observation) in self.questions else self.teacher
        return str(agent(observation, info))
