"""The shared argument checks: the error names the argument and the value, and says what fits."""

from __future__ import annotations

import re

import pytest

from llm_envs.arguments import (
    MAX_TIMEOUT,
    check_bool,
    check_int,
    check_number,
    check_timeout,
    reject_single_str,
)

NAN, INF = float("nan"), float("inf")


@pytest.mark.parametrize(
    ("value", "bounds", "error", "message"),
    [
        (True, {"minimum": 2}, TypeError, "n must be an int >= 2, got True (a bool)"),
        (2.0, {"minimum": 2}, TypeError, "n must be an int >= 2, got 2.0 (a float)"),
        ("3", {}, TypeError, "n must be an int, got '3' (a str)"),
        (None, {"minimum": 0}, TypeError, "n must be an int >= 0, got None"),
        (1, {"minimum": 2}, ValueError, "n must be an int >= 2, got 1"),
        (17, {"minimum": 2, "maximum": 16}, ValueError, "n must be an int in [2, 16], got 17"),
        (1, {"maximum": 0}, ValueError, "n must be an int <= 0, got 1"),
    ],
)
def test_check_int_refuses(value, bounds, error, message):
    with pytest.raises(error, match=re.escape(message)):
        check_int("n", value, **bounds)


@pytest.mark.parametrize(
    ("value", "bounds", "error", "message"),
    [
        (NAN, {}, ValueError, "x must be a finite number, got nan"),
        (INF, {}, ValueError, "x must be a finite number, got inf"),
        (-INF, {"minimum": 0}, ValueError, "x must be a finite number >= 0, got -inf"),
        (False, {}, TypeError, "x must be a finite number, got False (a bool)"),
        ("0.5", {}, TypeError, "x must be a finite number, got '0.5' (a str)"),
        (0, {"minimum": 0, "open_minimum": True}, ValueError, "x must be a finite number > 0"),
        (1.5, {"minimum": 0, "maximum": 1}, ValueError, "x must be a finite number in [0, 1]"),
        (0, {"minimum": 0, "maximum": 1, "open_minimum": True}, ValueError, "in (0, 1], got 0"),
    ],
)
def test_check_number_refuses(value, bounds, error, message):
    with pytest.raises(error, match=re.escape(message)):
        check_number("x", value, **bounds)


@pytest.mark.parametrize(
    ("check", "value", "expected"),
    [
        (lambda v: check_int("n", v, minimum=2), 2, 2),
        (lambda v: check_number("x", v), -4, -4.0),
        (lambda v: check_number("x", v, minimum=0, maximum=1), 1, 1.0),
        (lambda v: check_timeout("t", v), MAX_TIMEOUT, 3600.0),
        (lambda v: check_timeout("t", v), 0.001, 0.001),
        (lambda v: check_bool("b", v), False, False),
    ],
)
def test_good_values_pass_through(check, value, expected):
    assert check(value) == expected


@pytest.mark.parametrize("value", [0, -1, NAN, INF, 3600.5, 1e9])
def test_a_timeout_is_in_the_sandboxs_range(value):
    with pytest.raises(ValueError, match=r"t must be a finite number of seconds in \(0, 3600\]"):
        check_timeout("t", value)


@pytest.mark.parametrize("value", ["no", 0, 1, None])
def test_check_bool_takes_only_a_bool(value):
    with pytest.raises(TypeError, match="b must be True or False, got"):
        check_bool("b", value)


@pytest.mark.parametrize("value", ["abc", b"abc"])
def test_one_str_is_not_a_sequence(value):
    with pytest.raises(
        TypeError, match=r"s must be a sequence of items, got one (str|bytes) .*; pass"
    ):
        reject_single_str("s", value, items="items", example="s=['abc']")
    reject_single_str("s", [value], items="items", example="s=['abc']")
