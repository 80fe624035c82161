"""Returns, group-centred advantages and stratified weights against hand-computed numbers."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from baselines.data.advantages import (
    UNTAGGED,
    center_advantages,
    drop_constant_groups,
    group_returns,
    is_constant_group,
    strategy_counts,
    stratified_scales,
    trajectory_return,
)
from baselines.types import Trajectory, TrajectoryGroup, Transition

returns_strategy = st.lists(
    st.floats(min_value=-1e3, max_value=1e3, allow_nan=False, allow_infinity=False),
    min_size=1,
    max_size=16,
)


def _trajectory(*step_rewards: float, strategy: str | None = None) -> Trajectory:
    return Trajectory(
        tuple(Transition([1], [2], [-0.1], reward=r) for r in step_rewards), strategy=strategy
    )


# --- returns --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("step_rewards", "final_reward", "expected"),
    [
        ((0.0, 0.0), 0.75, 0.75),  # the typical debate: R = r_final
        ((0.0, -1.0), 0.5, -0.5),  # a parse error's -1 step reward: 0 - 1 + 0.5
        ((), 1.0, 1.0),  # no turns, only the final reward
        ((0.25, 0.25, 0.5), 0.0, 1.0),  # rewards attributed to transitions only
    ],
)
def test_trajectory_return_is_step_rewards_plus_final(
    step_rewards: tuple[float, ...], final_reward: float, expected: float
) -> None:
    assert trajectory_return(_trajectory(*step_rewards), final_reward) == pytest.approx(expected)


def test_group_returns_pairs_trajectories_with_their_final_rewards() -> None:
    group = TrajectoryGroup(
        [_trajectory(0.0), _trajectory(-1.0), _trajectory(0.0)], final_rewards_G=[1.0, 0.5, 0.0]
    )
    # [0 + 1, -1 + 0.5, 0 + 0]
    assert group_returns(group).tolist() == [1.0, -0.5, 0.0]


# --- centring -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("returns", "expected"),
    [
        # mean = 1/2: [1 - 1/2, 0 - 1/2]
        ([1.0, 0.0], [0.5, -0.5]),
        # mean = (1 + 0.5 + 0) / 3 = 0.5
        ([1.0, 0.5, 0.0], [0.5, 0.0, -0.5]),
        # the debate recipe edge case: one parse error (-1) among zero pairwise rewards;
        # mean = -1/4: [0.25, 0.25, 0.25, -0.75]
        ([0.0, 0.0, 0.0, -1.0], [0.25, 0.25, 0.25, -0.75]),
        # all identical: zero advantage
        ([0.3, 0.3, 0.3], [0.0, 0.0, 0.0]),
        # a group of one has nothing to compare with
        ([5.0], [0.0]),
    ],
)
def test_center_advantages_subtracts_the_group_mean(
    returns: list[float], expected: list[float]
) -> None:
    np.testing.assert_allclose(center_advantages(returns), expected, atol=1e-12)


def test_center_advantages_with_std_normalization() -> None:
    # returns [3, 1]: mean 2, centred [1, -1], population std 1 -> [1 / (1 + eps), -1 / (1 + eps)]
    eps = 1e-6
    out = center_advantages([3.0, 1.0], normalize_std=True, epsilon=eps)
    np.testing.assert_allclose(out, [1 / (1 + eps), -1 / (1 + eps)], rtol=1e-12)
    # returns [0, 0, 6]: mean 2, centred [-2, -2, 4], std sqrt((4 + 4 + 16) / 3) = sqrt(8)
    out = center_advantages([0.0, 0.0, 6.0], normalize_std=True, epsilon=eps)
    np.testing.assert_allclose(out, np.array([-2, -2, 4]) / (math.sqrt(8) + eps), rtol=1e-12)
    # constant group: 0 / (0 + eps) = 0, not nan
    assert center_advantages([2.0, 2.0], normalize_std=True).tolist() == [0.0, 0.0]


@pytest.mark.parametrize(
    ("returns", "kwargs", "message"),
    [
        ([], {}, "non-empty 1-D"),
        ([[1.0, 2.0]], {}, "non-empty 1-D"),
        ([1.0, math.nan], {}, "must be finite"),
        ([1.0, 2.0], {"normalize_std": True, "epsilon": 0.0}, "epsilon must be > 0"),
    ],
)
def test_center_advantages_rejects_bad_input(
    returns: list[float], kwargs: dict[str, object], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        center_advantages(returns, **kwargs)  # type: ignore[arg-type]


@given(returns_strategy)
def test_property_advantages_sum_to_zero_per_group(returns: list[float]) -> None:
    assert abs(center_advantages(returns).sum()) <= 1e-9 * max(1.0, max(map(abs, returns)))


@given(returns_strategy, st.floats(min_value=-1e3, max_value=1e3))
def test_property_invariant_to_a_constant_added_to_every_return(
    returns: list[float], constant: float
) -> None:
    shifted = [r + constant for r in returns]
    np.testing.assert_allclose(center_advantages(shifted), center_advantages(returns), atol=1e-9)


@given(returns_strategy, st.floats(min_value=1e-2, max_value=1e2))
def test_property_std_normalized_advantages_are_invariant_to_scaling(
    returns: list[float], scale: float
) -> None:
    # (sR - s mean) / (s std + eps) ~= (R - mean) / (std + eps) when s std >> eps
    if np.std(returns) < 1e-2:
        return
    scaled = [r * scale for r in returns]
    np.testing.assert_allclose(
        center_advantages(scaled, normalize_std=True, epsilon=1e-12),
        center_advantages(returns, normalize_std=True, epsilon=1e-12),
        atol=1e-6,
    )


# --- constant groups ------------------------------------------------------------------


def test_is_constant_group() -> None:
    assert is_constant_group([0.5, 0.5, 0.5])
    assert is_constant_group([1.0])
    assert not is_constant_group([0.5, 0.5, 0.5000001])


def test_drop_constant_groups_keeps_mixed_groups_in_order() -> None:
    constant = TrajectoryGroup([_trajectory(0.0), _trajectory(0.0)])
    mixed_a = TrajectoryGroup([_trajectory(0.0), _trajectory(-1.0)])
    mixed_b = TrajectoryGroup([_trajectory(0.0), _trajectory(0.0)], final_rewards_G=[1.0, 0.0])
    assert drop_constant_groups([constant, mixed_a, constant, mixed_b]) == [mixed_a, mixed_b]


def test_drop_constant_groups_keeps_one_group_when_all_are_constant() -> None:
    first = TrajectoryGroup([_trajectory(0.0), _trajectory(0.0)])
    second = TrajectoryGroup([_trajectory(1.0), _trajectory(1.0)])
    assert drop_constant_groups([first, second]) == [first]
    assert drop_constant_groups([]) == []


# --- stratification -------------------------------------------------------------------


def test_strategy_counts_keys_none_as_untagged() -> None:
    assert strategy_counts(["iid", "hint", "iid", None]) == {"iid": 2, "hint": 1, UNTAGGED: 1}


@pytest.mark.parametrize(
    ("strategies", "weights", "expected"),
    [
        # n_iid = 3, n_hint = 1: iid gets 1/3 each, hint 1/1
        (["iid", "iid", "iid", "hint"], {"iid": 1.0, "hint": 1.0}, [1 / 3, 1 / 3, 1 / 3, 1.0]),
        # w_iid = 0.5 over n_iid = 2 -> 0.25; w_hint = 2 over 2 -> 1
        (["iid", "hint", "iid", "hint"], {"iid": 0.5, "hint": 2.0}, [0.25, 1.0, 0.25, 1.0]),
        # a strategy with weight 0 is switched off; unused weights are fine
        (["iid", "feedback"], {"iid": 1.0, "feedback": 0.0, "hint": 3.0}, [1.0, 0.0]),
        # None is looked up as "untagged"
        ([None, None], {UNTAGGED: 1.0}, [0.5, 0.5]),
    ],
)
def test_stratified_scales_are_w_s_over_n_s(
    strategies: list[str | None], weights: dict[str, float], expected: list[float]
) -> None:
    np.testing.assert_allclose(stratified_scales(strategies, weights), expected, rtol=1e-12)


def test_stratified_scales_name_the_strategy_without_a_weight() -> None:
    with pytest.raises(ValueError, match=r"strategies \['hint'\] have no weight"):
        stratified_scales(["iid", "hint"], {"iid": 1.0})
    with pytest.raises(ValueError, match=r"\['untagged'\] have no weight"):
        stratified_scales([None], {"iid": 1.0})


@pytest.mark.parametrize("weight", [-1.0, math.nan, math.inf])
def test_stratified_scales_reject_bad_weights(weight: float) -> None:
    with pytest.raises(ValueError, match="must be finite and >= 0"):
        stratified_scales(["iid"], {"iid": weight})


@given(
    st.lists(st.sampled_from(["iid", "hint", "feedback", None]), min_size=1, max_size=30),
    st.fixed_dictionaries(
        {
            "iid": st.floats(0, 10),
            "hint": st.floats(0, 10),
            "feedback": st.floats(0, 10),
            UNTAGGED: st.floats(0, 10),
        }
    ),
)
def test_property_scales_of_a_strategy_sum_to_its_weight(
    strategies: list[str | None], weights: dict[str, float]
) -> None:
    scales = stratified_scales(strategies, weights)
    for strategy in set(strategies):
        key = UNTAGGED if strategy is None else strategy
        total = sum(s for s, name in zip(scales, strategies, strict=True) if name == strategy)
        assert total == pytest.approx(weights[key], rel=1e-9, abs=1e-12)
