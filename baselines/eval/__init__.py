"""Evaluate models against each other: ratings from debate tournaments.

:mod:`~baselines.eval.ratings` turns the pairwise votes of debates in which
several models sit in mixed seats into a Bradley-Terry :class:`Leaderboard`
with bootstrap intervals. Nothing here imports torch.
"""

from __future__ import annotations

from baselines.eval.ratings import (
    ELO_SCALE,
    FIRST_WINS,
    OUTCOMES,
    SECOND_WINS,
    TIE,
    DebateId,
    Judgement,
    Leaderboard,
    ModelRating,
    bradley_terry,
    judgements_from_votes,
    rate_models,
)

__all__ = [
    "ELO_SCALE",
    "FIRST_WINS",
    "OUTCOMES",
    "SECOND_WINS",
    "TIE",
    "DebateId",
    "Judgement",
    "Leaderboard",
    "ModelRating",
    "bradley_terry",
    "judgements_from_votes",
    "rate_models",
]
