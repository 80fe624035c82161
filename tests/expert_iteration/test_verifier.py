"""The verifier: math verdicts and feedback, code extraction, program assembly, code feedback.

Answer extraction itself is specified in tests/tasks/test_math_answers.py; here
only what the verifier adds on top of it.
"""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.expert_iteration.verifier import (
    assemble_program,
    code_feedback,
    extract_code,
    has_boxed_answer,
    reference_program,
    verify_code,
    verify_math,
)
from llm_envs.tasks import CodeProblem, MathProblem

PROBLEM = MathProblem("t", "What is 17 + 4?", "21")


@pytest.mark.parametrize(
    ("response", "correct", "formatted", "answer", "feedback"),
    [
        ("\\boxed{21}", True, True, "21", "Your final answer, 21, is correct."),
        ("So 21.", True, False, "21", "Your final answer, 21, is correct."),
        ("\\boxed{22}", False, True, "22", "Your final answer, 22, is wrong."),
        ("\\boxed{21", True, False, "21", "Your final answer, 21, is correct."),
        (
            "The answer is blue.",
            False,
            False,
            "blue",
            "Your final answer, blue, is wrong: it is not a number, "
            "and the answer to this problem is a number.",
        ),
        (
            "",
            False,
            False,
            None,
            "I could not find a final answer in your response. "
            "Put your final answer within \\boxed{}.",
        ),
    ],
)
def test_verify_math(response, correct, formatted, answer, feedback):
    verdict = verify_math(PROBLEM, response)
    assert (verdict.correct, verdict.formatted, verdict.answer) == (correct, formatted, answer)
    assert verdict.score == (1.0 if correct else 0.0)
    assert verdict.feedback == feedback
    assert "21" not in feedback or correct  # the feedback never gives the answer away
    assert verdict.info() == {
        "correct": correct,
        "score": verdict.score,
        "formatted": formatted,
        "extracted_answer": answer or "",
    }


def test_math_feedback_clips_long_answers():
    verdict = verify_math(PROBLEM, "The answer is " + "x" * 1000)
    assert len(verdict.feedback) < 300


@pytest.mark.parametrize(
    ("text", "boxed"),
    [
        ("\\boxed{1}", True),
        ("\\boxed{}", False),
        ("\\boxed{\\frac{1}{2}}", True),
        ("\\boxed{1} then \\boxed{2", False),  # the last box is what counts
        ("\\fbox{x}", True),
        ("boxed{1}", False),
    ],
)
def test_has_boxed_answer(text, boxed):
    assert has_boxed_answer(text) is boxed


@pytest.mark.parametrize(
    ("text", "code"),
    [
        ("```python\nx = 1\n```", "x = 1\n"),
        ("```py\nx = 1\n```", "x = 1\n"),
        ("```\nx = 1\n```", "x = 1\n"),
        ("a\n```python\nx = 1\n```\nb\n```python\nx = 2\n```\nc", "x = 2\n"),  # the last block
        ("```python\nx = 1\n```\n```text\nnot code\n```", "x = 1\n"),
        ("```python\nx = 1\n", "x = 1\n"),  # cut off inside the block
        ("```text\nnot code\n```", None),
        ("x = 1", None),
        ("", None),
    ],
)
def test_extract_code(text, code):
    assert extract_code(text) == code


STUB = CodeProblem(
    "t",
    'from typing import List\n\n\ndef total(xs: List[int]) -> int:\n    """Sum."""\n',
    "total",
    ("assert total([1, 2]) == 3",),
    canonical_solution="    return sum(xs)\n",
)


def test_assemble_program_keeps_the_prompt_for_whole_functions_and_bodies():
    whole = "def total(xs):\n    return sum(xs)\n"
    assert assemble_program(STUB, whole) == STUB.prompt.rstrip() + "\n\n\n" + whole
    assert assemble_program(STUB, "    return sum(xs)\n") == STUB.prompt + "    return sum(xs)\n"
    assert reference_program(STUB) == STUB.prompt + STUB.canonical_solution
    mbpp_style = CodeProblem(
        "m",
        "def f(x):\n    '''Double.'''\n",
        "f",
        ("assert f(1) == 2",),
        "",
        "def f(x):\n    return 2 * x",
    )
    assert reference_program(mbpp_style) == "def f(x):\n    return 2 * x"


@dataclass
class Outcome:
    status: str
    error_type: str | None = None
    message: str | None = None


@dataclass
class Report:
    status: str
    outcomes: tuple[Outcome, ...]
    error: str | None = None


TESTS = ("assert f(1) == 2", "assert f(2) == 4", "for x in range(3):\n    assert f(x) == 2 * x")


@pytest.mark.parametrize(
    ("report", "feedback"),
    [
        (Report("ok", (Outcome("passed"),) * 3), "Your code passed all 3 tests."),
        (
            Report(
                "ok",
                (
                    Outcome("passed"),
                    Outcome("failed", "AssertionError", "assert 3 == 4"),
                    Outcome("failed", "TypeError", None),
                ),
            ),
            "Your code failed 2 of 3 tests.\n"
            'Test:\n    assert f(2) == 4\nResult: AssertionError: "assert 3 == 4"\n'
            "Test:\n    for x in range(3):\n        assert f(x) == 2 * x\nResult: TypeError",
        ),
        (
            Report(
                "syntax_error", (Outcome("not_run"),) * 3, "SyntaxError: invalid syntax (line 1)"
            ),
            "Your code does not compile, so none of the 3 tests ran.\n"
            'Error: "SyntaxError: invalid syntax (line 1)"',
        ),
        (
            Report("load_error", (Outcome("not_run"),) * 3, "NameError: name 'g' is not defined"),
            "Your code raised an error while loading, so none of the 3 tests ran.\n"
            "Error: \"NameError: name 'g' is not defined\"",
        ),
        (
            Report(
                "timeout",
                (Outcome("passed"), Outcome("timeout"), Outcome("not_run")),
                "timed out after 5 s",
            ),
            'Your code timed out ("timed out after 5 s"); it passed 1 of 3 tests.\n'
            "Test:\n    assert f(2) == 4\nResult: timed out\n"
            "Test:\n    for x in range(3):\n        assert f(x) == 2 * x\nResult: not run",
        ),
    ],
)
def test_code_feedback(report, feedback):
    assert code_feedback(TESTS, report.status, report.error, report.outcomes) == feedback


def test_code_feedback_lists_at_most_max_failures_shown():
    outcomes = (Outcome("failed", "AssertionError", "x"),) * 3
    text = code_feedback(TESTS, "ok", None, outcomes, max_failures_shown=1)
    assert text.count("Test:") == 1
    assert text.endswith("(2 more failing tests not shown.)")


@pytest.mark.parametrize(
    ("outcomes", "mode", "score", "correct"),
    [
        (("passed", "passed", "passed"), "fraction", 1.0, True),
        (("passed", "failed", "passed"), "fraction", 2 / 3, False),
        (("passed", "failed", "passed"), "all_or_nothing", 0.0, False),
        (("passed", "passed", "passed"), "all_or_nothing", 1.0, True),
    ],
)
def test_verify_code_scores(outcomes, mode, score, correct):
    problem = CodeProblem("t", "def f(x):\n    pass\n", "f", TESTS)
    calls = []

    def runner(program, tests, *, setup="", timeout=None, entry_point=None):
        calls.append((program, tests, setup, timeout, entry_point))
        return Report("ok", tuple(Outcome(s) for s in outcomes))

    verdict = verify_code(
        problem,
        "```python\ndef f(x):\n    return 2 * x\n```",
        runner,
        timeout=2.0,
        reward_mode=mode,
    )
    assert verdict.score == pytest.approx(score)
    assert verdict.correct is correct
    assert verdict.formatted is True
    assert calls == [
        (problem.prompt.rstrip() + "\n\n\ndef f(x):\n    return 2 * x\n", TESTS, "", 2.0, "f")
    ]
    assert verdict.info() == {
        "correct": correct,
        "score": verdict.score,
        "formatted": True,
        "tests_passed": outcomes.count("passed"),
        "tests_total": 3,
        "program_status": "ok",
    }


@given(st.text(max_size=300))
def test_verifier_never_raises(text):
    verify_math(PROBLEM, text)
    code = extract_code(text)
    assemble_program(STUB, code if code is not None else text)
    has_boxed_answer(text)
