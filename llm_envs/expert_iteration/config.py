"""The configuration of the expert-iteration environment: every setting, validated at construction.

:class:`ExpertIterationConfig` is what ``ExpertIterationEnv(config)`` takes;
its fields are also the environment's keyword arguments
(``ExpertIterationEnv(strategy="answer_hint")``).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, fields
from typing import Any, Literal, get_args

from llm_envs.arguments import (
    check_bool,
    check_int,
    check_number,
    check_timeout,
    describe,
)
from llm_envs.contract import Message
from llm_envs.expert_iteration.prompts import DEFAULT_AUGMENTATION, Problem
from llm_envs.expert_iteration.strategies import (
    FeedbackSource,
    HintMode,
    PromptSettings,
    Strategy,
    TrainingContext,
    as_strategy,
    validate_augmentation,
)
from llm_envs.expert_iteration.verifier import CodeReward, CodeRunner
from llm_envs.tasks.arithmetic import ArithmeticTask
from llm_envs.tasks.problems import CodeProblem, MathProblem

__all__ = ["ExpertIterationConfig", "OnFirstCorrect"]

OnFirstCorrect = Literal["continue", "stop"]
"""What a correct attempt 1 of ``two_turn_feedback`` leads to (see
:mod:`llm_envs.expert_iteration.env`)."""

_DEFAULT_PROBLEMS = ArithmeticTask(num_problems=1000, seed=0)


def _check_problems(problems: object) -> None:
    """Refuse what is not a non-empty sequence of problem records, naming the fix."""
    fix = "pass a list of MathProblem or CodeProblem, e.g. problems=[MathProblem(...)]"
    if isinstance(problems, MathProblem | CodeProblem):
        raise TypeError(
            f"problems must be a sequence of MathProblem or CodeProblem, got one "
            f"{type(problems).__name__} ({problems.task_id!r}): wrap it in a list, "
            "problems=[problem]"
        )
    if isinstance(problems, str) or not isinstance(problems, Sequence):
        raise TypeError(
            f"problems must be a sequence of MathProblem or CodeProblem, got one "
            f"{type(problems).__name__} {describe(problems)}; {fix}"
        )
    if len(problems) == 0:
        raise ValueError("problems must not be empty")
    # Every record of a list; only the first of a lazy sequence (an ArithmeticTask of a
    # million problems builds each on demand, and builds them right).
    for position, problem in enumerate(
        problems if isinstance(problems, list | tuple) else [problems[0]]
    ):
        if not isinstance(problem, MathProblem | CodeProblem):
            raise TypeError(
                f"problems must hold MathProblem or CodeProblem records, but problems[{position}] "
                f"is {describe(problem)} ({type(problem).__name__}); {fix}"
            )
        if isinstance(problem, CodeProblem) and not problem.tests:
            raise ValueError(
                f"problems[{position}] (code problem {problem.task_id!r}) has no tests, so no "
                "attempt can be scored; give it tests or leave it out"
            )


def _check_choice(name: str, value: Any, choices: tuple[Any, ...]) -> None:
    if value not in choices:
        raise ValueError(f"{name} must be one of {choices}, got {value!r}")


@dataclass(frozen=True)
class ExpertIterationConfig:
    r"""Configuration of the expert-iteration environment; validated at construction.

    Attributes:
        strategy: the default search strategy (``"iid"``, ``"prompt_augmentation"``,
            ``"answer_hint"``, ``"two_turn_feedback"``); ``reset(options=
            {"strategy": ...})`` overrides it per episode.
        problems: math or code problems, one drawn (uniformly, from the reset
            seed) per episode. Default (or None): 1,000 two-operand arithmetic
            problems (:class:`~llm_envs.tasks.ArithmeticTask`, seed 0).
        system_prompt: a system message opening every solver context, or None.
        augmentation: ``prompt_augmentation``'s help: a str is appended to the
            problem's user message (after a blank line); a sequence of messages
            (a system message, few-shot exchanges: the expert-iteration plan's
            ``sampling_convo_prefix``) is inserted before it.
        hint: what ``answer_hint`` shows: ``"answer"``, ``"solution"`` or
            ``"partial_solution"`` (see
            :data:`~llm_envs.expert_iteration.strategies.HintMode`).
        hint_fraction: share of the solution's lines a ``"partial_solution"`` shows, in (0, 1].
        hint_template: the hint paragraph with a ``{hint}`` placeholder; None uses
            :func:`~llm_envs.expert_iteration.prompts.default_hint_template`.
        feedback_source: ``"verifier"`` (the task's checker writes the feedback)
            or ``"critic"`` (the ``critic`` agent does).
        training_context: attempt 2's training context, ``"problem+attempt1"``
            or ``"problem"``.
        revise_message: the feedback-free user message that ends the feedback
            message and replaces it for training; None: the default, which asks
            to review the answer and restates the answer format.
        attempt1_loss_weight: ``loss_weight`` of an attempt 1 that is followed by
            attempt 2 (the expert-iteration plan: "only attempt2 contributes to loss").
        on_first_correct: ``"continue"`` or ``"stop"`` (see :mod:`llm_envs.expert_iteration.env`).
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
        object.__setattr__(self, "strategy", as_strategy(self.strategy))
        if self.problems is None:
            object.__setattr__(self, "problems", _DEFAULT_PROBLEMS)
        _check_problems(self.problems)
        if self.system_prompt is not None and not isinstance(self.system_prompt, str):
            raise TypeError(f"system_prompt must be a str or None, got {self.system_prompt!r}")
        if not isinstance(self.augmentation, str | Sequence):
            raise TypeError(
                "augmentation must be text or a sequence of chat messages, got "
                f"{describe(self.augmentation)}"
            )
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
        check_number("hint_fraction", self.hint_fraction, minimum=0, maximum=1, open_minimum=True)
        if self.hint_template is not None and not isinstance(self.hint_template, str):
            raise TypeError(
                f"hint_template must be text with a {{hint}} placeholder or None, "
                f"got {describe(self.hint_template)}"
            )
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
        check_number("attempt1_loss_weight", self.attempt1_loss_weight, minimum=0)
        _check_choice("on_first_correct", self.on_first_correct, get_args(OnFirstCorrect))
        check_bool("critic_sees_reference", self.critic_sees_reference)
        _check_choice("code_reward", self.code_reward, get_args(CodeReward))
        check_number("format_reward", self.format_reward)
        if isinstance(self.stop, str):
            raise TypeError(
                f"stop must be a sequence of strings, got one str {self.stop!r}: wrap it"
            )
        stop = tuple(self.stop)
        if not all(isinstance(s, str) and s for s in stop):
            raise ValueError(f"stop must hold non-empty strings, got {stop!r}")
        object.__setattr__(self, "stop", stop)
        check_timeout("code_timeout", self.code_timeout)
        check_int("max_failures_shown", self.max_failures_shown, minimum=0)
        if self.code_runner is not None and not callable(self.code_runner):
            raise TypeError(f"code_runner must be callable, got {self.code_runner!r}")

    @property
    def prompt_settings(self) -> PromptSettings:
        """The slice of this configuration that the context builders read."""
        named = {f.name: getattr(self, f.name) for f in fields(PromptSettings)}
        return PromptSettings(**{**named, "hint_fraction": float(self.hint_fraction)})
