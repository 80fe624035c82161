r"""Scripted solvers and critics for the expert-iteration environment: no model, deterministic.

Each agent is a :class:`~llm_envs.family.Agent` (``agent(observation, info)
-> str``) that reads only the chat a model would get. They exist to drive the
environment end to end in tests, demos and benchmarks:

* :class:`ScriptedMathSolver` answers (by default) wrong first, then right once
  the feedback says its answer is wrong, and keeps its answer otherwise.
* :class:`ScriptedCodeSolver` writes a buggy program first and the fixed one
  once the feedback reports failing tests.
* :class:`ScriptedCritic` reviews a math attempt from the critic's prompt and
  says whether it is right, without giving the answer away.

"Negative feedback" is recognized by words the environment's verifier uses
(*wrong*, *failed*, *error*, *could not*, ...; see :func:`is_negative_feedback`).
Math answers are computed by :func:`evaluate_arithmetic` (the questions of
:class:`~llm_envs.tasks.ArithmeticTask`) unless a ``solve`` function is given.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Callable, Mapping
from fractions import Fraction
from typing import Any, Literal

from llm_envs.contract import Message, Observation
from llm_envs.tasks.math_answers import check_answer, format_number, parse_number

__all__ = [
    "ScriptedCodeSolver",
    "ScriptedCritic",
    "ScriptedMathSolver",
    "evaluate_arithmetic",
    "is_negative_feedback",
]

_NEGATIVE = re.compile(
    r"\b(?:wrong|incorrect|not correct|fail(?:s|ed|ing|ure)?|errors?|could not|"
    r"does not|timed out|stopped)\b",
    re.IGNORECASE,
)
_MAX_EXPRESSION_CHARS = 2000
_SECTION = re.compile(r"^(Problem|Reference answer|Proposed answer):\n", re.MULTILINE)


def evaluate_arithmetic(question: str) -> Fraction | None:
    """The exact value of the expression in ``"What is <expr>?"``, or None.

    Only integer literals, ``+ - * /``, unary minus and parentheses are
    evaluated (through :mod:`ast`, never ``eval``); anything else, or a
    division by zero, gives None.

    Example:
        >>> evaluate_arithmetic("What is 17 + 4 * (9 - 3)?")
        Fraction(41, 1)
        >>> evaluate_arithmetic("What is 1 / (2 - 2)?") is None
        True
    """
    expression = _asked_expression(question)
    if expression is None or len(expression) > _MAX_EXPRESSION_CHARS:
        return None
    try:
        tree = ast.parse(expression, mode="eval")
        return _evaluate(tree.body)
    except (SyntaxError, ValueError, ZeroDivisionError, RecursionError):
        return None


def _asked_expression(text: str) -> str | None:
    """What the first ``What is ...?`` of ``text`` asks: the shortest text to a ``?`` on its line.

    A critic reads this from a prompt that quotes another agent's answer. A
    regex search for the phrase, some text and a ``?`` would read to the end of
    the line from each ``What is`` when no ``?`` follows (quadratic on the phrase
    repeated); when one fails, every later one on its line fails too, so the
    scan goes on at the next line.
    """
    phrase = "What is "
    position = 0
    while (start := text.find(phrase, position)) >= 0:
        start += len(phrase)
        line_end = text.find("\n", start)
        line_end = len(text) if line_end < 0 else line_end
        question_mark = text.find("?", start + 1, line_end)
        if start < line_end and question_mark >= 0:
            return text[start:question_mark]
        position = line_end + 1
    return None


def _evaluate(node: ast.expr) -> Fraction:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return Fraction(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub | ast.UAdd):
        value = _evaluate(node.operand)
        return -value if isinstance(node.op, ast.USub) else value
    if isinstance(node, ast.BinOp):
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Add):
            return left + right
        if isinstance(node.op, ast.Sub):
            return left - right
        if isinstance(node.op, ast.Mult):
            return left * right
        if isinstance(node.op, ast.Div):
            return left / right
    raise ValueError(f"not plain arithmetic: {ast.dump(node)[:80]}")


def is_negative_feedback(text: str) -> bool:
    """Whether feedback text says the attempt is wrong (the words the verifier uses).

    Example:
        >>> is_negative_feedback("Your final answer, 6, is wrong.")
        True
        >>> is_negative_feedback("Your code passed all 3 tests.")
        False
    """
    return _NEGATIVE.search(text) is not None


def _first_user(messages: list[Message]) -> str:
    return next((m["content"] for m in messages if m["role"] == "user"), "")


def _last_own_answer(messages: list[Message]) -> str | None:
    return next((m["content"] for m in reversed(messages) if m["role"] == "assistant"), None)


def _feedback_turn(messages: list[Message]) -> str | None:
    # The user message after the agent's last answer, if the chat ends with one.
    if (
        len(messages) >= 2
        and messages[-1]["role"] == "user"
        and messages[-2]["role"] == "assistant"
    ):
        return messages[-1]["content"]
    return None


class _RevisingAgent:
    """Answers first; after negative feedback gives the fixed answer; else repeats itself."""

    fix_after_feedback: bool

    def first_answer(self, problem: str) -> str:
        raise NotImplementedError

    def fixed_answer(self, problem: str) -> str:
        raise NotImplementedError

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Answer the problem, or revise after feedback."""
        messages = observation["messages"]
        problem = _first_user(messages)
        previous = _last_own_answer(messages)
        if previous is None:
            return self.first_answer(problem)
        feedback = _feedback_turn(messages)
        if self.fix_after_feedback and feedback is not None and is_negative_feedback(feedback):
            return self.fixed_answer(problem)
        return previous


class ScriptedMathSolver(_RevisingAgent):
    r"""A math solver that (by default) answers wrong first and fixes its answer after feedback.

    Args:
        solve: problem text -> the correct final answer; defaults to
            :func:`evaluate_arithmetic` (arithmetic questions). When it returns
            None the agent answers "I do not know." on every turn.
        first_attempt: ``"wrong"`` (the correct answer plus one; ``not X`` for a
            non-numeric answer ``X``) or ``"right"``.
        fix_after_feedback: after feedback that says its answer is wrong,
            answer right; otherwise keep the previous answer.

    Example:
        >>> solver = ScriptedMathSolver()
        >>> chat = [{"role": "user", "content": "What is 2 + 3?"}]
        >>> solver({"messages": chat}, {})
        'I think 2 + 3 = \\boxed{6}.'
        >>> chat += [{"role": "assistant", "content": "I think 2 + 3 = \\boxed{6}."},
        ...          {"role": "user", "content": "Your final answer, 6, is wrong."}]
        >>> solver({"messages": chat}, {})
        'Let me recompute: 2 + 3 = \\boxed{5}.'
    """

    def __init__(
        self,
        solve: Callable[[str], str | Fraction | None] | None = None,
        *,
        first_attempt: Literal["wrong", "right"] = "wrong",
        fix_after_feedback: bool = True,
    ) -> None:
        if first_attempt not in ("wrong", "right"):
            raise ValueError(f"first_attempt must be 'wrong' or 'right', got {first_attempt!r}")
        self.solve = solve or evaluate_arithmetic
        self.first_attempt = first_attempt
        self.fix_after_feedback = fix_after_feedback

    def _answer(self, problem: str) -> tuple[str, str] | None:
        value = self.solve(problem)
        if value is None:
            return None
        expression = _asked_expression(problem) or "the result"
        number = value if isinstance(value, Fraction) else parse_number(value)
        if number is not None:
            right, wrong = format_number(number), format_number(number + 1)
        else:  # a non-numeric answer: any other text is wrong
            right, wrong = str(value), f"not {value}"
        return f"{expression} = \\boxed{{{right}}}", f"{expression} = \\boxed{{{wrong}}}"

    def first_answer(self, problem: str) -> str:
        """The first attempt: wrong or right by ``first_attempt``."""
        answers = self._answer(problem)
        if answers is None:
            return "I do not know."
        right, wrong = answers
        return f"I think {wrong if self.first_attempt == 'wrong' else right}."

    def fixed_answer(self, problem: str) -> str:
        """The corrected answer."""
        answers = self._answer(problem)
        return "I do not know." if answers is None else f"Let me recompute: {answers[0]}."


class ScriptedCodeSolver(_RevisingAgent):
    r"""A code solver that writes ``buggy`` first and ``fixed`` after failing-test feedback.

    Args:
        buggy: the first program (a whole function, or a body continuing the stub).
        fixed: the program it writes after negative feedback.
        fix_after_feedback: whether it fixes at all.

    Example:
        >>> solver = ScriptedCodeSolver("def f():\n    return 0\n", "def f():\n    return 1\n")
        >>> print(solver({"messages": [{"role": "user", "content": "Write f."}]}, {}))
        ```python
        def f():
            return 0
        ```
    """

    def __init__(self, buggy: str, fixed: str, *, fix_after_feedback: bool = True) -> None:
        self.buggy = buggy
        self.fixed = fixed
        self.fix_after_feedback = fix_after_feedback

    @staticmethod
    def _fenced(code: str) -> str:
        return f"```python\n{code.rstrip()}\n```"

    def first_answer(self, problem: str) -> str:
        """The buggy program, in a fenced block."""
        return self._fenced(self.buggy)

    def fixed_answer(self, problem: str) -> str:
        """The fixed program, in a fenced block."""
        return self._fenced(self.fixed)


class ScriptedCritic:
    r"""A critic for math attempts: says whether the proposed answer is right, never what it is.

    It reads the critic prompt of the expert-iteration environment (``Problem:``,
    optionally ``Reference answer:``, ``Proposed answer:`` sections) and judges
    the proposed answer against the reference when shown, else against
    ``solve(problem)``.

    Args:
        solve: problem text -> the correct final answer (default:
            :func:`evaluate_arithmetic`).

    Example:
        >>> critic = ScriptedCritic()
        >>> prompt = "Problem:\nWhat is 2 + 3?\n\nProposed answer:\n\\boxed{6}\n\nWrite..."
        >>> critic({"messages": [{"role": "user", "content": prompt}]}, {})
        'The proposed final answer is wrong: recompute it step by step.'
    """

    def __init__(self, solve: Callable[[str], str | Fraction | None] | None = None) -> None:
        self.solve = solve or evaluate_arithmetic

    @staticmethod
    def sections(text: str) -> dict[str, str]:
        """The ``Problem``, ``Reference answer`` and ``Proposed answer`` sections of a prompt."""
        found: dict[str, str] = {}
        matches = list(_SECTION.finditer(text))
        for i, match in enumerate(matches):
            end = matches[i + 1].start() if i + 1 < len(matches) else len(text)
            found[match.group(1)] = text[match.end() : end].strip()
        proposed = found.get("Proposed answer")
        if proposed is not None:
            # The environment's closing instruction follows the attempt.
            found["Proposed answer"] = proposed.removesuffix(
                "Write your feedback on the proposed answer."
            ).strip()
        return found

    def __call__(self, observation: Observation, info: Mapping[str, Any]) -> str:
        """Judge the proposed answer."""
        parts = self.sections(_first_user(observation["messages"]))
        attempt = parts.get("Proposed answer", "")
        reference: str | Fraction | None = parts.get("Reference answer")
        if reference is None:
            reference = self.solve(parts.get("Problem", ""))
        if reference is None:
            return "I cannot tell whether the proposed answer is right."
        if isinstance(reference, Fraction):
            reference = format_number(reference)
        if check_answer(attempt, reference):
            return "The proposed final answer is correct."
        return "The proposed final answer is wrong: recompute it step by step."
