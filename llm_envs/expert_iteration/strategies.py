"""Search strategies of expert iteration: what each turn is sampled on and what it is trained on.

The expert-iteration plan ("Core idea"): every sampled completion is kept verbatim, and only its
context is swapped for training::

    (sampling_context + completion)  ->  (training_context + completion)

This module holds that swap as pure functions from a problem (and the attempts
so far) to a :class:`TurnContext`: the chat the model is sampled on (the
observation) and the chat it is trained on (``info["training_messages"]``,
``None`` when it is the same chat). The environment calls them; tests and
docs can call them directly.

- ``iid``: sampled on the problem, trained on the same chat (no swap).
- ``prompt_augmentation``: sampled on the problem plus extra instructions,
  trained on the problem.
- ``answer_hint``: sampled on the problem plus a hint (the reference answer or
  a worked solution), trained on the problem.
- ``two_turn_feedback``: attempt 1 is sampled and trained on the problem (no
  swap). Attempt 2 is sampled on problem, attempt 1, feedback + revise message;
  it is trained on problem, attempt 1, revise message
  (``training_context="problem+attempt1"``) or on the problem alone
  (``"problem"``).

"problem" is the optional system prompt plus the user message of
:func:`~llm_envs.expert_iteration.prompts.problem_text`; it is the same
in every context, so the only difference between the two contexts is the help.

Why a revise message replaces the feedback (``"problem+attempt1"``)
    Dropping the feedback message outright would leave attempt 1 and attempt 2
    as two assistant messages in a row. Many chat templates reject that
    (strict user/assistant alternation) or silently merge the two, and a model
    would then be trained to *continue* attempt 1 rather than to answer anew.
    So the user message before attempt 2 is "feedback + revise message" while
    sampling and the same revise message alone for training: a neutral,
    feedback-free request to review the answer (the expert-iteration plan, "Multi-turn: decide
    explicitly what to keep in training context"). The training context then
    teaches self-correction without help, and its text differs from the
    sampling context by exactly the feedback.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any, Literal

from llm_envs.contract import Message
from llm_envs.expert_iteration.prompts import (
    DEFAULT_AUGMENTATION,
    Problem,
    default_hint_template,
    default_revise_message,
    feedback_message,
    problem_text,
)
from llm_envs.expert_iteration.verifier import reference_program
from llm_envs.tasks.problems import CodeProblem

__all__ = [
    "FeedbackSource",
    "HintMode",
    "PromptSettings",
    "Strategy",
    "TrainingContext",
    "TurnContext",
    "as_strategy",
    "first_attempt_context",
    "hint_text",
    "problem_messages",
    "second_attempt_context",
    "validate_augmentation",
]


class Strategy(StrEnum):
    """A search strategy: how the sampling context helps the model (the plan's "Search strategies").

    Attributes:
        IID: plain samples; sampling context = training context (ratio 1).
        PROMPT_AUGMENTATION: extra instructions while sampling, none for training.
        ANSWER_HINT: the reference answer (or a worked solution) shown while
            sampling, removed for training.
        TWO_TURN_FEEDBACK: attempt 1, feedback, attempt 2; attempt 2 is trained
            without the feedback.
    """

    IID = "iid"
    PROMPT_AUGMENTATION = "prompt_augmentation"
    ANSWER_HINT = "answer_hint"
    TWO_TURN_FEEDBACK = "two_turn_feedback"


def as_strategy(value: Any, where: str = "strategy") -> Strategy:
    """``value`` as a :class:`Strategy`, or a ValueError that names ``where`` and the choices.

    Example:
        >>> as_strategy("answer_hint")
        <Strategy.ANSWER_HINT: 'answer_hint'>
    """
    try:
        return Strategy(value)
    except ValueError:
        choices = tuple(s.value for s in Strategy)
        raise ValueError(f"{where} must be one of {choices}, got {value!r}") from None


TrainingContext = Literal["problem+attempt1", "problem"]
"""What attempt 2 of ``two_turn_feedback`` is trained on: the feedback dropped
(``"problem+attempt1"``), or the feedback and attempt 1 dropped (``"problem"``:
attempt 2 is trained as a first answer)."""

HintMode = Literal["answer", "solution", "partial_solution"]
"""What ``answer_hint`` shows: the final answer (code: the reference program),
the worked solution, or its first ``hint_fraction`` of lines. Math problems
without a worked solution (arithmetic) fall back to the final answer."""

FeedbackSource = Literal["verifier", "critic"]
"""Who writes the feedback of ``two_turn_feedback``: the task's verifier, or the
``critic`` agent."""


@dataclass(frozen=True)
class PromptSettings:
    """The prompt settings the context builders read: a slice of the env's configuration.

    Each field is the one of the same name in
    :class:`~llm_envs.expert_iteration.config.ExpertIterationConfig`, documented there.
    """

    system_prompt: str | None = None
    augmentation: str | tuple[Message, ...] = DEFAULT_AUGMENTATION
    hint: HintMode = "answer"
    hint_fraction: float = 0.5
    hint_template: str | None = None
    training_context: TrainingContext = "problem+attempt1"
    revise_message: str | None = None


@dataclass(frozen=True)
class TurnContext:
    """The two contexts of one turn.

    Attributes:
        observation: the sampling context, the chat the agent observes.
        training: the training context, or None when it equals the observation.
    """

    observation: list[Message]
    training: list[Message] | None = None

    @property
    def training_messages(self) -> list[Message]:
        """The chat this turn's completion is trained on."""
        return self.observation if self.training is None else self.training


def _context(observation: list[Message], training: list[Message]) -> TurnContext:
    return TurnContext(observation, None if training == observation else training)


def problem_messages(problem: Problem, system_prompt: str | None = None) -> list[Message]:
    """The plain prompt of a problem: the optional system message, then the problem.

    Example:
        >>> from llm_envs.tasks import MathProblem
        >>> [m["role"] for m in problem_messages(MathProblem("t", "1 + 1?", "2"), "Be brief.")]
        ['system', 'user']
    """
    messages: list[Message] = []
    if system_prompt is not None:
        messages.append({"role": "system", "content": system_prompt})
    messages.append({"role": "user", "content": problem_text(problem)})
    return messages


def hint_text(problem: Problem, mode: HintMode, fraction: float = 0.5) -> tuple[str, str]:
    r"""The hint of ``answer_hint`` for ``problem``, and its kind (``"answer"`` or ``"solution"``).

    Raises:
        ValueError: a code problem without a reference solution.

    Example:
        >>> from llm_envs.tasks import MathProblem
        >>> hint_text(MathProblem("t", "Q?", "12", "3 * 4 = 12\nSo 12."), "partial_solution")
        ('3 * 4 = 12', 'solution')
        >>> hint_text(MathProblem("t", "Q?", "12"), "solution")  # no solution: the answer
        ('12', 'answer')
    """
    if isinstance(problem, CodeProblem):
        program = reference_program(problem)
        if program is None:
            raise ValueError(
                f"answer_hint needs a reference solution, but code problem {problem.task_id!r} "
                "has no canonical_solution; use another strategy for it or give it one"
            )
        text, kind = program, "answer"
    elif mode == "answer" or not problem.solution:
        return problem.answer, "answer"
    else:
        text, kind = problem.solution, "solution"
    if mode == "partial_solution":
        lines = text.rstrip("\n").splitlines()
        keep = max(1, math.ceil(fraction * len(lines)))
        return "\n".join(lines[:keep]), "solution"
    return text.rstrip("\n"), kind


def _with_user_suffix(messages: list[Message], suffix: str) -> list[Message]:
    last = messages[-1]
    return [*messages[:-1], {"role": last["role"], "content": f"{last['content']}\n\n{suffix}"}]


def first_attempt_context(
    strategy: Strategy, problem: Problem, settings: PromptSettings
) -> TurnContext:
    """The contexts of the first (for single-turn strategies, the only) attempt.

    Example:
        >>> from llm_envs.tasks import MathProblem
        >>> ctx = first_attempt_context(
        ...     Strategy.PROMPT_AUGMENTATION, MathProblem("t", "1 + 1?", "2"),
        ...     PromptSettings(augmentation="Think step by step."))
        >>> ctx.observation[-1]["content"].endswith("Think step by step.")
        True
        >>> "step by step" in ctx.training_messages[-1]["content"]
        False
    """
    plain = problem_messages(problem, settings.system_prompt)
    if strategy == Strategy.PROMPT_AUGMENTATION:
        augmentation = settings.augmentation
        if isinstance(augmentation, str):
            return _context(_with_user_suffix(plain, augmentation), plain)
        # Prefix messages go after the system prompt, right before the problem.
        head, problem_message = plain[:-1], plain[-1]
        return _context([*head, *augmentation, problem_message], plain)
    if strategy == Strategy.ANSWER_HINT:
        hint, kind = hint_text(problem, settings.hint, settings.hint_fraction)
        template = settings.hint_template or default_hint_template(problem, kind)
        # str.replace, not str.format: templates and hints hold LaTeX and code braces.
        return _context(_with_user_suffix(plain, template.replace("{hint}", hint)), plain)
    return TurnContext(plain)


def second_attempt_context(
    problem: Problem,
    attempt1: str,
    feedback: str,
    settings: PromptSettings,
) -> TurnContext:
    """The contexts of attempt 2 of ``two_turn_feedback`` (the expert-iteration plan, "2-turn feedback").

    Sampling: problem, attempt 1 (verbatim), feedback + revise message.
    Training: ``"problem+attempt1"`` replaces the feedback message by the
    revise message alone (see the module docstring for why); ``"problem"``
    keeps only the problem.

    Example:
        >>> from llm_envs.tasks import MathProblem
        >>> ctx = second_attempt_context(
        ...     MathProblem("t", "1 + 1?", "2"), "3", "Your final answer, 3, is wrong.",
        ...     PromptSettings(revise_message="Try again."))
        >>> [m["role"] for m in ctx.observation], ctx.observation[-1]["content"].splitlines()
        (['user', 'assistant', 'user'], ['Feedback on your answer:', 'Your final answer, 3, is wrong.', '', 'Try again.'])
        >>> ctx.training_messages[1:]
        [{'role': 'assistant', 'content': '3'}, {'role': 'user', 'content': 'Try again.'}]
    """  # noqa: E501 (doctest output lines cannot be wrapped)
    plain = problem_messages(problem, settings.system_prompt)
    revise = settings.revise_message or default_revise_message(problem)
    attempt: Message = {"role": "assistant", "content": attempt1}
    feedback_turn: Message = {"role": "user", "content": feedback_message(feedback, revise)}
    observation = [*plain, attempt, feedback_turn]
    if settings.training_context == "problem":
        return _context(observation, plain)
    revise_turn: Message = {"role": "user", "content": revise}
    return _context(observation, [*plain, attempt, revise_turn])


def validate_augmentation(augmentation: str | Sequence[Message]) -> str | tuple[Message, ...]:
    """Check ``prompt_augmentation``'s help and return it in its stored form.

    Raises:
        ValueError: empty text, or messages that are not ``{"role", "content"}``
            chat messages ending before the problem with a ``user`` turn open.
    """
    if isinstance(augmentation, str):
        if not augmentation.strip():
            raise ValueError("augmentation must be non-empty text or a sequence of messages")
        return augmentation
    messages = tuple(augmentation)
    if not messages:
        raise ValueError("augmentation must not be an empty sequence of messages")
    for i, m in enumerate(messages):
        if not isinstance(m, dict) or set(m) != {"role", "content"}:
            raise ValueError(
                f"augmentation[{i}] must be a {{'role': ..., 'content': ...}} message, got {m!r}"
            )
        if m["role"] not in ("system", "user", "assistant") or not isinstance(m["content"], str):
            raise ValueError(
                f"augmentation[{i}] needs role system/user/assistant and str content, got {m!r}"
            )
    if messages[-1]["role"] == "user":
        # The problem's user message follows: two user messages in a row break templates.
        raise ValueError(
            "augmentation messages must not end with a user message (the problem's user "
            "message follows); end with an assistant message or use a str augmentation"
        )
    return messages
