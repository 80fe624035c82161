r"""Expert iteration: one problem, a search strategy, and a training context for every turn.

This is seed 003 as a PettingZoo AEC environment. Expert iteration samples with
help (extra instructions, a hint, feedback on a first attempt) and trains the
model to produce the result without the help. Every turn therefore has two
contexts: the observation, which the model is sampled on, and
``info["training_messages"]``, which its completion is trained on. The
completion itself is never altered (seed 003, "Invariants").

Agents
    ``"solver"`` answers the problem. With ``feedback_source="critic"`` a
    second agent, ``"critic"``, reviews attempt 1 of ``two_turn_feedback``
    episodes and writes the feedback; in episodes of other strategies it never
    acts and is not among ``agents``.

Turn order
    One turn (``iid``, ``prompt_augmentation``, ``answer_hint``); or attempt 1,
    (the critic's review,) attempt 2 (``two_turn_feedback``). With
    ``on_first_correct="stop"`` a correct attempt 1 ends the episode.

Observation
    ``{"messages": [...]}``: the sampling context of the strategy (see
    :mod:`llm_envs.expert_iteration.strategies` for each strategy's sampling
    and training contexts). Between its turns and after the end, an agent
    observes the conversation so far, its own last answer included. The
    critic observes a system message and one user message holding the problem
    and attempt 1 (and the reference answer with ``critic_sees_reference``).

Action
    Raw text. The solver's final answer is extracted from it (math:
    ``\boxed{}``, ``####``, "answer:", last number) or its program is taken from
    its last fenced code block (code). Any string is legal: text without an
    answer is a wrong answer with its reward.

Reward
    For the solver, once, for the final attempt: its score (math: 1.0 when
    correct; code: the fraction of tests passed, or 1/0 with
    ``code_reward="all_or_nothing"``), plus ``format_reward`` when it is
    formatted (a closed ``\boxed{}``; a fenced code block). Attempt 1 of a
    two-turn episode that goes on gets no reward; its would-be reward is in
    its infos. The critic gets the improvement it brought about: the score of
    attempt 2 minus the score of attempt 1 (in [-1, 1]; 0 when it never acted).

Termination
    After the final attempt (``terminations``). Episodes have at most three turns.

Infos
    Context (for the upcoming turn): ``stop`` (the configured stop strings),
    ``strategy``, ``round`` (the attempt the turn produces or, for the critic,
    reviews: 1 or 2), ``turn`` (0-based index of the turn in the episode), and
    ``training_messages`` when the training context differs from the
    observation (never for ``iid`` nor for attempt 1 of ``two_turn_feedback``).
    Outcome (of the agent's previous turn), solver: ``loss_weight`` (1.0 for
    the final attempt; ``attempt1_loss_weight``, default 0.0, for an attempt 1
    that is followed by attempt 2), ``attempt``, ``correct``, ``score``,
    ``formatted``, ``attempt_reward`` (the reward the attempt earns if it is
    final), ``task_id``; math also ``extracted_answer``; code also
    ``tests_passed``, ``tests_total``, ``program_status``; the final attempt of
    a two-turn episode also ``first_attempt_correct``, ``num_attempts``,
    ``fixed`` (wrong, then right) and ``broken`` (right, then wrong). Critic:
    ``loss_weight`` 1.0 and, at the end, ``improvement``.

Attempt 1 already correct
    ``on_first_correct="continue"`` (the default): the feedback says the answer
    is correct and attempt 2 still happens, so every two-turn episode has the
    same shape and the trainer also sees attempt 2 keep a right answer rather
    than "fix" it into a wrong one. ``"stop"``: the episode ends; attempt 1 is
    then the final attempt, rewarded and trained on (``loss_weight`` 1.0, its
    context is the plain problem, so the sample is on-policy like ``iid``).

Records
    ``record()`` returns the episode as an :class:`~llm_envs.records.EpisodeRecord`:
    every turn's prompt, text, verdict, ``loss_weight`` and training context.

Arguments:
    See :class:`ExpertIterationConfig`. ``reset(options={"problem": p})`` poses
    ``p`` (a :class:`~llm_envs.tasks.MathProblem` or
    :class:`~llm_envs.tasks.CodeProblem`) instead of drawing one from
    ``problems``; ``options={"strategy": s}`` runs that episode with strategy
    ``s`` (the group helpers of :mod:`llm_envs.expert_iteration.groups` use both).

Version history
    v0: initial release.
"""

from __future__ import annotations

import copy
import importlib
import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, Literal, Self, get_args

from pettingzoo import AECEnv
from pettingzoo.utils.wrappers import OrderEnforcingWrapper

from llm_envs.contract import (
    LOSS_WEIGHT,
    ROUND,
    STOP,
    STRATEGY,
    TRAINING_MESSAGES,
    TURN,
    Message,
    Observation,
)
from llm_envs.expert_iteration.prompts import (
    CRITIC_SYSTEM_PROMPT,
    DEFAULT_AUGMENTATION,
    Problem,
    critic_user_message,
)
from llm_envs.expert_iteration.strategies import (
    FeedbackSource,
    HintMode,
    PromptSettings,
    Strategy,
    TrainingContext,
    TurnContext,
    first_attempt_context,
    problem_messages,
    second_attempt_context,
    validate_augmentation,
)
from llm_envs.expert_iteration.verifier import (
    CodeReward,
    CodeRunner,
    Verdict,
    reference_program,
    verify_code,
    verify_math,
)
from llm_envs.records import EpisodeRecord, TurnRecord
from llm_envs.tasks.arithmetic import ArithmeticTask
from llm_envs.tasks.problems import CodeProblem, MathProblem
from llm_envs.text_env import RENDER_MODES, TextEnvMixin

__all__ = [
    "CRITIC",
    "SOLVER",
    "ExpertIterationConfig",
    "ExpertIterationEnv",
    "OnFirstCorrect",
    "env",
    "raw_env",
]

SOLVER = "solver"
"""The agent that answers the problem."""
CRITIC = "critic"
"""The agent that reviews attempt 1 when ``feedback_source="critic"``."""

OnFirstCorrect = Literal["continue", "stop"]
"""What a correct attempt 1 of ``two_turn_feedback`` leads to (see the module docstring)."""

_KNOWN_OPTIONS = frozenset({"problem", "strategy"})
_STRATEGIES = tuple(s.value for s in Strategy)
_DEFAULT_PROBLEMS = ArithmeticTask(num_problems=1000, seed=0)
_Phase = Literal["attempt1", "critic", "attempt2", "done"]


def _check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


def _as_strategy(value: Any, where: str = "strategy") -> Strategy:
    try:
        return Strategy(value)
    except ValueError:
        raise ValueError(f"{where} must be one of {_STRATEGIES}, got {value!r}") from None


@dataclass(frozen=True)
class ExpertIterationConfig:
    r"""Configuration of the expert-iteration environment; validated at construction.

    Attributes:
        strategy: the default search strategy (``"iid"``, ``"prompt_augmentation"``,
            ``"answer_hint"``, ``"two_turn_feedback"``); ``reset(options=
            {"strategy": ...})`` overrides it per episode.
        problems: math or code problems, one drawn (uniformly, from the reset
            seed) per episode. Default: 1,000 two-operand arithmetic problems
            (:class:`~llm_envs.tasks.ArithmeticTask`, seed 0).
        system_prompt: a system message opening every solver context, or None.
        augmentation: ``prompt_augmentation``'s help: text appended to the
            problem's user message, or chat messages inserted before it (see
            :class:`~llm_envs.expert_iteration.strategies.PromptSettings`).
        hint: what ``answer_hint`` shows: ``"answer"``, ``"solution"`` or
            ``"partial_solution"`` (see
            :data:`~llm_envs.expert_iteration.strategies.HintMode`).
        hint_fraction: share of the solution's lines a ``"partial_solution"`` shows, in (0, 1].
        hint_template: the hint paragraph with a ``{hint}`` placeholder; None: the default.
        feedback_source: ``"verifier"`` (the task's checker writes the feedback)
            or ``"critic"`` (the ``critic`` agent does).
        training_context: attempt 2's training context, ``"problem+attempt1"``
            or ``"problem"``.
        revise_message: the feedback-free user message that ends the feedback
            message and replaces it for training; None: the default, which asks
            to review the answer and restates the answer format.
        attempt1_loss_weight: ``loss_weight`` of an attempt 1 that is followed by
            attempt 2 (seed 003: "only attempt2 contributes to loss").
        on_first_correct: ``"continue"`` or ``"stop"`` (see the module docstring).
        critic_sees_reference: show the critic the reference answer (or program).
        code_reward: ``"fraction"`` of tests passed, or ``"all_or_nothing"``.
        format_reward: added to the final reward when the final attempt is formatted.
        stop: stop strings for sampling (``info["stop"]``).
        code_timeout: seconds a code attempt may run.
        max_failures_shown: failing tests listed in code feedback.
        code_runner: runs code attempts (:class:`~llm_envs.expert_iteration.verifier.CodeRunner`);
            None: :func:`llm_envs.sandbox.run_tests`.
    """

    strategy: Strategy = Strategy.IID
    problems: Sequence[Problem] = field(default=_DEFAULT_PROBLEMS)
    system_prompt: str | None = None
    augmentation: str | tuple[Message, ...] = DEFAULT_AUGMENTATION
    hint: HintMode = "answer"
    hint_fraction: float = 0.5
    hint_template: str | None = None
    feedback_source: FeedbackSource = "verifier"
    training_context: TrainingContext = "problem+attempt1"
    revise_message: str | None = None
    attempt1_loss_weight: float = 0.0
    on_first_correct: OnFirstCorrect = "continue"
    critic_sees_reference: bool = False
    code_reward: CodeReward = "fraction"
    format_reward: float = 0.0
    stop: tuple[str, ...] = ()
    code_timeout: float = 5.0
    max_failures_shown: int = 3
    code_runner: CodeRunner | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "strategy", _as_strategy(self.strategy))
        if isinstance(self.problems, str | MathProblem | CodeProblem):
            raise TypeError(
                "problems must be a sequence of MathProblem or CodeProblem, got one "
                f"{type(self.problems).__name__}: wrap it in a tuple"
            )
        if len(self.problems) == 0:
            raise ValueError("problems must not be empty")
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError(f"system_prompt must be a str or None, got {self.system_prompt!r}")
        augmentation = validate_augmentation(self.augmentation)
        object.__setattr__(self, "augmentation", augmentation)
        if (
            self.system_prompt is not None
            and not isinstance(augmentation, str)
            and any(m["role"] == "system" for m in augmentation)
        ):
            raise ValueError(
                "augmentation has a system message and system_prompt is set: the sampling "
                "context would hold two system messages; put the extra instructions in the "
                "augmentation text or drop one of them"
            )
        _check_choice("hint", self.hint, get_args(HintMode))
        if not (isinstance(self.hint_fraction, int | float) and 0 < self.hint_fraction <= 1):
            raise ValueError(f"hint_fraction must be in (0, 1], got {self.hint_fraction!r}")
        if self.hint_template is not None and "{hint}" not in self.hint_template:
            raise ValueError(
                f"hint_template must contain the placeholder {{hint}}, got {self.hint_template!r}"
            )
        _check_choice("feedback_source", self.feedback_source, get_args(FeedbackSource))
        _check_choice("training_context", self.training_context, get_args(TrainingContext))
        if self.revise_message is not None and (
            not isinstance(self.revise_message, str) or not self.revise_message.strip()
        ):
            raise ValueError(
                "revise_message must be non-empty text or None (the default): attempt 2 needs "
                f"a user message before it in the training context, got {self.revise_message!r}"
            )
        weight = self.attempt1_loss_weight
        if not (isinstance(weight, int | float) and math.isfinite(weight) and weight >= 0):
            raise ValueError(f"attempt1_loss_weight must be a finite number >= 0, got {weight!r}")
        _check_choice("on_first_correct", self.on_first_correct, get_args(OnFirstCorrect))
        _check_choice("code_reward", self.code_reward, get_args(CodeReward))
        if not (isinstance(self.format_reward, int | float) and math.isfinite(self.format_reward)):
            raise ValueError(f"format_reward must be a finite number, got {self.format_reward!r}")
        if isinstance(self.stop, str):
            raise TypeError(
                f"stop must be a sequence of strings, got one str {self.stop!r}: wrap it"
            )
        stop = tuple(self.stop)
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop must hold non-empty strings, got {stop!r}")
        object.__setattr__(self, "stop", stop)
        timeout = self.code_timeout
        if not (isinstance(timeout, int | float) and math.isfinite(timeout) and timeout > 0):
            raise ValueError(f"code_timeout must be a number of seconds > 0, got {timeout!r}")
        if not isinstance(self.max_failures_shown, int) or self.max_failures_shown < 0:
            raise ValueError(
                f"max_failures_shown must be an int >= 0, got {self.max_failures_shown!r}"
            )
        if self.code_runner is not None and not callable(self.code_runner):
            raise TypeError(f"code_runner must be callable, got {self.code_runner!r}")

    @property
    def prompt_settings(self) -> PromptSettings:
        """The slice of this configuration that the context builders read."""
        return PromptSettings(
            system_prompt=self.system_prompt,
            augmentation=self.augmentation,
            hint=self.hint,
            hint_fraction=float(self.hint_fraction),
            hint_template=self.hint_template,
            training_context=self.training_context,
            revise_message=self.revise_message,
        )


@dataclass(frozen=True)
class _Attempt:
    number: int
    text: str
    verdict: Verdict
    context: TurnContext


def _default_code_runner() -> CodeRunner:
    # Imported on first use: math-only users never load the sandbox.
    try:
        runner = importlib.import_module("llm_envs.sandbox").run_tests
    except (ImportError, AttributeError) as exc:
        raise RuntimeError(
            "code problems are scored by llm_envs.sandbox.run_tests, which is not available "
            f"({exc}); pass code_runner=... to the environment"
        ) from exc
    return runner


def _copy_messages(messages: Sequence[Message]) -> list[Message]:
    return [{"role": m["role"], "content": m["content"]} for m in messages]


class ExpertIterationEnv(TextEnvMixin, AECEnv[str, Observation, str]):
    r"""The expert-iteration environment of seed 003; see the module docstring for the contract.

    Args:
        strategy: see :class:`ExpertIterationConfig` (and every other config argument).
        problems: see :class:`ExpertIterationConfig`; defaults to arithmetic.
        system_prompt: see :class:`ExpertIterationConfig`.
        augmentation: see :class:`ExpertIterationConfig`.
        hint: see :class:`ExpertIterationConfig`.
        hint_fraction: see :class:`ExpertIterationConfig`.
        hint_template: see :class:`ExpertIterationConfig`.
        feedback_source: see :class:`ExpertIterationConfig`.
        training_context: see :class:`ExpertIterationConfig`.
        revise_message: see :class:`ExpertIterationConfig`.
        attempt1_loss_weight: see :class:`ExpertIterationConfig`.
        on_first_correct: see :class:`ExpertIterationConfig`.
        critic_sees_reference: see :class:`ExpertIterationConfig`.
        code_reward: see :class:`ExpertIterationConfig`.
        format_reward: see :class:`ExpertIterationConfig`.
        stop: see :class:`ExpertIterationConfig`.
        code_timeout: see :class:`ExpertIterationConfig`.
        max_failures_shown: see :class:`ExpertIterationConfig`.
        code_runner: see :class:`ExpertIterationConfig`.
        render_mode: ``"ansi"`` (``render()`` returns the transcript), ``"human"``
            (prints it), or ``None``.

    Example:
        >>> from llm_envs.tasks import MathProblem
        >>> ei = ExpertIterationEnv(strategy="answer_hint")
        >>> ei.reset(seed=0, options={"problem": MathProblem("demo", "What is 2 + 3?", "5")})
        >>> ei.observe("solver")["messages"][-1]["content"].splitlines()[-1]
        'Hint (for you only: solve the problem yourself and do not mention this hint): the correct final answer is 5.'
        >>> ei.infos["solver"]["training_messages"][-1]["content"].splitlines()[0]
        'What is 2 + 3?'
        >>> ei.step("2 + 3 = \\boxed{5}")
        >>> ei.last()[1:4]
        (1.0, True, False)
    """  # noqa: E501 (a doctest output line cannot be wrapped)

    metadata: dict[str, Any] = {  # noqa: RUF012 (PettingZoo's convention: a class-level dict)
        "name": "expert_iteration_v0",
        "render_modes": list(RENDER_MODES),
        "is_parallelizable": False,
    }

    def __init__(
        self,
        strategy: Strategy | str = Strategy.IID,
        problems: Sequence[Problem] | None = None,
        *,
        system_prompt: str | None = None,
        augmentation: str | Sequence[Message] = DEFAULT_AUGMENTATION,
        hint: HintMode = "answer",
        hint_fraction: float = 0.5,
        hint_template: str | None = None,
        feedback_source: FeedbackSource = "verifier",
        training_context: TrainingContext = "problem+attempt1",
        revise_message: str | None = None,
        attempt1_loss_weight: float = 0.0,
        on_first_correct: OnFirstCorrect = "continue",
        critic_sees_reference: bool = False,
        code_reward: CodeReward = "fraction",
        format_reward: float = 0.0,
        stop: Sequence[str] = (),
        code_timeout: float = 5.0,
        max_failures_shown: int = 3,
        code_runner: CodeRunner | None = None,
        render_mode: str | None = None,
    ) -> None:
        super().__init__()
        self.config = ExpertIterationConfig(
            strategy=strategy,  # type: ignore[arg-type]  # validated into a Strategy
            problems=_DEFAULT_PROBLEMS if problems is None else problems,
            system_prompt=system_prompt,
            augmentation=augmentation,  # type: ignore[arg-type]  # validated into a tuple
            hint=hint,
            hint_fraction=hint_fraction,
            hint_template=hint_template,
            feedback_source=feedback_source,
            training_context=training_context,
            revise_message=revise_message,
            attempt1_loss_weight=attempt1_loss_weight,
            on_first_correct=on_first_correct,
            critic_sees_reference=critic_sees_reference,
            code_reward=code_reward,
            format_reward=format_reward,
            stop=stop,  # type: ignore[arg-type]  # validated into a tuple
            code_timeout=code_timeout,
            max_failures_shown=max_failures_shown,
            code_runner=code_runner,
        )
        self._settings = self.config.prompt_settings
        self.possible_agents = (
            [SOLVER, CRITIC] if self.config.feedback_source == "critic" else [SOLVER]
        )
        self._init_text_env(self.possible_agents, render_mode)
        self._runner: CodeRunner | None = self.config.code_runner
        self.problem: Problem = self.config.problems[0]
        self.strategy: Strategy = self.config.strategy
        self.attempts: list[_Attempt] = []
        self.critic_feedback: str | None = None
        self._phase: _Phase = "done"
        self._schedule: tuple[str, ...] = ()
        self._turn = 0
        self._context: TurnContext = TurnContext([])
        self._outcomes: dict[str, dict[str, Any]] = {}

    # ----------------------------------------------------------------- lifecycle

    def reset(self, seed: int | None = None, options: dict[str, Any] | None = None) -> None:
        """Start an episode: take ``options["problem"]`` or draw one, and pose its first attempt."""
        options = self._begin_reset(seed, options, _KNOWN_OPTIONS)
        if "problem" in options:
            problem = options["problem"]
            if not isinstance(problem, MathProblem | CodeProblem):
                raise TypeError(
                    "options['problem'] must be a MathProblem or CodeProblem, "
                    f"got {type(problem).__name__}"
                )
        else:
            problems = self.config.problems
            problem = problems[int(self.np_random.integers(len(problems)))]
        strategy = self.config.strategy
        if "strategy" in options:
            strategy = _as_strategy(options["strategy"], "options['strategy']")
        if isinstance(problem, CodeProblem) and not problem.tests:
            raise ValueError(
                f"code problem {problem.task_id!r} has no tests, so no attempt can be scored; "
                "give it tests or leave it out"
            )
        self.problem = problem
        self.strategy = strategy
        self._context = first_attempt_context(strategy, problem, self._settings)
        uses_critic = strategy == Strategy.TWO_TURN_FEEDBACK and CRITIC in self.possible_agents
        if strategy != Strategy.TWO_TURN_FEEDBACK:
            self._schedule = (SOLVER,)
        else:
            self._schedule = (SOLVER, CRITIC, SOLVER) if uses_critic else (SOLVER, SOLVER)

        self.agents = [SOLVER, CRITIC] if uses_critic else [SOLVER]
        self.rewards = dict.fromkeys(self.agents, 0.0)
        self._cumulative_rewards = dict.fromkeys(self.agents, 0.0)
        self.terminations = dict.fromkeys(self.agents, False)
        self.truncations = dict.fromkeys(self.agents, False)
        self.attempts = []
        self.critic_feedback = None
        self._phase = "attempt1"
        self._turn = 0
        self._outcomes = {a: {} for a in self.agents}
        self.infos = {a: self._context_info(a) for a in self.agents}
        self.agent_selection = SOLVER

    def step(self, action: str | None) -> None:
        """Score the solver's attempt (or record the critic's feedback) and advance the episode."""
        begun = self._begin_step(action)
        if begun is None:
            return
        agent, text = begun
        self._cumulative_rewards[agent] = 0.0
        self._clear_rewards()
        if agent == SOLVER:
            self._solver_step(text)
        else:
            self._critic_step(text)
        self._turn += 1
        for a in self.agents:
            self.infos[a] = {**self._context_info(a), **self._outcomes[a]}
        self._accumulate_rewards()

    def _verify(self, text: str) -> Verdict:
        problem = self.problem
        if isinstance(problem, MathProblem):
            return verify_math(problem, text)
        if self._runner is None:
            self._runner = _default_code_runner()
        cfg = self.config
        return verify_code(
            problem,
            text,
            self._runner,
            timeout=float(cfg.code_timeout),
            reward_mode=cfg.code_reward,
            max_failures_shown=cfg.max_failures_shown,
        )

    def _solver_step(self, text: str) -> None:
        cfg = self.config
        number = len(self.attempts) + 1
        verdict = self._verify(text)
        self.attempts.append(_Attempt(number, text, verdict, self._context))
        two_turn = self.strategy == Strategy.TWO_TURN_FEEDBACK
        final = not two_turn or number == 2 or (verdict.correct and cfg.on_first_correct == "stop")
        attempt_reward = verdict.score + (cfg.format_reward if verdict.formatted else 0.0)
        outcome: dict[str, Any] = {
            LOSS_WEIGHT: 1.0 if final else float(cfg.attempt1_loss_weight),
            "attempt": number,
            **verdict.info(),
            "attempt_reward": attempt_reward,
            "task_id": self.problem.task_id,
        }
        if not final:
            self._outcomes[SOLVER] = outcome
            if CRITIC in self.agents:
                self._phase = "critic"
                self.agent_selection = CRITIC
            else:
                self._begin_attempt2(verdict.feedback)
            return
        first = self.attempts[0].verdict
        if two_turn:
            outcome.update(
                first_attempt_correct=first.correct,
                num_attempts=number,
                fixed=not first.correct and verdict.correct,
                broken=first.correct and not verdict.correct,
            )
        self._outcomes[SOLVER] = outcome
        self.rewards[SOLVER] = attempt_reward
        if CRITIC in self.agents:
            acted = self.critic_feedback is not None
            improvement = verdict.score - first.score if acted else 0.0
            self.rewards[CRITIC] = improvement
            if acted:
                self._outcomes[CRITIC] = {**self._outcomes[CRITIC], "improvement": improvement}
        self.terminations = dict.fromkeys(self.agents, True)
        self._phase = "done"
        self.agent_selection = SOLVER

    def _critic_step(self, text: str) -> None:
        self.critic_feedback = text
        self._outcomes[CRITIC] = {LOSS_WEIGHT: 1.0}
        self._begin_attempt2(text)

    def _begin_attempt2(self, feedback: str) -> None:
        self._context = second_attempt_context(
            self.problem, self.attempts[0].text, feedback, self._settings
        )
        self._phase = "attempt2"
        self.agent_selection = SOLVER

    @property
    def done(self) -> bool:
        """Whether the episode has ended."""
        return self._phase == "done"

    def fork(self) -> Self:
        """Return an independent copy of this environment, mid-episode included (tree search).

        The configuration (problems, code runner) is shared, not copied: it is
        immutable, and a runner may hold a pool of worker processes.
        """
        return copy.deepcopy(self, {id(self.config): self.config, id(self._runner): self._runner})

    # -------------------------------------------------------------------- infos

    def _context_info(self, agent: str) -> dict[str, Any]:
        upcoming = [i for i in range(self._turn, len(self._schedule)) if self._schedule[i] == agent]
        live = not self.done and upcoming
        turn = upcoming[0] if live else self._turn
        if agent == SOLVER:
            attempts_by_then = self._schedule[: turn + 1].count(SOLVER)
            round_number = attempts_by_then if live else max(len(self.attempts), 1)
        else:
            round_number = 1
        info: dict[str, Any] = {
            STOP: list(self.config.stop),
            STRATEGY: self.strategy.value,
            ROUND: round_number,
            TURN: turn,
        }
        about_to_act = agent == SOLVER and self._phase in ("attempt1", "attempt2")
        if about_to_act and self._context.training is not None:
            info[TRAINING_MESSAGES] = _copy_messages(self._context.training)
        return info

    # -------------------------------------------------------------- observation

    def observe(self, agent: str) -> Observation:
        """The chat ``agent``'s model should continue if it acted now (see the module docstring)."""
        if agent == CRITIC:
            return {"messages": self._critic_messages()}
        if self._phase in ("attempt1", "attempt2"):
            return {"messages": _copy_messages(self._context.observation)}
        if not self.attempts:  # before the first reset
            return {"messages": problem_messages(self.problem, self._settings.system_prompt)}
        last = self.attempts[-1]
        return {
            "messages": [
                *_copy_messages(last.context.observation),
                {"role": "assistant", "content": last.text},
            ]
        }

    def _reference(self) -> str | None:
        if not self.config.critic_sees_reference:
            return None
        if isinstance(self.problem, CodeProblem):
            return reference_program(self.problem)
        return self.problem.answer

    def _critic_prompt(self, attempt: str | None) -> list[Message]:
        return [
            {"role": "system", "content": CRITIC_SYSTEM_PROMPT},
            {
                "role": "user",
                "content": critic_user_message(self.problem, attempt, self._reference()),
            },
        ]

    def _critic_messages(self) -> list[Message]:
        messages = self._critic_prompt(self.attempts[0].text if self.attempts else None)
        if self.critic_feedback is not None:
            messages.append({"role": "assistant", "content": self.critic_feedback})
        return messages

    # ------------------------------------------------------------------ records

    def record(self) -> EpisodeRecord:
        """The episode as a JSON-ready :class:`~llm_envs.records.EpisodeRecord`.

        Each solver turn shows the prompt it was sampled on, its text, the
        verifier's verdict, its ``loss_weight`` and, where the context was
        swapped, the ``training_messages`` it is trained on.
        """
        turns: list[TurnRecord] = []
        for attempt in self.attempts:
            if attempt.number == 2 and self.critic_feedback is not None:
                turns.append(
                    {
                        "agent": CRITIC,
                        "round": 1,
                        "prompt": self._critic_prompt(self.attempts[0].text),
                        "text": self.critic_feedback,
                        "details": {},
                    }
                )
            final = attempt is self.attempts[-1] and self.done
            details: dict[str, Any] = {
                "attempt": attempt.number,
                **attempt.verdict.info(),
                LOSS_WEIGHT: 1.0 if final else float(self.config.attempt1_loss_weight),
                "verifier_feedback": attempt.verdict.feedback,
            }
            if attempt.context.training is not None:
                details[TRAINING_MESSAGES] = _copy_messages(attempt.context.training)
            turns.append(
                {
                    "agent": SOLVER,
                    "round": attempt.number,
                    "prompt": _copy_messages(attempt.context.observation),
                    "text": attempt.text,
                    "details": details,
                }
            )
        summary: dict[str, Any] = {
            "task_id": self.problem.task_id,
            "strategy": self.strategy.value,
            "reference_answer": (
                self.problem.answer if isinstance(self.problem, MathProblem) else None
            ),
            "attempts": len(self.attempts),
            "final_correct": self.attempts[-1].verdict.correct if self.attempts else None,
            "final_score": self.attempts[-1].verdict.score if self.attempts else None,
        }
        if self.strategy == Strategy.TWO_TURN_FEEDBACK and self.attempts:
            summary["first_attempt_correct"] = self.attempts[0].verdict.correct
            summary["feedback_source"] = "critic" if CRITIC in self._schedule else "verifier"
        return {
            "env": self.metadata["name"],
            "title": f"{self.problem.task_id} ({self.strategy.value})",
            "summary": summary,
            "turns": turns,
        }

    # ------------------------------------------------------------------- render

    def transcript(self) -> str:
        """The episode as text: the problem, the strategy, every turn verbatim with its verdict."""
        first = self.attempts[0].context if self.attempts else self._context
        lines = [
            f"Problem {self.problem.task_id} (strategy: {self.strategy.value})",
            *(f"{m['role']}: {m['content']}" for m in first.observation),
        ]
        for attempt in self.attempts:
            if attempt.number == 2:
                lines.append(f"--- feedback ---\n{attempt.context.observation[-1]['content']}")
            v = attempt.verdict
            lines.append(f"--- attempt {attempt.number} ---")
            lines.append(attempt.text)
            lines.append(f"(correct: {v.correct}, score: {v.score:g}, formatted: {v.formatted})")
        if self.done:
            lines.append(f"=== ended after {len(self.attempts)} attempt(s) ===")
        return "\n".join(lines)

    def close(self) -> None:
        """Nothing to release (a code runner's pool belongs to whoever made it)."""


def raw_env(**kwargs: Any) -> ExpertIterationEnv:
    """The bare environment, without order enforcement."""
    return ExpertIterationEnv(**kwargs)


def env(**kwargs: Any) -> AECEnv[str, Observation, str]:
    """The expert-iteration environment with PettingZoo's lifecycle checks.

    Args:
        **kwargs: :class:`ExpertIterationEnv` arguments.
    """
    return OrderEnforcingWrapper(ExpertIterationEnv(**kwargs))
