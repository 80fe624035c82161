"""Scores over problems: bootstrap intervals and paired differences, as properties and by hand."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.eval.scores import Estimate, format_estimate, mean_with_interval, paired_difference

values = st.lists(st.floats(-100, 100, allow_nan=False), min_size=2, max_size=30)


@given(values, st.integers(0, 2**31))
def test_the_interval_contains_the_mean(xs, seed):
    est = mean_with_interval(xs, num_bootstrap=200, seed=seed)
    assert est.low <= est.mean <= est.high
    assert min(xs) - 1e-9 <= est.low and est.high <= max(xs) + 1e-9
    assert est.num_problems == len(xs)


@given(values, st.floats(-50, 50, allow_nan=False))
def test_shifting_every_value_shifts_the_estimate(xs, shift):
    a = mean_with_interval(xs, num_bootstrap=100, seed=3)
    b = mean_with_interval([x + shift for x in xs], num_bootstrap=100, seed=3)
    for before, after in ((a.mean, b.mean), (a.low, b.low), (a.high, b.high)):
        assert after == pytest.approx(before + shift, abs=1e-6)


@given(st.dictionaries(st.integers(0, 20), st.floats(0, 1), min_size=2), st.floats(0, 1))
def test_a_paired_difference_reverses_with_its_sides(first, offset):
    second = {p: min(1.0, v + offset) for p, v in first.items()}
    forward = paired_difference(first, second, num_bootstrap=100, seed=1)
    backward = paired_difference(second, first, num_bootstrap=100, seed=1)
    assert forward.mean == pytest.approx(-backward.mean, abs=1e-12)
    assert forward.low == pytest.approx(-backward.high, abs=1e-9)
    assert forward.high == pytest.approx(-backward.low, abs=1e-9)


def test_a_constant_score_has_a_point_interval():
    assert mean_with_interval([0.5] * 4) == Estimate(0.5, 0.5, 0.5, 4, 0.95)


def test_fewer_than_two_problems_have_no_interval():
    one = mean_with_interval([1.0])
    assert one.mean == 1.0 and math.isnan(one.low) and math.isnan(one.high)
    none = mean_with_interval([])
    assert none.num_problems == 0 and math.isnan(none.mean)
    assert format_estimate(one) == "1.000 [n/a]"


def test_pairing_uses_shared_problems_only():
    # q1: 1.0 - 0.5, q2: 0.5 - 0.5; q3 is the second model's alone.
    est = paired_difference({"q1": 1.0, "q2": 0.5}, {"q1": 0.5, "q2": 0.5, "q3": 1.0})
    assert (est.mean, est.num_problems) == (0.25, 2)


def test_a_wider_coverage_gives_a_wider_interval():
    xs = [0.0, 1.0, 0.0, 1.0, 1.0, 0.0, 1.0, 1.0]
    narrow = mean_with_interval(xs, confidence=0.5, seed=0)
    wide = mean_with_interval(xs, confidence=0.99, seed=0)
    assert wide.low <= narrow.low <= narrow.high <= wide.high


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"values_P": [1.0, math.nan]}, r"values\[1\] must be a finite number, got nan"),
        ({"values_P": [True, 1.0]}, r"values\[0\] must be a finite number, got True"),
        ({"values_P": [1.0], "num_bootstrap": -1}, "num_bootstrap must be an int >= 0"),
        ({"values_P": [1.0], "confidence": 1.0}, r"confidence must be in \(0, 1\)"),
    ],
)
def test_bad_input_names_the_value(kwargs, message):
    with pytest.raises(ValueError, match=message):
        mean_with_interval(**kwargs)
