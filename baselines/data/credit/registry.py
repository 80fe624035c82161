"""The batch level: :class:`Credit`, the registry :data:`CREDIT_SCHEMES` and :func:`assign_credit`.

See :mod:`baselines.data.credit` for the schemes.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Final, Literal, get_args

import numpy as np

from baselines.data.advantages import center_advantages, group_returns, is_constant_group
from baselines.data.credit._common import Float64Array, check_epsilon, indices_by
from baselines.data.credit.role_baselines import RoleBaselines, role_baseline_advantages
from baselines.data.credit.schemes import (
    agent_turn_advantages,
    per_agent_advantages,
    turn_returns,
)
from baselines.types import TrajectoryGroup

__all__ = [
    "CREDIT_NAMES",
    "CREDIT_SCHEMES",
    "Credit",
    "CreditName",
    "CreditScheme",
    "assign_credit",
]

CreditName = Literal["group_mean", "role_baseline", "per_agent_norm", "agent_turn_groups"]
"""The credit-assignment schemes (see the module docstring)."""

CREDIT_NAMES: Final[tuple[str, ...]] = get_args(CreditName)
"""Every :data:`CreditName`, the default first."""


@dataclass(frozen=True)
class Credit:
    """A batch's credit, group by group, and the role baselines after it.

    Attributes:
        scheme: the scheme that assigned it.
        advantages_P_G: per group, each trajectory's advantage (under
            ``agent_turn_groups``: the mean of its turns' advantages, 0 without
            turns; a trainer with one advantage per trajectory uses it).
        turn_advantages_P_G: per group and trajectory, each turn's advantage,
            for schemes whose turns differ (``agent_turn_groups``); None where
            every turn has the trajectory's advantage.
        signal_P: whether some advantage of the group is not 0 (a group
            without one adds no gradient and can be dropped).
        baselines: the role baselines after the batch (unchanged but under
            ``role_baseline``).
        metrics: what to log: ``credit/baseline/<seat>``, the baseline each seat
            was measured against (``role_baseline``).
    """

    scheme: CreditName
    advantages_P_G: tuple[Float64Array, ...]
    turn_advantages_P_G: tuple[tuple[Float64Array, ...], ...] | None
    signal_P: tuple[bool, ...]
    baselines: RoleBaselines
    metrics: Mapping[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class _Batch:
    """The batch's groups as the schemes read them."""

    groups_P: Sequence[TrajectoryGroup]
    env: str
    baselines: RoleBaselines
    normalize_std: bool
    epsilon: float

    def seats(self, scheme: str) -> list[list[str]]:
        seats_P: list[list[str]] = []
        for p, group in enumerate(self.groups_P):
            seats_G = []
            for i, trajectory in enumerate(group.trajectories_G):
                if trajectory.agent_id is None:
                    raise ValueError(
                        f"trajectory {i} of group {p} has no agent_id, but credit={scheme!r} "
                        "compares trajectories by seat; build trajectories with agent_id "
                        "(baselines.rollouts does), or use credit='group_mean'"
                    )
                seats_G.append(trajectory.agent_id)
            seats_P.append(seats_G)
        return seats_P


CreditScheme = Callable[[_Batch], Credit]
"""A scheme of the registry: the batch's groups and settings -> :class:`Credit`."""


def _signal(advantages: Sequence[Float64Array]) -> bool:
    return any(bool(np.any(a != 0.0)) for a in advantages)


def _no_comparison(scheme: str, sets: Mapping[Hashable, list[int]], what: str) -> None:
    if sets and max(len(members) for members in sets.values()) < 2:
        raise ValueError(
            f"credit={scheme!r} compares {what} within a group, but no group of this batch "
            "holds two of them (each group is one episode with one trajectory per seat?), so "
            "every advantage would be 0; use credit='role_baseline' (a running baseline per "
            "seat) or credit='group_mean', or groups of several episodes of one problem"
        )


def _group_mean(batch: _Batch) -> Credit:
    returns_P = [group_returns(group) for group in batch.groups_P]
    return Credit(
        scheme="group_mean",
        advantages_P_G=tuple(
            center_advantages(r, normalize_std=batch.normalize_std, epsilon=batch.epsilon)
            for r in returns_P
        ),
        turn_advantages_P_G=None,
        signal_P=tuple(not is_constant_group(r) for r in returns_P),
        baselines=batch.baselines,
    )


def _role_baseline(batch: _Batch) -> Credit:
    seats_P = batch.seats("role_baseline")
    returns_P = [group_returns(group) for group in batch.groups_P]
    seats_N = [seat for seats_G in seats_P for seat in seats_G]
    advantages_N, after = role_baseline_advantages(
        np.concatenate(returns_P), seats_N, env=batch.env, baselines=batch.baselines
    )
    bounds = np.cumsum([0] + [len(r) for r in returns_P])
    advantages_P_G = tuple(advantages_N[bounds[p] : bounds[p + 1]] for p in range(len(returns_P)))
    metrics = {
        f"credit/baseline/{seat}": batch.baselines.value(batch.env, seat) for seat in seats_N
    }
    return Credit(
        scheme="role_baseline",
        advantages_P_G=advantages_P_G,
        turn_advantages_P_G=None,
        signal_P=tuple(_signal([a]) for a in advantages_P_G),
        baselines=after,
        metrics=dict(sorted(metrics.items())),
    )


def _per_agent_norm(batch: _Batch) -> Credit:
    seats_P = batch.seats("per_agent_norm")
    _no_comparison(
        "per_agent_norm",
        indices_by([(p, seat) for p, seats_G in enumerate(seats_P) for seat in seats_G]),
        "the trajectories of one seat",
    )
    advantages_P_G = tuple(
        per_agent_advantages(group_returns(group), seats_G, epsilon=batch.epsilon)
        for group, seats_G in zip(batch.groups_P, seats_P, strict=True)
    )
    return Credit(
        scheme="per_agent_norm",
        advantages_P_G=advantages_P_G,
        turn_advantages_P_G=None,
        signal_P=tuple(_signal([a]) for a in advantages_P_G),
        baselines=batch.baselines,
    )


def _agent_turn_groups(batch: _Batch) -> Credit:
    seats_P = batch.seats("agent_turn_groups")
    turns_P = [
        [
            turn_returns(t, final)
            for t, final in zip(group.trajectories_G, group.final_rewards_G, strict=True)
        ]
        for group in batch.groups_P
    ]
    _no_comparison(
        "agent_turn_groups",
        indices_by(
            [
                (p, seat, t)
                for p, (seats_G, turns_G) in enumerate(zip(seats_P, turns_P, strict=True))
                for seat, turns in zip(seats_G, turns_G, strict=True)
                for t in range(turns.size)
            ]
        ),
        "turn t of one seat",
    )
    turn_advantages_P_G = tuple(
        agent_turn_advantages(
            turns_G, seats_G, normalize_std=batch.normalize_std, epsilon=batch.epsilon
        )
        for turns_G, seats_G in zip(turns_P, seats_P, strict=True)
    )
    return Credit(
        scheme="agent_turn_groups",
        advantages_P_G=tuple(
            np.array([math.fsum(a) / a.size if a.size else 0.0 for a in turns_G], dtype=np.float64)
            for turns_G in turn_advantages_P_G
        ),
        turn_advantages_P_G=turn_advantages_P_G,
        signal_P=tuple(_signal(turns_G) for turns_G in turn_advantages_P_G),
        baselines=batch.baselines,
    )


CREDIT_SCHEMES: Final[Mapping[str, CreditScheme]] = MappingProxyType(
    {
        "group_mean": _group_mean,
        "role_baseline": _role_baseline,
        "per_agent_norm": _per_agent_norm,
        "agent_turn_groups": _agent_turn_groups,
    }
)
"""The registry: every :data:`CreditName` and its scheme; call one through :func:`assign_credit`."""

_DIVIDES_BY_STD: Final = {"per_agent_norm": "always", "role_baseline": "never"}


def assign_credit(
    groups_P: Sequence[TrajectoryGroup],
    scheme: CreditName = "group_mean",
    *,
    env: str = "",
    baselines: RoleBaselines | None = None,
    normalize_std: bool = False,
    epsilon: float = 1e-6,
) -> Credit:
    """Run a credit-assignment scheme on a batch of groups (see the module docstring).

    Args:
        groups_P: the batch's groups (constant ones included: their returns
            still move the role baselines).
        scheme: a name of :data:`CREDIT_SCHEMES`.
        env: the environment the batch was played in: ``role_baseline`` keeps
            one baseline per environment and seat.
        baselines: the role baselines before the batch (default: none yet).
        normalize_std: divide by the comparison set's std plus ``epsilon``
            (``group_mean``, ``agent_turn_groups``).
        epsilon: added to every std divided by.

    Returns:
        The batch's :class:`Credit`.

    Raises:
        ValueError: an unknown scheme; ``normalize_std`` with a scheme that
            decides it itself; a seat-wise scheme on trajectories without
            ``agent_id`` or on groups that never hold two trajectories to compare.

    Example:
        Two episodes of one problem, each with seats ``h`` and ``m``; ``h`` scores
        around 10 and ``m`` around 0::

            >>> from baselines.types import Trajectory, TrajectoryGroup
            >>> group = TrajectoryGroup(
            ...     [Trajectory((), agent_id=s) for s in ("h", "m", "h", "m")],
            ...     final_rewards_G=[11.0, 1.0, 9.0, -1.0])
            >>> assign_credit([group]).advantages_P_G[0].tolist()  # one mean for both seats
            [6.0, -4.0, 4.0, -6.0]
            >>> credit = assign_credit([group], "per_agent_norm", epsilon=1e-12)
            >>> credit.advantages_P_G[0].round(6).tolist()  # each seat against its own mean
            [1.0, 1.0, -1.0, -1.0]
    """
    if scheme not in CREDIT_SCHEMES:
        raise ValueError(f"credit scheme must be one of {list(CREDIT_SCHEMES)}, got {scheme!r}")
    if normalize_std and scheme in _DIVIDES_BY_STD:
        raise ValueError(
            f"credit={scheme!r} {_DIVIDES_BY_STD[scheme]} divides by a std; drop "
            "normalize_std (the trainers' normalize_advantages), which is for 'group_mean' "
            "and 'agent_turn_groups'"
        )
    check_epsilon(epsilon)
    if not groups_P:
        raise ValueError("groups_P is empty; assign_credit needs at least one group")
    batch = _Batch(groups_P, env, baselines or RoleBaselines(), normalize_std, epsilon)
    return CREDIT_SCHEMES[scheme](batch)
