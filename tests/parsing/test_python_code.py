"""Python code in agent text: parsing without raising, compiling, finding functions and imports.

Cleaning and extraction are specified with the team reward in
tests/code_collab/test_team_reward.py; these are the small helpers around them.
"""

from __future__ import annotations

import warnings

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.parsing.python_code import (
    ExtractedFunction,
    compile_error,
    find_function,
    top_level_imports,
    try_parse,
)


@pytest.mark.parametrize(
    ("source", "parses"),
    [
        ("x = 1", True),
        ("", True),
        ("def f(:", False),
        ("x = 1\x00", False),  # null byte: a ValueError on 3.11
        ("(" * 500 + ")" * 500, False),  # too deeply nested
        ('s = "\\w"', True),  # an invalid escape: parses, and quietly
    ],
)
def test_try_parse(source, parses):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert (try_parse(source) is not None) is parses


@given(st.text(max_size=200))
def test_try_parse_never_raises(text):
    try_parse(text)


@pytest.mark.parametrize(
    ("source", "line", "column", "message"),
    [
        ("def f(x)\n    return x", 1, 9, "expected ':'"),
        ("x = (1,\n", 1, 5, "'(' was never closed"),
    ],
)
def test_compile_error(source, line, column, message):
    error = compile_error(source)
    assert error is not None
    assert (error.line, error.column, error.message) == (line, column, message)


def test_compile_error_is_none_for_code_that_compiles():
    assert compile_error("def f(x):\n    return x") is None


@pytest.mark.parametrize(
    ("source", "name", "line"),
    [
        ("def f():\n    pass\ndef f():\n    return 1", "f", 3),  # the last definition wins
        ("async def g():\n    pass", "g", 1),
        ("class C:\n    def f(self):\n        pass", "f", None),  # a method is not top-level
        ("def f(:", "f", None),
    ],
)
def test_find_function(source, name, line):
    node = find_function(source, name)
    assert (node.lineno if node else None) == line


TYPING = "from typing import List"


@pytest.mark.parametrize(
    ("code", "imports"),
    [
        (f"import math\n{TYPING}\ndef f():\n    import os", ["import math", TYPING]),
        ("from . import x\nimport a as b", ["import a as b"]),
        ("import math\ndef f(:\n    import os", ["import math"]),  # from the lines
    ],
)
def test_top_level_imports(code, imports):
    assert top_level_imports(code) == imports


def test_not_found():
    assert ExtractedFunction.not_found("aux") == ExtractedFunction("aux", "", False, None)
    assert not ExtractedFunction.not_found("aux").found
