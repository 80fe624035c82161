"""The per-group scheme functions ``per_agent_norm`` and ``agent_turn_groups``.

See :mod:`baselines.data.credit` for the formulas; ``group_mean`` is
:func:`baselines.data.advantages.center_advantages` and ``role_baseline``'s
functions are in :mod:`baselines.data.credit.role_baselines`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from baselines.data.credit._common import (
    Float64Array,
    centre,
    check_epsilon,
    check_lengths,
    finite_1d,
    indices_by,
)
from baselines.types import Trajectory

__all__ = ["agent_turn_advantages", "per_agent_advantages", "turn_returns"]


# ------------------------------------------------------------------ per-agent norm


def per_agent_advantages(
    returns_G: Sequence[float] | np.ndarray,
    seats_G: Sequence[str],
    *,
    epsilon: float = 1e-6,
) -> Float64Array:
    """Dr. MAS's agent-wise normalization in one group: ``(R_i - mu_k) / (sigma_k + epsilon)``.

    ``mu_k`` and ``sigma_k`` (population std) are over the trajectories of seat
    ``k = s_i`` in the group; a seat whose returns are all equal, or that has
    one trajectory, gets 0.

    Example:
        Seat ``a`` earns around 10, seat ``b`` around 0: each is compared with itself::

            >>> per_agent_advantages([11.0, 9.0, 1.0, -1.0], ["a", "a", "b", "b"],
            ...                      epsilon=1e-12).round(6).tolist()
            [1.0, -1.0, 1.0, -1.0]
    """
    check_epsilon(epsilon)
    returns = finite_1d("returns_G", returns_G)
    check_lengths("returns", returns, seats_G)
    advantages = np.zeros_like(returns)
    for indices in indices_by(seats_G).values():
        advantages[indices] = centre(returns[indices], True, epsilon)
    return advantages


# ----------------------------------------------------------------- agent-turn groups


def turn_returns(trajectory: Trajectory, final_reward: float = 0.0) -> Float64Array:
    """``G_t = sum_{t' >= t} r_t' + final``: each turn's return from that turn on (no discount).

    ``G_0`` is the trajectory's return; a trajectory without turns has none.

    Example:
        >>> from baselines.types import Transition
        >>> turns = [Transition([1], [2], [-0.1], reward=r) for r in (0.5, -1.0)]
        >>> turn_returns(Trajectory(turns), final_reward=2.0).tolist()  # 0.5 - 1 + 2, -1 + 2
        [1.5, 1.0]
    """
    rewards = [t.reward for t in trajectory.transitions]
    return np.array(
        [math.fsum(rewards[t:]) + float(final_reward) for t in range(len(rewards))],
        dtype=np.float64,
    )


def agent_turn_advantages(
    turn_returns_G: Sequence[Sequence[float] | np.ndarray],
    seats_G: Sequence[str],
    *,
    normalize_std: bool = False,
    epsilon: float = 1e-6,
) -> tuple[Float64Array, ...]:
    """AT-GRPO's grouping in one group: turn t of seat k is compared with turn t of seat k only.

    Args:
        turn_returns_G: each trajectory's per-turn returns ``G_{i,t}``
            (:func:`turn_returns`); trajectories may have different numbers of turns.
        seats_G: each trajectory's seat.
        normalize_std: divide by the set's population std plus ``epsilon``.
        epsilon: see ``normalize_std``.

    Returns:
        Each trajectory's per-turn advantages, as long as its ``turn_returns_G``.

    Example:
        Two episodes of a helper ``h`` and a main agent ``m``, two turns each::

            >>> out = agent_turn_advantages([[3, 1], [5, 3], [1, 0], [1, 2]], ["h", "m", "h", "m"])
            >>> [a.tolist() for a in out]  # h: turn 0 (3, 1), turn 1 (1, 0); m: (5, 1), (3, 2)
            [[1.0, 0.5], [2.0, 0.5], [-1.0, -0.5], [-2.0, -0.5]]
    """
    check_epsilon(epsilon)
    check_lengths("trajectories' turn returns", turn_returns_G, seats_G)
    returns = [finite_1d(f"turn_returns_G[{i}]", r) for i, r in enumerate(turn_returns_G)]
    advantages = [np.zeros_like(r) for r in returns]
    keys = [(seat, t) for seat, r in zip(seats_G, returns, strict=True) for t in range(r.size)]
    places = [(i, t) for i, r in enumerate(returns) for t in range(r.size)]
    for members in indices_by(keys).values():
        cells = [places[m] for m in members]
        values = np.array([returns[i][t] for i, t in cells], dtype=np.float64)
        for (i, t), value in zip(cells, centre(values, normalize_std, epsilon), strict=True):
            advantages[i][t] = value
    return tuple(advantages)
