"""``role_baseline``'s running baselines: the state value, its update and JSON round trip.

See :mod:`baselines.data.credit` for the scheme (SPIRAL's role-conditioned
advantage estimation).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final

import numpy as np

from baselines.data.credit._common import Float64Array, check_lengths, finite_1d

__all__ = [
    "ROLE_BASELINE_DECAY",
    "RoleBaselines",
    "role_baseline_advantages",
    "update_role_baselines",
]

ROLE_BASELINE_DECAY: Final = 0.95
"""The decay of ``role_baseline``'s EMA per return folded in (SPIRAL's ``role_baseline_ema_gamma``).

A return seen n returns ago weighs ``decay**n``: after 45 returns of a seat
its weight is below 0.1, after 90 below 0.01.
"""


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
            batch = finite_1d(f"returns of seat {seat!r}", returns)
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
    returns = finite_1d("returns_N", returns_N)
    check_lengths("returns", returns, seats_N)
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
    returns = finite_1d("returns_N", returns_N)
    check_lengths("returns", returns, seats_N)
    before = np.array([baselines.value(env, seat) for seat in seats_N], dtype=np.float64)
    after = update_role_baselines(baselines, returns, seats_N, env=env, decay=decay)
    return returns - before, after
