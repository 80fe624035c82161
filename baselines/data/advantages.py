"""Returns, group-centred advantages and stratified strategy weights: pure functions.

Formulas (the debate recipe, "Advantage Computation"; the expert-iteration
plan, "Stratified mixture of
experts"):

* return of trajectory i: ``R_i = sum_t r_step[i, t] + r_final[i]``;
* advantage within its group of G: ``A_i = R_i - mean_j R_j`` (no std
  normalization by default, so adding a constant to every return of a group
  changes nothing); optionally ``A_i = (R_i - mean) / (std + epsilon)`` with the
  population std;
* a group whose returns are all equal has ``A = 0`` everywhere: it carries no
  gradient and can be dropped (:func:`drop_constant_groups` keeps at least one);
* stratified weighting with mixture weights ``w_s``: ``A_i <- A_i * w_s / n_s``
  where s is trajectory i's strategy and ``n_s`` the number of trajectories of s
  in the batch.

These functions take and return numpy arrays and plain Python values. They
must never import torch or touch tokens: a trainer calls them, then hands the
advantages to :func:`baselines.data.datums.trajectory_to_data`.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence

import numpy as np
import numpy.typing as npt

from baselines.types import Trajectory, TrajectoryGroup

__all__ = [
    "UNTAGGED",
    "center_advantages",
    "drop_constant_groups",
    "group_returns",
    "is_constant_group",
    "strategy_counts",
    "strategy_key",
    "stratified_scales",
    "trajectory_return",
]

UNTAGGED = "untagged"
"""The metrics key for trajectories whose strategy is None."""

Float64Array = npt.NDArray[np.float64]


def strategy_key(strategy: str | None) -> str:
    """Return the key under which a strategy is counted and logged (None -> :data:`UNTAGGED`)."""
    return UNTAGGED if strategy is None else strategy


def trajectory_return(trajectory: Trajectory, final_reward: float = 0.0) -> float:
    """Return ``R = sum of step rewards + final reward`` of one trajectory.

    Example:
        >>> from baselines.types import Transition
        >>> t = Transition([1], [2], [-0.5], reward=-1.0)
        >>> trajectory_return(Trajectory((t, t)), final_reward=0.5)
        -1.5
    """
    return trajectory.step_reward + float(final_reward)


def group_returns(group: TrajectoryGroup) -> Float64Array:
    """Return ``returns_G``: each trajectory's step rewards plus its final group reward."""
    return np.array(
        [
            trajectory_return(trajectory, final)
            for trajectory, final in zip(group.trajectories_G, group.final_rewards_G, strict=True)
        ],
        dtype=np.float64,
    )


def center_advantages(
    returns_G: Sequence[float] | np.ndarray,
    *,
    normalize_std: bool = False,
    epsilon: float = 1e-6,
) -> Float64Array:
    """Centre returns within a group: ``A_i = R_i - mean(R)``, optionally over ``std + epsilon``.

    Args:
        returns_G: the returns of one group's trajectories.
        normalize_std: also divide by the population standard deviation of the
            group plus ``epsilon`` (GRPO-style). Off by default: the debate recipe only
            subtracts the mean.
        epsilon: added to the std so that a constant group gives 0, not 0/0.

    Returns:
        ``advantages_G``, float64, summing to zero.

    Example:
        >>> center_advantages([1.0, 0.0, 0.5]).tolist()
        [0.5, -0.5, 0.0]
    """
    returns = np.asarray(returns_G, dtype=np.float64)
    if returns.ndim != 1 or returns.size == 0:
        raise ValueError(f"returns_G must be a non-empty 1-D sequence, got shape {returns.shape}")
    if not np.all(np.isfinite(returns)):
        raise ValueError(f"returns_G must be finite, got {returns.tolist()}")
    if epsilon <= 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")
    advantages = returns - returns.mean()
    if normalize_std:
        advantages = advantages / (returns.std() + epsilon)
    return advantages


def is_constant_group(returns_G: Sequence[float] | np.ndarray) -> bool:
    """Return whether every return of a group is identical (so every advantage is 0)."""
    returns = np.asarray(returns_G, dtype=np.float64)
    return bool(np.all(returns == returns[0]))


def drop_constant_groups(groups_P: Sequence[TrajectoryGroup]) -> list[TrajectoryGroup]:
    """Drop groups whose returns are all equal; if that drops every group, keep the first.

    A constant group has zero advantage everywhere and so zero policy gradient
    (the debate recipe, "Key edge cases"); dropping it saves a forward pass. One group is
    always kept so that a training step still has data to run on (and logs its
    KL and entropy) even when nothing in the batch has signal.
    """
    if not groups_P:
        return []
    kept = [group for group in groups_P if not is_constant_group(group_returns(group))]
    return kept or [groups_P[0]]


def strategy_counts(strategies: Iterable[str | None]) -> dict[str, int]:
    """Count trajectories per strategy: ``n_s``, keyed by :func:`strategy_key`.

    Example:
        >>> strategy_counts(["iid", "hint", "iid", None])
        {'iid': 2, 'hint': 1, 'untagged': 1}
    """
    return dict(Counter(strategy_key(s) for s in strategies))


def stratified_scales(
    strategies: Sequence[str | None],
    strategy_weights: Mapping[str, float],
) -> Float64Array:
    """Return ``w_s / n_s`` for each trajectory, s being its strategy (the expert-iteration plan).

    Multiplying each trajectory's advantage by its scale makes the batch
    gradient ``sum_s w_s * mean_{i in s}(...)``: each strategy contributes in
    proportion to its weight, however many samples it produced.

    Args:
        strategies: each trajectory's strategy (None is looked up as
            :data:`UNTAGGED`).
        strategy_weights: the mixture weight ``w_s >= 0`` of every strategy present.

    Raises:
        ValueError: a strategy in ``strategies`` has no weight, or a weight is
            negative or not finite.

    Example:
        >>> stratified_scales(["iid", "iid", "hint"], {"iid": 1.0, "hint": 0.5}).tolist()
        [0.5, 0.5, 0.5]
    """
    for name, weight in strategy_weights.items():
        if not math.isfinite(weight) or weight < 0:
            raise ValueError(f"strategy_weights[{name!r}] must be finite and >= 0, got {weight}")
    counts = strategy_counts(strategies)
    missing = sorted(set(counts) - set(strategy_weights))
    if missing:
        raise ValueError(
            f"strategies {missing} have no weight in strategy_weights "
            f"(which has {sorted(strategy_weights)}); add a weight for each, "
            f"or pass strategy_weights=None to weight every trajectory equally"
        )
    return np.array(
        [strategy_weights[strategy_key(s)] / counts[strategy_key(s)] for s in strategies],
        dtype=np.float64,
    )
