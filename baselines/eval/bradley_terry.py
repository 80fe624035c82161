"""The Bradley-Terry fit: strengths from a matrix of wins, by Newton's method.

Model ``i`` beats model ``j`` with probability ``sigmoid(theta_i - theta_j)``.
Given ``wins[i, j]`` (ties counted as half a win each way), the strengths that
maximize the likelihood are found by Newton steps on the log-likelihood, halved
until the likelihood does not fall. Every pair gets ``prior_wins`` virtual wins
each way, so a model that wins every comparison still has a finite strength.
Pure numpy; :mod:`baselines.eval.ratings` builds the matrices from debates.
"""

from __future__ import annotations

import math
import numbers
from typing import TypeAlias

import numpy as np
import numpy.typing as npt

__all__ = ["Float64Array", "bradley_terry", "check_prior"]

Float64Array: TypeAlias = npt.NDArray[np.float64]
"""A float64 numpy array."""

_MAX_NEWTON_STEPS = 200
_MAX_HALVINGS = 60
_ROUNDING = 1e-12  # relative rounding error allowed in a log-likelihood
_TOLERANCE = 1e-10  # on a Newton step in log-strength: about 2e-8 rating points


def bradley_terry(wins_BKK: npt.ArrayLike, prior_wins: float) -> Float64Array:
    """Bradley-Terry log-strengths with mean 0, by Newton's method (see the module docstring).

    Args:
        wins_BKK: ``wins[..., i, j]``: how often model i beat model j, a tie
            counting one half to each side; any leading batch dimensions are
            fitted independently. The diagonal must be 0.
        prior_wins: Virtual wins each way added to every pair; ``> 0``.

    Returns:
        ``log_strengths_BK``, each batch row with mean 0; ``ELO_SCALE`` times
        it is the rating.

    Raises:
        ValueError: If ``prior_wins <= 0``, or the wins are not a square matrix
            of finite, non-negative numbers with a zero diagonal.

    Example:
        >>> # two models, 3 wins to 1 with prior 1: P = (3 + 1) / (4 + 2) = 2/3, odds 2:1
        >>> theta = bradley_terry([[0, 3], [1, 0]], prior_wins=1.0)
        >>> round(float(np.exp(theta[0] - theta[1])), 9)
        2.0
    """
    check_prior(prior_wins)
    wins = np.asarray(wins_BKK, dtype=np.float64)
    if wins.ndim < 2 or wins.shape[-1] != wins.shape[-2]:
        raise ValueError(f"wins must be square in its last two dimensions, got shape {wins.shape}")
    if not np.all(np.isfinite(wins)) or np.any(wins < 0):
        raise ValueError("wins must be finite and non-negative")
    if np.any(np.diagonal(wins, axis1=-2, axis2=-1) != 0):
        raise ValueError("wins must have a zero diagonal: a model never plays itself")
    num_models = wins.shape[-1]
    if num_models < 2:
        return np.zeros(wins.shape[:-1])
    wins = wins + prior_wins * (1.0 - np.eye(num_models))
    wins_transposed = np.swapaxes(wins, -1, -2)
    games = wins + wins_transposed
    diagonal = np.arange(num_models)
    centring = np.full((num_models, num_models), 1.0 / num_models)
    theta = np.zeros(wins.shape[:-1])
    log_likelihood = _log_likelihood(theta, wins)
    # Each fit stops on its own convergence, so that a fit never depends on the
    # others in its batch: equal data give bit-equal ratings in any batch.
    active = np.ones(wins.shape[:-2], dtype=bool)
    for _ in range(_MAX_NEWTON_STEPS):
        p = _win_probabilities(theta)
        p_transposed = np.swapaxes(p, -1, -2)
        # W_i - sum_j N_ij p_ij, written without the cancellation of two large
        # sums when one model nearly always wins.
        gradient = (wins * p_transposed - wins_transposed * p).sum(axis=-1)
        # Minus the Hessian: the Laplacian of the comparison graph weighted by N_ij p_ij p_ji.
        curvature = games * p * p_transposed
        laplacian = -curvature
        laplacian[..., diagonal, diagonal] = curvature.sum(axis=-1)
        # The likelihood is flat along theta + c; the centring term makes the system
        # regular and keeps the step's mean at 0 (the gradient sums to 0).
        step = np.linalg.solve(laplacian + centring, gradient[..., None])[..., 0]
        # Step halving: a step is taken only where it does not lower the likelihood
        # (beyond rounding, which near the maximum is larger than the gain).
        floor = log_likelihood - _ROUNDING * (1.0 + np.abs(log_likelihood))
        scale = np.ones(wins.shape[:-2])
        for _ in range(_MAX_HALVINGS):
            candidate = theta + scale[..., None] * step
            candidate_log_likelihood = _log_likelihood(candidate, wins)
            uphill = candidate_log_likelihood >= floor
            if uphill.all():
                break
            scale = np.where(uphill, scale, scale / 2)
        converged = np.abs(step).max(axis=-1) < _TOLERANCE
        theta = np.where(active[..., None], candidate, theta)
        log_likelihood = np.where(active, candidate_log_likelihood, log_likelihood)
        active &= ~converged
        if not active.any():
            return theta - theta.mean(axis=-1, keepdims=True)
    raise RuntimeError(  # pragma: no cover - Newton converges in a few dozen steps
        f"Bradley-Terry fit did not converge in {_MAX_NEWTON_STEPS} Newton steps "
        f"(prior_wins={prior_wins}): please report the wins matrix"
    )


def _win_probabilities(theta_BK: Float64Array) -> Float64Array:
    """``p_BKK[..., i, j] = P(i beats j) = 1 / (1 + exp(theta_j - theta_i))``, without overflow."""
    return np.exp(_log_win_probabilities(theta_BK))


def _log_win_probabilities(theta_BK: Float64Array) -> Float64Array:
    diff = theta_BK[..., :, None] - theta_BK[..., None, :]
    return -np.logaddexp(0.0, -diff)


def _log_likelihood(theta_BK: Float64Array, wins_BKK: Float64Array) -> Float64Array:
    """``sum_ij wins_ij log P(i beats j)`` per batch row."""
    return (wins_BKK * _log_win_probabilities(theta_BK)).sum(axis=(-2, -1))


def check_prior(prior_wins: float) -> None:
    """Refuse a prior that is not a finite number > 0, saying why it must be one."""
    if isinstance(prior_wins, bool) or not isinstance(prior_wins, numbers.Real):
        raise ValueError(f"prior_wins must be a number > 0, got {prior_wins!r}")
    if not (math.isfinite(prior_wins) and prior_wins > 0):
        raise ValueError(
            f"prior_wins must be finite and > 0, got {prior_wins!r}: without a prior a model "
            "that always wins has an infinite rating (1.0 is a common choice)"
        )
