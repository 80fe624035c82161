"""The problem records: a wrong field is an error at construction, naming the field and task."""

from __future__ import annotations

import re

import pytest

from llm_envs.tasks import CodeProblem, MathProblem

CODE = {"task_id": "T/1", "prompt": "def f():\n", "entry_point": "f", "tests": ("assert f()",)}
MATH = {"task_id": "M/1", "question": "What is 1 + 1?", "answer": "2"}


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"task_id": 1}, TypeError, "task_id must be a str, got 1 (int) (task 1)"),
        ({"prompt": None}, TypeError, "prompt must be a str, got None (NoneType) (task 'T/1')"),
        ({"entry_point": 3}, TypeError, "entry_point must be a str, got 3 (int) (task 'T/1')"),
        ({"entry_point": "f()"}, ValueError, "entry_point must be a Python identifier, got 'f()'"),
        ({"tests": "assert f()"}, TypeError, "got one str (task 'T/1'); wrap it in a tuple"),
        ({"tests": 3}, TypeError, "tests must be a sequence of test snippets (str), got 3"),
        ({"tests": ("assert f()", 1)}, TypeError, "tests[1] must be a str, got 1 (int)"),
        ({"test_setup": None}, TypeError, "test_setup must be a str, got None"),
        ({"canonical_solution": b"x"}, TypeError, "canonical_solution must be a str, got b'x'"),
    ],
)
def test_a_wrong_code_problem_field_names_itself_and_the_task(fields, error, message):
    with pytest.raises(error, match=re.escape(message)):
        CodeProblem(**{**CODE, **fields})


def test_code_problem_tests_may_be_any_sequence_of_str():
    assert CodeProblem(**{**CODE, "tests": ["assert f()"]}).tests == ("assert f()",)


@pytest.mark.parametrize(
    ("fields", "error", "message"),
    [
        ({"task_id": None}, TypeError, "task_id must be a str, got None (NoneType)"),
        ({"answer": 2}, ValueError, "answer must be non-empty text, got 2 (task 'M/1')"),
        ({"question": " "}, ValueError, "question must be non-empty text (task 'M/1')"),
        ({"solution": 2}, TypeError, "solution must be a str, got 2 (int) (task 'M/1')"),
    ],
)
def test_a_wrong_math_problem_field_names_itself_and_the_task(fields, error, message):
    with pytest.raises(error, match=re.escape(message)):
        MathProblem(**{**MATH, **fields})
