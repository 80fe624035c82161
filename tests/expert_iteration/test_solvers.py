"""Scripted solvers and critic (llm_envs.expert_iteration.agents)."""

from __future__ import annotations

from fractions import Fraction

import pytest

from llm_envs.expert_iteration import (
    ScriptedCodeSolver,
    ScriptedCritic,
    ScriptedMathSolver,
    evaluate_arithmetic,
    is_negative_feedback,
)
from llm_envs.tasks import ArithmeticTask


@pytest.mark.parametrize(
    ("question", "value"),
    [
        ("What is 2 + 3?", Fraction(5)),
        ("What is 17 - 4 * (9 - 3)?", Fraction(-7)),
        ("What is 7 / (3 - 1)? Give the exact answer as a fraction.", Fraction(7, 2)),
        ("What is -4 * -2?", Fraction(8)),
        ("What is 1 / (2 - 2)?", None),
        ("What is 2 ** 3?", None),
        ("What is __import__('os')?", None),
        ("What is 1.5 + 1?", None),
        ("How many apples?", None),
    ],
)
def test_evaluate_arithmetic(question, value):
    assert evaluate_arithmetic(question) == value


def test_evaluate_arithmetic_solves_the_arithmetic_task():
    task = ArithmeticTask(200, seed=3, num_operands=4, operations=("+", "-", "*", "/"))
    for problem in task:
        assert problem.is_correct(str(evaluate_arithmetic(problem.question)))


@pytest.mark.parametrize(
    ("text", "negative"),
    [
        ("Your final answer, 6, is wrong.", True),
        ("I could not find a final answer in your response.", True),
        ("Your code failed 2 of 3 tests.", True),
        ("Your code does not compile, so none of the 3 tests ran.", True),
        ('Your code timed out ("timed out after 5 s"); it passed 0 of 3 tests.', True),
        ("The proposed final answer is incorrect.", True),
        ("Your final answer, 6, is correct.", False),
        ("Your code passed all 3 tests.", False),
        ("Review your answer above and give your final answer to the problem.", False),
    ],
)
def test_is_negative_feedback(text, negative):
    assert is_negative_feedback(text) is negative


def chat(*contents):
    roles = ["user", "assistant"]
    return {"messages": [{"role": roles[i % 2], "content": c} for i, c in enumerate(contents)]}


def test_math_solver_turns():
    solver = ScriptedMathSolver()
    q = "What is 6 * 7?"
    first = solver(chat(q), {})
    assert first == "I think 6 * 7 = \\boxed{43}."
    assert solver(chat(q, first, "It is wrong."), {}) == "Let me recompute: 6 * 7 = \\boxed{42}."
    assert solver(chat(q, first, "Review your answer."), {}) == first  # no feedback: keeps it
    assert ScriptedMathSolver(first_attempt="right")(chat(q), {}) == "I think 6 * 7 = \\boxed{42}."
    assert ScriptedMathSolver()(chat("How many apples?"), {}) == "I do not know."
    with pytest.raises(ValueError, match="first_attempt must be"):
        ScriptedMathSolver(first_attempt="maybe")  # type: ignore[arg-type]


def test_math_solver_with_a_lookup_table():
    answers = {"Tom has 3 apples and gets 4 more. How many?": "7"}
    solver = ScriptedMathSolver(answers.get)
    question = next(iter(answers))
    assert solver(chat(question), {}) == "I think the result = \\boxed{8}."
    assert solver(chat(question, "x", "wrong"), {}) == "Let me recompute: the result = \\boxed{7}."


def test_code_solver_turns():
    solver = ScriptedCodeSolver("def f():\n    return 0", "def f():\n    return 1")
    first = solver(chat("Write f."), {})
    assert first == "```python\ndef f():\n    return 0\n```"
    assert solver(chat("Write f.", first, "Your code failed 1 of 1 tests."), {}).endswith(
        "return 1\n```"
    )
    assert solver(chat("Write f.", first, "Your code passed all 1 tests."), {}) == first


@pytest.mark.parametrize(
    ("prompt", "verdict"),
    [
        ("Problem:\nWhat is 2 + 3?\n\nProposed answer:\n\\boxed{5}", "correct"),
        ("Problem:\nWhat is 2 + 3?\n\nProposed answer:\n\\boxed{6}", "wrong"),
        ("Problem:\nQ?\n\nReference answer:\n6\n\nProposed answer:\nSo 6.", "correct"),
        ("Problem:\nQ?\n\nProposed answer:\nSo 6.", "cannot tell"),
    ],
)
def test_critic(prompt, verdict):
    said = ScriptedCritic()(chat(prompt + "\n\nWrite your feedback on the proposed answer."), {})
    assert verdict in said
    assert "5" not in said and "6" not in said  # it never gives the answer away
