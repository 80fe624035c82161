"""The problem records every task source produces.

A :class:`CodeProblem` is what the sandbox checks and the code environments
pose; it is independent of where the data came from (HumanEval, MBPP,
CoopHumanEval, or a user's own list). A :class:`MathProblem` is a question with
an exactly checkable final answer (procedural arithmetic, GSM8K).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from llm_envs.tasks.math_answers import check_answer

__all__ = ["CodeProblem", "MathProblem"]


@dataclass(frozen=True)
class CodeProblem:
    """One code-generation problem with its tests.

    The sandbox runs ``program``, then :attr:`test_setup`, then each element of
    :attr:`tests` in order, so
    ``run_tests(p.prompt + p.canonical_solution, p.tests, setup=p.test_setup)``
    checks the reference solution of ``p``.

    Attributes:
        task_id: the data set's identifier, e.g. ``"HumanEval/0"`` or ``"Mbpp/2"``.
        prompt: the text posed to the model (for HumanEval, the signature and
            docstring the completion continues).
        entry_point: the name of the function the tests call.
        tests: independent test snippets, typically one ``assert`` statement each.
        test_setup: code the tests need, run after the program and before the
            first test (imports, helpers, ``candidate = entry_point``).
        canonical_solution: the data set's reference solution, when it has one.
            For HumanEval it continues :attr:`prompt`; for MBPP it is a whole program.
    """

    task_id: str
    prompt: str
    entry_point: str
    tests: tuple[str, ...]
    test_setup: str = ""
    canonical_solution: str | None = None

    def __post_init__(self) -> None:
        _check_text("task_id", self.task_id, self.task_id)
        _check_text("prompt", self.prompt, self.task_id)
        _check_text("entry_point", self.entry_point, self.task_id)
        if not self.entry_point.isidentifier():
            raise ValueError(
                f"entry_point must be a Python identifier, got {self.entry_point!r} "
                f"(task {self.task_id!r})"
            )
        if isinstance(self.tests, str):
            raise TypeError(
                f"tests must be a sequence of test snippets, got one str (task {self.task_id!r}); "
                "wrap it in a tuple"
            )
        if not isinstance(self.tests, Iterable):
            raise TypeError(
                f"tests must be a sequence of test snippets (str), got {self.tests!r:.80} "
                f"(task {self.task_id!r})"
            )
        tests = tuple(self.tests)
        for position, test in enumerate(tests):
            _check_text(f"tests[{position}]", test, self.task_id)
        object.__setattr__(self, "tests", tests)
        _check_text("test_setup", self.test_setup, self.task_id)
        if self.canonical_solution is not None:
            _check_text("canonical_solution", self.canonical_solution, self.task_id)


@dataclass(frozen=True)
class MathProblem:
    """One math problem with an exactly checkable final answer.

    Attributes:
        task_id: a stable identifier, e.g. ``"Arithmetic/0/17"`` or ``"GSM8K/test/3"``.
        question: the text posed to the model.
        answer: the reference final answer, as text (``"42"``, ``"-7/2"``); checked
            with :func:`llm_envs.tasks.math_answers.check_answer`.
        solution: a worked solution, when the data set has one (GSM8K's reasoning,
            including its ``<<48/2=24>>`` calculator annotations, without ``#### answer``).
    """

    task_id: str
    question: str
    answer: str
    solution: str | None = None

    def __post_init__(self) -> None:
        _check_text("task_id", self.task_id, self.task_id)
        if self.solution is not None:
            _check_text("solution", self.solution, self.task_id)
        if not isinstance(self.question, str) or not self.question.strip():
            raise ValueError(f"question must be non-empty text (task {self.task_id!r})")
        if not isinstance(self.answer, str) or not self.answer.strip():
            raise ValueError(
                f"answer must be non-empty text, got {self.answer!r} (task {self.task_id!r})"
            )

    def is_correct(self, response: str) -> bool:
        """Whether ``response`` (a full response or an extracted answer) gets the answer.

        Uses :func:`llm_envs.tasks.math_answers.check_answer`: numbers compare exactly
        (``1,000`` == ``1000``, ``0.5`` == ``1/2``), other answers as normalized text.
        """
        return check_answer(response, self.answer)


def _check_text(name: str, value: object, task_id: object) -> None:
    if not isinstance(value, str):
        raise TypeError(
            f"{name} must be a str, got {value!r:.80} ({type(value).__name__}) (task {task_id!r})"
        )
