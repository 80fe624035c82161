"""Multi-agent credit assignment: what each trajectory's return is measured against.

A *scheme* turns the returns of a batch of trajectory groups into advantages.
Each is a pure function of numpy arrays and plain values; the running baselines
of ``role_baseline`` are an explicit state value (:class:`RoleBaselines`),
passed in and returned, so a trainer can checkpoint them. With R_i the return
of trajectory i (step rewards plus final reward), s_i its seat (its agent id)
and g its group:

``group_mean`` (the debate recipe, "Advantage Computation"; the default)
    ``A_i = R_i - mean_{j in g} R_j``, optionally over ``std_g + epsilon``
    (population std): :func:`baselines.data.advantages.center_advantages`, exactly.

``role_baseline`` (SPIRAL, "Role-conditioned Advantage Estimation")
    ``A_i = R_i - b[env, s_i]`` with b the baseline from *before* the batch, then
    ``b[env, k] <- decay**n_k * b[env, k] + (1 - decay**n_k) * mean_k(R)`` over the
    ``n_k`` returns of seat k in the batch (:func:`update_role_baselines`). A
    baseline starts at 0 and ``decay`` is per return (SPIRAL's EMA, 0.95).

``per_agent_norm`` (Dr. MAS, agent-wise advantage normalization)
    ``A_i = (R_i - mu_{g,s_i}) / (sigma_{g,s_i} + epsilon)``: mean and population
    std over the trajectories of seat ``s_i`` in group g (:func:`per_agent_advantages`).

``agent_turn_groups`` (AT-GRPO, agent- and turn-wise grouping)
    every turn t of a trajectory gets its own advantage, compared only with turn t
    of the same seat in the same group: ``A_{i,t} = G_{i,t} - mean G_{j,t}`` over
    the trajectories j of g with ``s_j = s_i`` that have a turn t, optionally over
    ``std + epsilon``; ``G_{i,t} = sum_{t' >= t} r_{i,t'} + final_i`` is the return
    from turn t on (:func:`turn_returns`, :func:`agent_turn_advantages`). A turn
    is the agent's own t-th turn.

In every scheme but ``group_mean`` a comparison set whose values are all equal
gives exactly 0 (and one member alone has nothing to be compared with), and
means and stds are exact sums (:func:`math.fsum`), so permuting trajectories
permutes their advantages and nothing else.

Where this differs from the papers' code, on purpose: SPIRAL folds returns into
its EMA one at a time, each trajectory measured against the baseline of those
before it; here a batch is measured against the baseline from before the
batch (no trajectory's own return or batch-mates are in its baseline, and the
order inside a batch does not matter), and its n returns of a seat enter as n
EMA steps at their mean. Dr. MAS's code divides by the sample std (verl's
GRPO); here it is the population std, as in
:func:`~baselines.data.advantages.center_advantages`. AT-GRPO samples several
actions from one state at every turn; here the same seat's same turn in the
group's other episodes stands in for them.

:func:`assign_credit` runs a scheme of :data:`CREDIT_SCHEMES` on a batch of
:class:`~baselines.types.TrajectoryGroup` and returns a :class:`Credit`, which
:func:`baselines.data.datums.assemble_training_data` puts on the tokens.
Nothing here imports torch, reads tokens or names an environment: seats are
trajectories' ``agent_id`` and the environment is a name the caller gives.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Hashable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any, Final, Literal, get_args

import numpy as np
import numpy.typing as npt

from baselines.data.advantages import center_advantages, group_returns, is_constant_group
from baselines.types import Trajectory, TrajectoryGroup

__all__ = [
    "CREDIT_NAMES",
    "CREDIT_SCHEMES",
    "ROLE_BASELINE_DECAY",
    "Credit",
    "CreditName",
    "CreditScheme",
    "RoleBaselines",
    "agent_turn_advantages",
    "assign_credit",
    "per_agent_advantages",
    "role_baseline_advantages",
    "turn_returns",
    "update_role_baselines",
]

Float64Array = npt.NDArray[np.float64]

CreditName = Literal["group_mean", "role_baseline", "per_agent_norm", "agent_turn_groups"]
"""The credit-assignment schemes (see the module docstring)."""

CREDIT_NAMES: Final[tuple[str, ...]] = get_args(CreditName)
"""Every :data:`CreditName`, the default first."""

ROLE_BASELINE_DECAY: Final = 0.95
"""The decay of ``role_baseline``'s EMA per return folded in (SPIRAL's ``role_baseline_ema_gamma``).

A return seen n returns ago weighs ``decay**n``: after 45 returns of a seat
its weight is below 0.1, after 90 below 0.01.
"""


# ------------------------------------------------------------------ shared pieces


def _centre(values: Float64Array, normalize_std: bool, epsilon: float) -> Float64Array:
    """``v - mean(v)``, optionally over ``std + epsilon``; exactly 0 for a set of equal values."""
    if values.size == 0 or np.all(values == values[0]):
        return np.zeros_like(values)
    mean = math.fsum(values) / values.size
    centred = values - mean
    if normalize_std:
        std = math.sqrt(math.fsum(centred * centred) / values.size)
        centred = centred / (std + epsilon)
    return centred


def _finite_1d(name: str, values: Sequence[float] | np.ndarray) -> Float64Array:
    array = np.asarray(values, dtype=np.float64)
    if array.ndim != 1:
        raise ValueError(f"{name} must be a 1-D sequence, got shape {array.shape}")
    if not np.all(np.isfinite(array)):
        raise ValueError(f"{name} must be finite, got {array.tolist()}")
    return array


def _check_epsilon(epsilon: float) -> None:
    if not epsilon > 0:
        raise ValueError(f"epsilon must be > 0, got {epsilon}")


def _check_lengths(name: str, values: Sequence[Any] | np.ndarray, seats: Sequence[str]) -> None:
    if len(values) != len(seats):
        raise ValueError(
            f"got {len(values)} {name} for {len(seats)} seats; give one seat per trajectory"
        )


def _indices_by(keys: Sequence[Hashable]) -> dict[Hashable, list[int]]:
    """Positions of each key, keys in order of first appearance."""
    members: dict[Hashable, list[int]] = defaultdict(list)
    for index, key in enumerate(keys):
        members[key].append(index)
    return members


# ------------------------------------------------------------------- role baselines


@dataclass(frozen=True)
class RoleBaselines:
    """The running baselines ``b[env, seat]`` of ``role_baseline``: a state value, never mutated.

    Attributes:
        values: ``(env, seat) -> b``; a pair not seen yet has baseline 0.
        counts: ``(env, seat) -> n``, the returns folded into ``b`` so far.

    Example:
        >>> state = RoleBaselines().updated("game", {"agent_0": [1.0, 0.0]})
        >>> round(state.value("game", "agent_0"), 6)  # (1 - 0.95**2) * 0.5
        0.04875
        >>> RoleBaselines.from_json(state.to_json()) == state
        True
    """

    values: Mapping[tuple[str, str], float] = field(default_factory=dict)
    counts: Mapping[tuple[str, str], int] = field(default_factory=dict)

    def value(self, env: str, seat: str) -> float:
        """The baseline of ``seat`` in ``env`` (0 before its first return)."""
        return float(self.values.get((env, seat), 0.0))

    def count(self, env: str, seat: str) -> int:
        """How many returns of ``seat`` in ``env`` the baseline has seen."""
        return int(self.counts.get((env, seat), 0))

    def updated(
        self,
        env: str,
        returns_by_seat: Mapping[str, Sequence[float]],
        decay: float = ROLE_BASELINE_DECAY,
    ) -> RoleBaselines:
        """The baselines after a batch: ``b <- decay**n b + (1 - decay**n) mean(R)`` per seat.

        Args:
            env: the environment the returns come from.
            returns_by_seat: each seat's returns in the batch (a seat without
                returns keeps its baseline).
            decay: the EMA's decay per return, in (0, 1).

        Raises:
            ValueError: ``decay`` outside (0, 1) or a return that is not finite.
        """
        if not 0.0 < decay < 1.0:
            raise ValueError(f"decay must be in (0, 1), got {decay}; SPIRAL uses 0.95")
        values, counts = dict(self.values), dict(self.counts)
        for seat, returns in returns_by_seat.items():
            batch = _finite_1d(f"returns of seat {seat!r}", returns)
            if batch.size == 0:
                continue
            key = (env, seat)
            keep = decay**batch.size
            mean = math.fsum(batch) / batch.size
            values[key] = keep * values.get(key, 0.0) + (1.0 - keep) * mean
            counts[key] = counts.get(key, 0) + int(batch.size)
        return RoleBaselines(values, counts)

    def to_json(self) -> dict[str, dict[str, dict[str, float | int]]]:
        """``{env: {seat: {"baseline": b, "count": n}}}``: JSON that round-trips exactly."""
        out: dict[str, dict[str, dict[str, float | int]]] = {}
        for (env, seat), value in sorted(self.values.items()):
            out.setdefault(env, {})[seat] = {"baseline": value, "count": self.count(env, seat)}
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RoleBaselines:
        """Read :meth:`to_json`'s output back (a checkpoint's).

        Raises:
            ValueError: the data is not ``{env: {seat: {"baseline": finite
                number, "count": int >= 0}}}``.
        """
        values: dict[tuple[str, str], float] = {}
        counts: dict[tuple[str, str], int] = {}
        if not isinstance(data, Mapping):
            raise ValueError(f"role baselines must be a JSON object, got {data!r}")
        for env, seats in data.items():
            if not isinstance(seats, Mapping):
                raise ValueError(f"role baselines of env {env!r} must be an object, got {seats!r}")
            for seat, entry in seats.items():
                value = entry.get("baseline") if isinstance(entry, Mapping) else None
                count = entry.get("count") if isinstance(entry, Mapping) else None
                if (
                    isinstance(value, bool)
                    or not isinstance(value, int | float)
                    or not math.isfinite(value)
                    or isinstance(count, bool)
                    or not isinstance(count, int)
                    or count < 0
                ):
                    raise ValueError(
                        f"role baseline of ({env!r}, {seat!r}) must be "
                        f'{{"baseline": <finite number>, "count": <int >= 0>}}, got {entry!r}'
                    )
                values[(str(env), str(seat))] = float(value)
                counts[(str(env), str(seat))] = count
        return cls(values, counts)


def update_role_baselines(
    baselines: RoleBaselines,
    returns_N: Sequence[float] | np.ndarray,
    seats_N: Sequence[str],
    *,
    env: str,
    decay: float = ROLE_BASELINE_DECAY,
) -> RoleBaselines:
    """Fold a batch's returns into the baselines of their seats (see :meth:`RoleBaselines.updated`).

    Example:
        >>> b = update_role_baselines(RoleBaselines(), [1.0, -1.0], ["p0", "p1"], env="g")
        >>> round(b.value("g", "p0"), 6), round(b.value("g", "p1"), 6)  # (1 - 0.95) * +-1
        (0.05, -0.05)
    """
    returns = _finite_1d("returns_N", returns_N)
    _check_lengths("returns", returns, seats_N)
    by_seat: dict[str, list[float]] = defaultdict(list)
    for value, seat in zip(returns.tolist(), seats_N, strict=True):
        by_seat[seat].append(value)
    return baselines.updated(env, by_seat, decay)


def role_baseline_advantages(
    returns_N: Sequence[float] | np.ndarray,
    seats_N: Sequence[str],
    *,
    env: str,
    baselines: RoleBaselines,
    decay: float = ROLE_BASELINE_DECAY,
) -> tuple[Float64Array, RoleBaselines]:
    """SPIRAL's role-conditioned advantages ``A_i = R_i - b[env, s_i]``, and the baselines after.

    Every return is measured against the baseline from before the batch; then
    the batch is folded in (:func:`update_role_baselines`).

    Args:
        returns_N: the batch's returns, every group's together.
        seats_N: each return's seat.
        env: the environment they were played in.
        baselines: the state before the batch.
        decay: the EMA's decay per return.

    Returns:
        ``(advantages_N, baselines after the batch)``.

    Example:
        A first batch is measured against 0; the next against the moved baselines::

            >>> a, b = role_baseline_advantages([1.0, -1.0], ["p0", "p1"], env="g",
            ...                                 baselines=RoleBaselines())
            >>> a.tolist()
            [1.0, -1.0]
            >>> a, b = role_baseline_advantages([1.0, -1.0], ["p0", "p1"], env="g", baselines=b)
            >>> [round(x, 6) for x in a.tolist()]  # 1 - 0.05, -1 + 0.05
            [0.95, -0.95]
    """
    returns = _finite_1d("returns_N", returns_N)
    _check_lengths("returns", returns, seats_N)
    before = np.array([baselines.value(env, seat) for seat in seats_N], dtype=np.float64)
    after = update_role_baselines(baselines, returns, seats_N, env=env, decay=decay)
    return returns - before, after


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
    _check_epsilon(epsilon)
    returns = _finite_1d("returns_G", returns_G)
    _check_lengths("returns", returns, seats_G)
    advantages = np.zeros_like(returns)
    for indices in _indices_by(seats_G).values():
        advantages[indices] = _centre(returns[indices], True, epsilon)
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
    _check_epsilon(epsilon)
    _check_lengths("trajectories' turn returns", turn_returns_G, seats_G)
    returns = [_finite_1d(f"turn_returns_G[{i}]", r) for i, r in enumerate(turn_returns_G)]
    advantages = [np.zeros_like(r) for r in returns]
    keys = [(seat, t) for seat, r in zip(seats_G, returns, strict=True) for t in range(r.size)]
    places = [(i, t) for i, r in enumerate(returns) for t in range(r.size)]
    for members in _indices_by(keys).values():
        cells = [places[m] for m in members]
        values = np.array([returns[i][t] for i, t in cells], dtype=np.float64)
        for (i, t), value in zip(cells, _centre(values, normalize_std, epsilon), strict=True):
            advantages[i][t] = value
    return tuple(advantages)


# ------------------------------------------------------------------ the batch level


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
        _indices_by([(p, seat) for p, seats_G in enumerate(seats_P) for seat in seats_G]),
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
        _indices_by(
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
    _check_epsilon(epsilon)
    if not groups_P:
        raise ValueError("groups_P is empty; assign_credit needs at least one group")
    batch = _Batch(groups_P, env, baselines or RoleBaselines(), normalize_std, epsilon)
    return CREDIT_SCHEMES[scheme](batch)
