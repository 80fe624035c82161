"""Evaluate models in any environment, and rank them by debate (``python -m baselines.eval``).

The command (:mod:`~baselines.eval.__main__`, docs/evaluate.md) plays
episodes with the models you name and prints each model's score with an
interval, its difference to a baseline model, and for a debate of several
models a leaderboard fitted from the debaters' pairwise votes. The modules:

* :mod:`~baselines.eval.entrants`: model specs (``cold=smollm2-135m-instruct@temperature=0.3``,
  ``http://host:8000/v1#model``) and the samplers that play them;
* :mod:`~baselines.eval.seating`: balanced seatings of models over an environment's agents;
* :mod:`~baselines.eval.arenas`: each environment's seats, problems and episodes;
* :mod:`~baselines.eval.run`: :class:`~baselines.eval.run.Evaluation`, which plans,
  plays (resumably) and summarizes; :mod:`~baselines.eval.results`: its results file;
* :mod:`~baselines.eval.scores`: means over problems with bootstrap intervals, paired differences;
* :mod:`~baselines.eval.ratings` (and :mod:`~baselines.eval.bradley_terry`): the
  pairwise votes of debates in which several models sit in mixed seats as a
  Bradley-Terry :class:`Leaderboard` with bootstrap intervals;
* :mod:`~baselines.eval.summary`: all of it as tables and JSON.

Importing this package imports neither torch nor a model.
"""

from __future__ import annotations

from baselines.eval import ratings
from baselines.eval.ratings import *  # noqa: F403

__all__ = ratings.__all__
