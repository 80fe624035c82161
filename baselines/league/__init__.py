"""League self-play: a pool of opponents, their online ratings, and matchmaking.

* :mod:`baselines.league.matchmaking`: which opponent a group meets (PFSP,
  uniform, latest), pure functions of the ratings.
* :mod:`baselines.league.ratings`: the learner's Bradley-Terry ratings
  against the pool, updated online from the games the run plays.
* :mod:`baselines.league.pool`: the pool (the current policy, anchors,
  snapshots) and the whole league state a checkpoint holds.
* :mod:`baselines.league.episodes`: an iteration's episodes, the learner in
  one seat and the group's opponent in the others.

Nothing here imports torch or loads a model (docs/league.md).
"""

from __future__ import annotations

from baselines.league.episodes import LeagueBatch, league_batch, learner_seat
from baselines.league.matchmaking import choose, matchmaking_probabilities, pfsp_weight
from baselines.league.pool import LATEST, League, Opponent, parse_anchor
from baselines.league.ratings import LEARNER, LeagueRatings, game_score

__all__ = [
    "LATEST",
    "LEARNER",
    "League",
    "LeagueBatch",
    "LeagueRatings",
    "Opponent",
    "choose",
    "game_score",
    "league_batch",
    "learner_seat",
    "matchmaking_probabilities",
    "parse_anchor",
    "pfsp_weight",
]
