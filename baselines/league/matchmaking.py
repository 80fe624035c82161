"""Matchmaking: which opponent each training group of a league run meets.

Pure functions of the league's ratings, so that a group's opponent depends
only on the run's seed, the iteration, the group and the league's state (a
resumed run meets the same opponents).

* ``latest``: the current policy only (mirror self-play).
* ``uniform``: every opponent of the pool alike.
* ``anchors``: the anchors alone, alike: training against fixed opponents
  (``--league-anchors scripted:random``: the random player, and nothing else).
* ``pfsp``: prioritized fictitious self-play (Vinyals et al., 2019,
  "Grandmaster level in StarCraft II", the AlphaStar league): opponent ``o``
  is drawn with probability proportional to ``f(p_o)``, where ``p_o`` is the
  learner's current probability of beating ``o``. ``hard`` weighting,
  ``f(p) = (1 - p) ** power``, favours the opponents the learner still loses
  to; ``variance``, ``f(p) = p * (1 - p)``, favours the even matches. Where
  every weight is 0 (the learner beats everyone for sure) the draw is uniform.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Final, Literal

import numpy as np

__all__ = [
    "MATCHMAKINGS",
    "PFSP_WEIGHTINGS",
    "Matchmaking",
    "PFSPWeighting",
    "choose",
    "matchmaking_probabilities",
    "pfsp_weight",
]

Matchmaking = Literal["pfsp", "uniform", "latest", "anchors"]
PFSPWeighting = Literal["hard", "variance"]
MATCHMAKINGS: Final = ("pfsp", "uniform", "latest", "anchors")
PFSP_WEIGHTINGS: Final = ("hard", "variance")


def pfsp_weight(p: float, weighting: PFSPWeighting = "hard", power: float = 2.0) -> float:
    """PFSP's weight of an opponent the learner beats with probability ``p``.

    Example:
        >>> pfsp_weight(0.25), pfsp_weight(0.5, "variance"), pfsp_weight(1.0)
        (0.5625, 0.25, 0.0)
    """
    if not 0.0 <= p <= 1.0 or math.isnan(p):
        raise ValueError(f"a win probability is in [0, 1], got {p!r}")
    if weighting == "hard":
        return float((1.0 - p) ** power)
    if weighting == "variance":
        return float(p * (1.0 - p))
    raise ValueError(f"unknown PFSP weighting {weighting!r}; choose one of {PFSP_WEIGHTINGS}")


def matchmaking_probabilities(
    mode: Matchmaking,
    opponents: Sequence[str],
    win_probability: Mapping[str, float],
    *,
    latest: str = "latest",
    anchors: Sequence[str] = (),
    weighting: PFSPWeighting = "hard",
    power: float = 2.0,
) -> dict[str, float]:
    """The probability of meeting each opponent; they add up to 1.

    Args:
        mode: ``pfsp``, ``uniform``, ``latest`` or ``anchors`` (see the module docstring).
        opponents: the pool, in a fixed order; ``latest`` must be one of them
            for ``mode='latest'``.
        win_probability: the learner's probability of beating each opponent
            (``pfsp`` only; a missing one counts as 0.5, an even match).
        latest: the name of the current policy in ``opponents``.
        anchors: the names of the fixed opponents in ``opponents`` (``anchors`` only).
        weighting: PFSP's weighting function, ``hard`` or ``variance``.
        power: the exponent of ``hard`` weighting.

    Raises:
        ValueError: an empty pool, an unknown mode, ``latest`` missing from it, or
            ``anchors`` with no anchor in it.

    Example:
        >>> matchmaking_probabilities("pfsp", ["a", "b"], {"a": 0.5, "b": 1.0})
        {'a': 1.0, 'b': 0.0}
    """
    if not opponents:
        raise ValueError("the opponent pool is empty: a league needs at least one opponent")
    if mode == "latest":
        if latest not in opponents:
            raise ValueError(f"matchmaking 'latest' needs {latest!r} in the pool {list(opponents)}")
        return {o: float(o == latest) for o in opponents}
    if mode == "uniform":
        return {o: 1.0 / len(opponents) for o in opponents}
    if mode == "anchors":
        fixed = [o for o in opponents if o in set(anchors)]
        if not fixed:
            raise ValueError(
                f"matchmaking 'anchors' needs an anchor in the pool {list(opponents)}; "
                "name one with --league-anchors (e.g. scripted:random)"
            )
        return {o: float(o in fixed) / len(fixed) for o in opponents}
    if mode != "pfsp":
        raise ValueError(f"unknown matchmaking {mode!r}; choose one of {MATCHMAKINGS}")
    weights = [pfsp_weight(win_probability.get(o, 0.5), weighting, power) for o in opponents]
    total = sum(weights)
    if total <= 0.0:
        return {o: 1.0 / len(opponents) for o in opponents}
    return {o: w / total for o, w in zip(opponents, weights, strict=True)}


def choose(probabilities: Mapping[str, float], seed: int) -> str:
    """One opponent drawn from ``probabilities`` with a generator seeded by ``seed``.

    Example:
        >>> choose({"a": 0.0, "b": 1.0}, seed=3)
        'b'
    """
    names = list(probabilities)
    p = np.asarray([probabilities[n] for n in names], dtype=np.float64)
    index = int(np.random.default_rng(seed).choice(len(names), p=p / p.sum()))
    return names[index]
