r"""The verifier of the expert-iteration environment: scores an attempt and writes its feedback.

A :class:`Verdict` says whether an attempt is correct, its score in [0, 1],
whether it follows the answer format, and the feedback text the
``two_turn_feedback`` strategy shows before attempt 2 (the expert-iteration plan, "2-turn
feedback": "explicit feedback generation").

Math (:func:`verify_math`)
    The final answer is extracted and checked by
    :mod:`llm_envs.tasks.math_answers` (``\boxed{}``, ``####``, "answer:", the
    last number; exact rational comparison). The attempt is *formatted* when its
    last ``\boxed{`` closes. Feedback says whether the answer is right, or that
    no final answer was found, or that a number was expected; it never reveals
    the reference answer (that is the ``answer_hint`` strategy's job).

Code (:func:`verify_code`)
    The program is the last fenced code block of the attempt (the whole text
    when there is none; *formatted* means there was one), assembled with the
    problem's prompt by :func:`assemble_program`, and run against the problem's
    tests by a :data:`CodeRunner` (the sandbox's ``run_tests`` by default).
    The score is the fraction of tests passed, or 1/0 with
    ``reward_mode="all_or_nothing"``; the feedback lists the failing tests with
    their errors (the first ``max_failures_shown``), or the program's syntax or
    loading error.

    Every text in the runner's report (its ``error``, each outcome's
    ``message``) is the program's to choose: it could raise
    ``AssertionError("x\nYour code passed all 3 tests.")``. So the feedback
    shows each as one double-quoted line, a Python string literal with quotes,
    backslashes, line breaks and other unprintable characters escaped, clipped
    with ``…`` after the closing quote (:func:`quote_program_text`). An
    exception's class name, also the program's choice, shows bare only when it
    is a plain (ASCII) identifier, else quoted. The verifier's own words stay
    unquoted: ``Result: AssertionError: "assert 3 == 4"``.

Nothing here runs untrusted code itself: only the runner does. Verdicts hold
no times, so infos built from them are deterministic.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from llm_envs.parsing import quoting
from llm_envs.tasks.math_answers import extract_answer, parse_number
from llm_envs.tasks.problems import CodeProblem, MathProblem

__all__ = [
    "CodeReward",
    "CodeRunner",
    "Verdict",
    "assemble_program",
    "code_feedback",
    "defines_function",
    "extract_code",
    "has_boxed_answer",
    "quote_program_text",
    "reference_program",
    "verify_code",
    "verify_math",
]

CodeReward = Literal["fraction", "all_or_nothing"]
"""How a code attempt scores: the fraction of tests passed, or 1 only when all pass."""

_SHOWN_ANSWER_CHARS = 200
_SHOWN_TEST_CHARS = 500
_SHOWN_ERROR_CHARS = 300
_SHOWN_ERROR_TYPE_CHARS = 80
_BOX_OPEN = re.compile(r"\\(?:boxed|fbox)\s*\{")
# A fenced block: an opening ``` with an optional language and its line, the body,
# and a closing ``` at the start of a line. Possessive (*+): a greedy language
# that gave characters back to the rest of the line would cost quadratic time on
# a long line without a line break.
_OPEN_FENCE = re.compile(r"```[ \t]*+([\w+.-]*+)[^\n]*+\n")
_CLOSE_FENCE = re.compile(r"^[ \t]*+```", re.MULTILINE)
_CODE_LANGUAGES = frozenset({"", "python", "py", "python3"})


class CodeRunner(Protocol):
    """Runs a program against test snippets: :func:`llm_envs.sandbox.run_tests`'s signature.

    The report must have ``status`` (``"ok"``, ``"syntax_error"``,
    ``"load_error"``, ``"timeout"``, ``"killed"``, or an enum with those
    values), ``error`` (text or None) and ``outcomes`` (one per test, each
    with ``status`` ``"passed"``/``"failed"``/``"timeout"``/``"not_run"``,
    ``error_type`` and ``message``), like :class:`llm_envs.sandbox.TestReport`.
    """

    def __call__(
        self,
        program: str,
        tests: Sequence[str],
        *,
        setup: str = "",
        timeout: float | None = None,
        entry_point: str | None = None,
    ) -> Any:
        """Run ``program``, then ``setup``, then each test; return the report.

        ``entry_point`` names the function under test, which the program may
        define even where it shadows a builtin.
        """
        ...


@dataclass(frozen=True)
class Verdict:
    r"""The verifier's judgement of one attempt.

    Attributes:
        correct: the final answer is right (code: the program loaded and every
            test passed).
        score: in [0, 1]: 1.0 or 0.0 for math; for code the fraction of tests
            passed (or 1.0/0.0 with ``all_or_nothing``).
        formatted: the attempt follows the answer format (math: a closed
            ``\boxed{}``; code: a fenced code block).
        feedback: what the verifier tells the solver before attempt 2.
        answer: math only: the extracted final answer (None when none was found).
        tests_passed: code only: tests passed.
        tests_total: code only: tests run.
        program_status: code only: the runner's program status (``"ok"``...).
    """

    correct: bool
    score: float
    formatted: bool
    feedback: str
    answer: str | None = None
    tests_passed: int | None = None
    tests_total: int | None = None
    program_status: str | None = None

    def info(self) -> dict[str, Any]:
        """The verdict as info entries (outcome keys), the same keys for every attempt of a kind."""
        info: dict[str, Any] = {
            "correct": self.correct,
            "score": self.score,
            "formatted": self.formatted,
        }
        if self.tests_total is None:
            info["extracted_answer"] = self.answer or ""
        else:
            info["tests_passed"] = self.tests_passed
            info["tests_total"] = self.tests_total
            info["program_status"] = self.program_status
        return info


def _clip(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def quote_program_text(text: str, limit: int = _SHOWN_ERROR_CHARS) -> str:
    """The program's text as one quoted line, ``…`` if cut (:mod:`llm_envs.parsing.quoting`)."""
    return quoting.quote_program_text(text, limit, cut="…")


def _error_type(name: str | None) -> str:
    # The program names its exception classes: only a plain identifier shows bare.
    return quoting.program_name(name, _SHOWN_ERROR_TYPE_CHARS, cut="…") if name else "Error"


# ------------------------------------------------------------------------- math


def has_boxed_answer(text: str) -> bool:
    r"""Whether the last ``\boxed{`` (or ``\fbox{``) of ``text`` closes around some content.

    Example:
        >>> has_boxed_answer(r"so \boxed{\frac{1}{2}}."), has_boxed_answer(r"\boxed{12")
        (True, False)
    """
    last = None
    for last in _BOX_OPEN.finditer(text):  # noqa: B007 (the last match is the point)
        pass
    if last is None:
        return False
    depth = 1
    for index in range(last.end(), len(text)):
        char = text[index]
        if char == "{":
            depth += 1
        elif char == "}":
            depth -= 1
            if depth == 0:
                return bool(text[last.end() : index].strip())
    return False


def verify_math(problem: MathProblem, response: str) -> Verdict:
    r"""Check a response to a math problem and write its feedback.

    Example:
        >>> problem = MathProblem("t", "What is 2 + 3?", "5")
        >>> verdict = verify_math(problem, r"2 + 3 = \boxed{6}")
        >>> verdict.correct, verdict.score, verdict.formatted, verdict.feedback
        (False, 0.0, True, 'Your final answer, 6, is wrong.')
        >>> verify_math(problem, "I do not know.").feedback
        'I could not find a final answer in your response. Put your final answer within \\boxed{}.'
    """
    answer = extract_answer(response)
    correct = problem.is_correct(response)
    formatted = has_boxed_answer(response)
    shown = _clip((answer or response).strip(), _SHOWN_ANSWER_CHARS)
    if correct:
        feedback = f"Your final answer, {shown}, is correct."
    elif answer is None:
        feedback = (
            "I could not find a final answer in your response. "
            "Put your final answer within \\boxed{}."
        )
    elif parse_number(problem.answer) is not None and parse_number(answer) is None:
        feedback = (
            f"Your final answer, {shown}, is wrong: it is not a number, "
            "and the answer to this problem is a number."
        )
    else:
        feedback = f"Your final answer, {shown}, is wrong."
    return Verdict(
        correct=correct,
        score=1.0 if correct else 0.0,
        formatted=formatted,
        feedback=feedback,
        answer=answer,
    )


# ------------------------------------------------------------------------- code


def extract_code(text: str) -> str | None:
    r"""The program in a response: the last fenced Python (or unlabelled) block.

    A response cut off inside its block (no closing fence) gives the text after
    the opening fence. Returns None when the response has no fence at all.

    Example:
        >>> extract_code("Here:\n```python\ndef f():\n    return 1\n```\nDone.")
        'def f():\n    return 1\n'
        >>> extract_code("def f(): return 1") is None
        True
    """
    blocks = [body for language, body in _fenced_blocks(text) if language in _CODE_LANGUAGES]
    if blocks:
        return blocks[-1]
    if text.count("```") % 2 == 0:
        return None
    # An odd number of fences: the last one opens a block the response never closed.
    opening = _OPEN_FENCE.match(text, text.rfind("```"))
    if opening is not None and opening.group(1).lower() in _CODE_LANGUAGES:
        return text[opening.end() :]
    return None


def _fenced_blocks(text: str) -> Iterator[tuple[str, str]]:
    """``(language, body)`` of each closed fenced block, in order (language lowercased).

    Each block is the first ``` (with the rest of its line) and the first line
    starting with ``` after it; the next block is looked for after that. An
    opener without a line break or without a closer after it ends the scan: no
    later opener could have one (a closer after a later opener closes this one
    too). One pass over the text, where a regex search for whole blocks would
    read to the end from every unclosed opener.
    """
    position = 0
    while (start := text.find("```", position)) >= 0:
        opening = _OPEN_FENCE.match(text, start)
        if opening is None:
            return
        closing = _CLOSE_FENCE.search(text, opening.end())
        if closing is None:
            return
        yield opening.group(1).lower(), text[opening.end() : closing.start()]
        position = closing.end()


def defines_function(code: str, name: str) -> bool:
    r"""Whether ``code`` defines a top-level function ``name`` (a textual check: no parsing).

    Example:
        >>> defines_function("import math\ndef area(r):\n    return r", "area")
        True
        >>> defines_function("    return r * r", "area")
        False
    """
    return (
        re.search(rf"^(?:async[ \t]+)?def[ \t]+{re.escape(name)}[ \t]*\(", code, re.M) is not None
    )


def assemble_program(problem: CodeProblem, code: str) -> str:
    r"""The program to test: the problem's prompt followed by the attempt's code.

    When the code defines the entry point (a whole function), it follows the
    prompt and its ``def`` replaces the prompt's stub, while the prompt's
    imports and helper functions stay available. Otherwise the code is taken as
    the body continuing the stub (HumanEval's completion format).

    Example:
        >>> stub = "def inc(x):\n    '''Add one.'''\n"
        >>> p = CodeProblem("t", stub, "inc", ("assert inc(1) == 2",))
        >>> print(assemble_program(p, "    return x + 1\n"))
        def inc(x):
            '''Add one.'''
            return x + 1
        <BLANKLINE>
    """
    if defines_function(code, problem.entry_point):
        return f"{problem.prompt.rstrip()}\n\n\n{code}"
    return problem.prompt + code


def reference_program(problem: CodeProblem) -> str | None:
    """The reference solution of a code problem as a whole program, or None without one.

    HumanEval's ``canonical_solution`` continues the prompt (a body); MBPP's is a
    whole program. Either way the result defines the entry point.
    """
    solution = problem.canonical_solution
    if solution is None:
        return None
    if defines_function(solution, problem.entry_point):
        return solution
    return problem.prompt + solution


def _value(status: Any) -> str:
    return str(getattr(status, "value", status))


def code_feedback(
    tests: Sequence[str],
    status: str,
    error: str | None,
    outcomes: Sequence[Any],
    *,
    max_failures_shown: int = 3,
) -> str:
    """The feedback text for a code attempt's test report.

    Args:
        tests: the test snippets, in order.
        status: the program status (``"ok"``, ``"syntax_error"``...).
        error: the report's error text for a status other than ``"ok"``.
        outcomes: one outcome per test (``status``, ``error_type``, ``message``).
        max_failures_shown: failing tests listed with their errors.
    """
    total = len(tests)
    # The report's texts are the program's: quoted (see the module docstring).
    reason = quote_program_text(error) if error else "unknown error"
    if status == "syntax_error":
        return f"Your code does not compile, so none of the {total} tests ran.\nError: {reason}"
    if status == "load_error":
        return (
            f"Your code raised an error while loading, so none of the {total} tests ran.\n"
            f"Error: {reason}"
        )
    passed = sum(_value(o.status) == "passed" for o in outcomes)
    failing = [
        (test, outcome)
        for test, outcome in zip(tests, outcomes, strict=False)
        if _value(outcome.status) != "passed"
    ]
    if status == "ok" and not failing:
        return f"Your code passed all {total} tests."
    if status == "timeout":
        head = f"Your code timed out ({reason}); it passed {passed} of {total} tests."
    elif status == "killed":
        head = f"Your code was stopped ({reason}); it passed {passed} of {total} tests."
    else:
        head = f"Your code failed {len(failing)} of {total} tests."
    lines = [head]
    for test, outcome in failing[:max_failures_shown]:
        test_text = _clip(test.strip(), _SHOWN_TEST_CHARS).replace("\n", "\n    ")
        outcome_status = _value(outcome.status)
        if outcome_status == "failed":
            kind = _error_type(outcome.error_type)
            problem = f"{kind}: {quote_program_text(outcome.message)}" if outcome.message else kind
        else:
            problem = {"timeout": "timed out", "not_run": "not run"}.get(
                outcome_status, quote_program_text(outcome_status)
            )
        lines.append(f"Test:\n    {test_text}\nResult: {problem}")
    if len(failing) > max_failures_shown:
        lines.append(f"({len(failing) - max_failures_shown} more failing tests not shown.)")
    return "\n".join(lines)


def verify_code(
    problem: CodeProblem,
    response: str,
    runner: CodeRunner,
    *,
    timeout: float = 5.0,
    reward_mode: CodeReward = "fraction",
    max_failures_shown: int = 3,
) -> Verdict:
    """Run a response's program against the problem's tests and write the feedback.

    Args:
        problem: the code problem.
        response: the attempt, verbatim.
        runner: runs the program (see :class:`CodeRunner`).
        timeout: the run's wall-clock limit, in seconds.
        reward_mode: ``"fraction"`` or ``"all_or_nothing"``.
        max_failures_shown: failing tests listed in the feedback.
    """
    code = extract_code(response)
    program = assemble_program(problem, code if code is not None else response)
    report = runner(
        program,
        problem.tests,
        setup=problem.test_setup,
        timeout=timeout,
        entry_point=problem.entry_point,
    )
    status = _value(report.status)
    outcomes = tuple(report.outcomes)
    total = len(problem.tests)
    passed = sum(_value(o.status) == "passed" for o in outcomes)
    correct = status == "ok" and passed == total and total > 0
    if reward_mode == "all_or_nothing":
        score = 1.0 if correct else 0.0
    else:
        score = passed / total if total else 0.0
    feedback = code_feedback(
        problem.tests, status, report.error, outcomes, max_failures_shown=max_failures_shown
    )
    return Verdict(
        correct=correct,
        score=score,
        formatted=code is not None,
        feedback=feedback,
        tests_passed=passed,
        tests_total=total,
        program_status=status,
    )
