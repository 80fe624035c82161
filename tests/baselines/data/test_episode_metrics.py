"""numeric_info, the one rule for which info values every trainer logs; episode_metrics."""

from __future__ import annotations

import math
from decimal import Decimal
from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.data.episode_metrics import SKIPPED_INFO_KEYS, episode_metrics, numeric_info
from baselines.types import Trajectory, TrajectoryGroup, Transition
from llm_envs.contract import CONTEXT_KEYS, LOSS_WEIGHT

NUMERIC_INFO_TABLE = {
    "bool True counts as 1": ({"correct": True}, {"correct": 1.0}),
    "bool False counts as 0": ({"parse_error": False}, {"parse_error": 0.0}),
    "int": ({"passed": 3}, {"passed": 3.0}),
    "float": ({"pass_rate": 0.4}, {"pass_rate": 0.4}),
    "negative float": ({"bonus": -1.5}, {"bonus": -1.5}),
    "numpy float": ({"x": np.float32(0.5)}, {"x": 0.5}),
    "numpy int": ({"x": np.int64(2)}, {"x": 2.0}),
    "numpy bool": ({"x": np.bool_(True)}, {"x": 1.0}),
    "Fraction (a numbers.Real)": ({"x": Fraction(1, 4)}, {"x": 0.25}),
    "NaN left out": ({"x": math.nan}, {}),
    "inf left out": ({"x": math.inf, "y": -math.inf}, {}),
    "numpy NaN left out": ({"x": np.float64("nan")}, {}),
    "int too large for a float left out": ({"x": 10**400}, {}),
    "str left out": ({"x": "1"}, {}),
    "None left out": ({"x": None}, {}),
    "list left out": ({"x": [1, 2]}, {}),
    "complex left out": ({"x": 1j}, {}),
    "Decimal left out": ({"x": Decimal("1.5")}, {}),
    "stop (context) left out": ({"stop": 1}, {}),
    "round (context) left out": ({"round": 2}, {}),
    "turn (context) left out": ({"turn": 3}, {}),
    "strategy (context) left out": ({"strategy": 1}, {}),
    "training_messages (context) left out": ({"training_messages": 0}, {}),
    "loss_weight left out": ({"loss_weight": 0.0}, {}),
    "order of info kept": ({"b": 1, "turn": 0, "a": 2.0}, {"b": 1.0, "a": 2.0}),
}


@pytest.mark.parametrize(
    ("info", "expected"), list(NUMERIC_INFO_TABLE.values()), ids=list(NUMERIC_INFO_TABLE)
)
def test_numeric_info_table(info, expected):
    got = numeric_info(info)
    assert got == expected and list(got) == list(expected)
    assert all(type(v) is float for v in got.values())


def test_skipped_keys_are_the_context_keys_and_the_loss_weight():
    assert CONTEXT_KEYS | {LOSS_WEIGHT} == SKIPPED_INFO_KEYS


_values = st.one_of(
    st.booleans(),
    st.integers(),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=3),
    st.none(),
    st.lists(st.integers(), max_size=2),
    st.complex_numbers(),
)
_keys = st.one_of(st.sampled_from(sorted(SKIPPED_INFO_KEYS)), st.text(max_size=6))


@given(st.dictionaries(_keys, _values, max_size=8))
def test_numeric_info_keeps_exactly_the_finite_real_outcomes(info):
    got = numeric_info(info)
    expected_keys = []
    for key, value in info.items():
        if key in SKIPPED_INFO_KEYS or not isinstance(value, bool | int | float):
            continue
        try:
            number = float(value)
        except OverflowError:  # an int too large for a float
            continue
        if math.isfinite(number):
            expected_keys.append(key)
    assert list(got) == expected_keys  # the same keys, in the info's order
    for key, number in got.items():
        assert type(number) is float and math.isfinite(number)
        assert number == float(info[key])


def test_episode_metrics_log_turn_and_final_infos_by_the_same_rule():
    info = {"correct": True, "round": 2, "turn": 1, "loss_weight": 0.0, "bad": math.nan}
    turn = Transition([1, 2], [3], [-0.5], reward=1.0, info=info)
    group = TrajectoryGroup([Trajectory([turn])], final_rewards_G=[0.0], metrics_G=[info])
    metrics = episode_metrics([group])
    names = ("/correct", "/round", "/turn", "/loss_weight", "/bad")
    logged = {k for k in metrics if k.endswith(names)}
    assert logged == {"env/all/correct", "env/all/turn/correct"}
