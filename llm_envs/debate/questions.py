"""Debate questions, optionally with a reference answer and a checker.

A reference answer never enters the reward: the debate reward comes only from
peer votes (the debate recipe). When a question has one, the environment scores each
agent's solution against it as a *metric*, so users can see whether debating
makes agents more accurate.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

__all__ = ["DEFAULT_QUESTIONS", "AnswerChecker", "DebateQuestion", "as_question"]

AnswerChecker = Callable[[str, str], bool]
"""``checker(solution_text, reference_answer) -> bool``."""


def _default_checker(solution: str, reference: str) -> bool:
    # Imported lazily: the math answer rules live with the task sources.
    from llm_envs.tasks.math_answers import check_answer

    return check_answer(solution, reference)


@dataclass(frozen=True)
class DebateQuestion:
    r"""A question to debate.

    Attributes:
        text: the question, shown verbatim to every agent.
        answer: a reference answer, or ``None``. Used only for metrics.
        checker: ``checker(solution, answer) -> bool``. Defaults to the math
            answer rules of :func:`llm_envs.tasks.math_answers.check_answer`
            (``\\boxed{}``, "answer:", last number), which suit numeric answers.
    """

    text: str
    answer: str | None = None
    checker: AnswerChecker | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.text, str) or not self.text.strip():
            raise ValueError(f"a debate question needs non-empty text, got {self.text!r}")
        if self.answer is not None and not isinstance(self.answer, str):
            raise TypeError(
                f"answer must be text or None, got {self.answer!r} "
                f"({type(self.answer).__name__}); pass answer={str(self.answer)!r}"
            )
        if self.checker is not None and not callable(self.checker):
            raise TypeError(
                f"checker must be a function (solution, answer) -> bool or None, "
                f"got {self.checker!r:.80}"
            )

    def is_correct(self, solution: str) -> bool | None:
        """Score ``solution`` against the reference answer (``None`` without one)."""
        if self.answer is None:
            return None
        checker = self.checker or _default_checker
        return bool(checker(solution, self.answer))


def as_question(question: str | DebateQuestion) -> DebateQuestion:
    """Accept a plain string or a :class:`DebateQuestion`; raise a clear error otherwise."""
    if isinstance(question, DebateQuestion):
        return question
    if isinstance(question, str):
        return DebateQuestion(question)
    raise TypeError(
        f"a debate question must be a str or a DebateQuestion, got {type(question).__name__}"
    )


DEFAULT_QUESTIONS: tuple[DebateQuestion, ...] = (
    DebateQuestion("What is 17 * 23?", answer="391"),
    DebateQuestion(
        "A bat and a ball cost $1.10 in total. The bat costs $1.00 more than the ball. "
        "How many cents does the ball cost?",
        answer="5",
    ),
    DebateQuestion(
        "How many positive divisors does 360 have?",
        answer="24",
    ),
    DebateQuestion(
        "If 5 machines make 5 widgets in 5 minutes, how many minutes do 100 machines "
        "need to make 100 widgets?",
        answer="5",
    ),
    DebateQuestion("What is the sum of the first 20 odd numbers?", answer="400"),
    DebateQuestion(
        "Is it better to learn a second language as a child or as an adult? Argue for one."
    ),
)
"""Questions used when an environment is built without ``questions``."""
