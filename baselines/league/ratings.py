"""Online ratings of a league: the learner against each opponent, from the games the run plays.

Every game the learner plays against an opponent adds to a tally of wins
each way (a tie is half a win to each); before each iteration's tallies are
added the old ones are multiplied by ``decay``, so the ratings follow a
learner that changes (a decay of 1 keeps every game alike). The ratings are
the evaluator's Bradley-Terry fit (:func:`baselines.eval.bradley_terry.bradley_terry`)
of those tallies, on the Elo scale, with ``prior_wins`` virtual wins each way
between every pair: an opponent not yet met stands level with the learner.

Pure Python and numpy; the state is plain JSON for the checkpoint.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from baselines.eval.bradley_terry import bradley_terry, check_prior
from baselines.eval.ratings import ELO_SCALE

__all__ = ["LEARNER", "LeagueRatings", "game_score"]

LEARNER = "learner"
"""The name of the trained policy in a league's ratings."""


def game_score(learner_return: float, opponent_return: float) -> float:
    """The learner's score against one opponent seat: 1 a win, 0.5 a tie, 0 a loss.

    A game is won by the higher return: in a game the winner's payoff, in a
    debate the answer the votes prefer (returns are leave-one-out win rates).

    Example:
        >>> game_score(1.0, -1.0), game_score(0.0, 0.0), game_score(0.25, 0.75)
        (1.0, 0.5, 0.0)
    """
    if math.isnan(learner_return) or math.isnan(opponent_return):
        raise ValueError(f"a return is NaN: {learner_return!r} vs {opponent_return!r}")
    if learner_return > opponent_return:
        return 1.0
    return 0.5 if learner_return == opponent_return else 0.0


@dataclass
class LeagueRatings:
    """The learner's decayed tallies against each opponent, and their Bradley-Terry ratings.

    Attributes:
        decay: what the tallies are multiplied by before each iteration's games.
        prior_wins: virtual wins each way between every pair (> 0).
        tallies: ``opponent -> [learner's wins, opponent's wins]``.
    """

    decay: float = 0.9
    prior_wins: float = 1.0
    tallies: dict[str, list[float]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        check_prior(self.prior_wins)
        if not 0.0 < self.decay <= 1.0:
            raise ValueError(f"rating decay is in (0, 1], got {self.decay!r}")

    def add_iteration(self, games: Iterable[tuple[str, float]], opponents: Iterable[str]) -> None:
        """Decay the tallies, then add one iteration's ``(opponent, learner's score)`` games.

        ``opponents`` is the pool: each gets a tally (zero where it is new).
        """
        for tally in self.tallies.values():
            tally[0] *= self.decay
            tally[1] *= self.decay
        for name in opponents:
            self.tallies.setdefault(name, [0.0, 0.0])
        for name, score in games:
            if not 0.0 <= score <= 1.0:
                raise ValueError(f"a game's score is in [0, 1], got {score!r} against {name}")
            tally = self.tallies.setdefault(name, [0.0, 0.0])
            tally[0] += score
            tally[1] += 1.0 - score

    def forget(self, name: str) -> None:
        """Drop an opponent that left the pool."""
        self.tallies.pop(name, None)

    def ratings(self) -> dict[str, float]:
        """Elo ratings of the learner and every opponent, mean 0 over them.

        Example:
            >>> r = LeagueRatings(decay=1.0, prior_wins=1.0)
            >>> r.add_iteration([("a", 1.0)] * 3, ["a"])
            >>> round(r.win_probability()["a"], 3)  # (3 + 1) / (3 + 2) against the prior's pull
            0.8
        """
        names = [LEARNER, *self.tallies]
        wins = np.zeros((len(names), len(names)))
        for k, name in enumerate(names[1:], start=1):
            wins[0, k], wins[k, 0] = self.tallies[name]
        theta = bradley_terry(wins, self.prior_wins)
        return {name: float(ELO_SCALE * t) for name, t in zip(names, theta, strict=True)}

    def win_probability(self) -> dict[str, float]:
        """The learner's probability of beating each opponent, from the ratings."""
        ratings = self.ratings()
        mine = ratings.pop(LEARNER)
        return {name: 1.0 / (1.0 + math.exp((r - mine) / ELO_SCALE)) for name, r in ratings.items()}

    def to_json(self) -> dict[str, Any]:
        """The state, for a checkpoint."""
        return {"decay": self.decay, "prior_wins": self.prior_wins, "tallies": self.tallies}

    @classmethod
    def from_json(cls, state: Mapping[str, Any]) -> LeagueRatings:
        """The ratings :meth:`to_json` saved."""
        tallies = {str(k): [float(v[0]), float(v[1])] for k, v in state["tallies"].items()}
        return cls(float(state["decay"]), float(state["prior_wins"]), tallies)
