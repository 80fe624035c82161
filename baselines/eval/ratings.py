"""Rank models by debate: Bradley-Terry ratings from pairwise judgements, with bootstrap intervals.

A debate tournament seats several models in the seats of
:class:`~llm_envs.debate.env.DebateEnv`; every agent's ``<comparison>`` votes
say which of two other answers is better (or that they tie). Each vote becomes
a :class:`Judgement` between *models* (:func:`judgements_from_votes`), and
:func:`rate_models` turns the judgements of many debates into a
:class:`Leaderboard`. A game without votes (Tic Tac Toe, Kuhn Poker) is judged
by its outcome: every two seats, the higher return wins
(:func:`judgements_from_returns`); its games are the "debates" resampled.

What counts
    * A judgement whose judge is one of the two models compared is dropped and
      counted in ``self_judgements_dropped``. This is the leave-one-out rule of
      the debate reward (:func:`llm_envs.debate.rewards.win_rate`: a vote
      never counts for the side its author is on) lifted from seats to models:
      a model judging a copy of itself in another seat is as interested as an
      agent judging its own answer. The reward still counts such a vote for the
      *other* side; a Bradley-Terry comparison has both sides or none, so here
      it is dropped whole. Hence a tournament of two models rates nothing from
      their own votes: seat a third model, or use an outside judge.
    * A judgement between two seats of the same model says nothing about which
      model is better: dropped and counted in ``same_model_dropped`` (this
      check comes first when both apply).
    * Every other judgement counts, repeats included (an agent votes again in
      later rounds; the debate recipe does not deduplicate, nor does the reward). The
      consensus YES/NO is not a comparison and is not used.

The model
    Bradley-Terry (Bradley and Terry 1952): ``P(i beats j) = 1 / (1 + exp(theta_j -
    theta_i))`` for log-strengths ``theta``, a tie counting as half a win to
    each side (the debate reward's rule). The fit maximizes the likelihood
    ``sum_ij W_ij log P(i beats j)`` (``W_ij``: wins of i over j) by Newton's
    method with step halving: the log-likelihood is concave and minus its
    Hessian is the comparison graph's Laplacian weighted by
    ``N_ij P(i beats j) P(j beats i)`` (``N_ij``: comparisons of i and j).
    Newton rather than the MM iteration of Hunter (2004, "MM algorithms for
    generalized Bradley-Terry models", Ann. Statist. 32(1)): the same maximum,
    but MM slows to thousands of iterations once a model nearly always wins and
    the prior is small, where Newton takes a few dozen steps.

    Prior: every pair of rated models gets ``prior_wins`` virtual wins each way
    (equivalently ``2 * prior_wins`` virtual ties), as if each pair had played
    to a draw before the tournament. It keeps every rating finite (a model that
    always wins has a finite strength), makes the fit unique even when the
    comparisons do not connect all models, and pulls ratings with little data
    towards each other. With two models, ``w`` wins, ``t`` ties and ``l``
    losses, the fit has the closed form
    ``P(first beats second) = (w + t/2 + a) / (w + t + l + 2a)``, ``a = prior_wins``.

    Ratings are on the Elo scale, ``400 * log10(exp(theta_i))`` (:data:`ELO_SCALE`
    times ``theta_i``): a gap of 400 points is 10:1 odds. They have mean 0 over
    the rated models, or are 0 at a named ``anchor`` model.

Intervals
    Votes within one debate are correlated (the same answers, the same judges,
    one vote per round), so the bootstrap resamples whole debates, with
    replacement, from a seeded :class:`numpy.random.Generator`, and refits. The
    interval is the central ``confidence`` percentile interval of the refitted
    ratings, widened where needed to contain the rating itself. With few
    debates the rating can sit at the very edge of the refits: a model that
    lost once to each of three others, in three debates, is rated lowest when
    its losses are spread as they were, and every resample that repeats a
    debate rates it higher; a percentile between two order statistics can then
    step past it, and a rating outside its own interval reads as an error.
    Every refit rates the same models with the same prior, so a model whose
    debates are all left out of a resample keeps a (prior-only) rating.

Shapes in names: ``K`` models, ``D`` debates, ``B`` bootstrap replicates.

This module is pure: no torch, no files, no randomness but the seed given.

Example:
    >>> from llm_envs.judgements import Vote
    >>> seats = ("alpha", "beta", "gamma")  # the model in each agent's seat
    >>> votes = [Vote(2, 0, ">", 1), Vote(1, 0, ">", 2), Vote(0, 1, "=", 2)]
    >>> board = rate_models(judgements_from_votes(votes, seats, debate=0), num_bootstrap=0)
    >>> [(e.model, round(e.rating, 1), e.wins, e.ties, e.losses) for e in board.entries]
    [('alpha', 80.3, 2, 0, 0), ('beta', -40.1, 0, 1, 1), ('gamma', -40.1, 0, 1, 1)]
"""

from __future__ import annotations

import math
import numbers
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Final, TypeAlias

import numpy as np
import numpy.typing as npt

from baselines.eval.bradley_terry import Float64Array, bradley_terry, check_prior
from baselines.eval.scores import check_bootstrap
from llm_envs.judgements import Vote, is_valid_vote

__all__ = [
    "ELO_SCALE",
    "FIRST_WINS",
    "GAME",
    "OUTCOMES",
    "SECOND_WINS",
    "TIE",
    "DebateId",
    "Judgement",
    "Leaderboard",
    "ModelRating",
    "bradley_terry",
    "judgements_from_returns",
    "judgements_from_votes",
    "rate_models",
]

FIRST_WINS: Final = 1.0
"""The outcome of a judgement in which the first model's answer is better."""
TIE: Final = 0.5
"""The outcome of a judgement in which the two answers are as good."""
SECOND_WINS: Final = 0.0
"""The outcome of a judgement in which the second model's answer is better."""
OUTCOMES: Final = (SECOND_WINS, TIE, FIRST_WINS)
"""Every valid :attr:`Judgement.outcome`: the first model's score, a tie counting one half."""

ELO_SCALE: Final = 400.0 / math.log(10.0)
"""Rating points per unit of log-strength: ``rating = ELO_SCALE * theta``, ``400 / ln 10``."""

DebateId: TypeAlias = str | int
"""What names a debate: judgements with the same id are resampled together."""

Int64Array: TypeAlias = npt.NDArray[np.int64]

_REPLICATES_PER_BATCH = 128  # bounds the memory of one batched refit
_TIE_DIGITS = 6  # ratings equal to this many decimals are ordered by name


@dataclass(frozen=True, slots=True)
class Judgement:
    """One pairwise judgement: ``judge`` compared an answer of ``first`` with one of ``second``.

    Attributes:
        debate: The debate it comes from; the bootstrap resamples debates whole.
        judge: The model that judged (for a debate vote, the model in the author's seat).
        first: The model whose answer is the first side.
        second: The model whose answer is the second side.
        outcome: The first model's score: :data:`FIRST_WINS` (``1.0``),
            :data:`TIE` (``0.5``) or :data:`SECOND_WINS` (``0.0``); stored as a float.

    Raises:
        ValueError: If ``outcome`` is none of :data:`OUTCOMES`.
        TypeError: If a model name is not a ``str`` or ``debate`` not a ``str`` or ``int``.
    """

    debate: DebateId
    judge: str
    first: str
    second: str
    outcome: float

    def __post_init__(self) -> None:
        if isinstance(self.debate, bool) or not isinstance(self.debate, str | int):
            raise TypeError(f"debate must be a str or int id, got {self.debate!r}")
        for field in ("judge", "first", "second"):
            name = getattr(self, field)
            if not isinstance(name, str):
                raise TypeError(f"{field} must be a model name (str), got {name!r}")
        outcome = self.outcome
        if (
            isinstance(outcome, bool)
            or not isinstance(outcome, numbers.Real)
            or outcome not in OUTCOMES
        ):
            raise ValueError(
                f"outcome must be 1.0 (first wins), 0.5 (tie) or 0.0 (second wins), got {outcome!r}"
            )
        object.__setattr__(self, "outcome", float(outcome))


@dataclass(frozen=True, slots=True)
class ModelRating:
    """One row of a :class:`Leaderboard`.

    Attributes:
        model: The model's name.
        rating: Its Elo-scale rating (see the module docstring).
        low: The lower end of its bootstrap interval, ``<= rating`` (NaN without a bootstrap).
        high: The upper end of its bootstrap interval, ``>= rating`` (NaN without a bootstrap).
        comparisons: The judgements it took part in that count (``wins + ties + losses``).
        wins: Judgements it won.
        ties: Judgements it tied.
        losses: Judgements it lost.
    """

    model: str
    rating: float
    low: float
    high: float
    comparisons: int
    wins: int
    ties: int
    losses: int


@dataclass(frozen=True, slots=True)
class Leaderboard:
    """The ratings of a tournament, best first, with the vote matrix for a heat map.

    Attributes:
        entries: One row per rated model (a model with at least one judgement
            that counts), by rating, best first; equal ratings by name.
        win_fraction: ``win_fraction[i][j]``: the fraction of judgements
            between ``entries[i]`` and ``entries[j]`` that i won, a tie counting
            one half; NaN on the diagonal and for pairs never compared. No prior.
        comparison_counts: ``comparison_counts[i][j]``: how many judgements
            between ``entries[i]`` and ``entries[j]`` count.
        judgements_used: Judgements that took part in the ratings.
        self_judgements_dropped: Judgements dropped because the judge was one of the two models.
        same_model_dropped: Judgements dropped because both sides were the same model.
        num_debates: Debates with at least one judgement used (what the bootstrap resamples).
        prior_wins: The virtual wins each way per pair of models.
        num_bootstrap: Bootstrap replicates behind the intervals (0: none).
        confidence: The intervals' coverage, e.g. ``0.95``.
        anchor: The model rated 0, or None when ratings have mean 0.
    """

    entries: tuple[ModelRating, ...]
    win_fraction: tuple[tuple[float, ...], ...]
    comparison_counts: tuple[tuple[int, ...], ...]
    judgements_used: int
    self_judgements_dropped: int
    same_model_dropped: int
    num_debates: int
    prior_wins: float
    num_bootstrap: int
    confidence: float
    anchor: str | None

    @property
    def models(self) -> tuple[str, ...]:
        """The rated models, in the order of :attr:`entries` (rows of the matrices)."""
        return tuple(entry.model for entry in self.entries)

    def entry(self, model: str) -> ModelRating:
        """The row of ``model``.

        Raises:
            KeyError: If ``model`` is not rated, naming the rated models.
        """
        for entry in self.entries:
            if entry.model == model:
                return entry
        raise KeyError(f"{model!r} is not rated: the rated models are {list(self.models)}")

    def to_markdown(self) -> str:
        """The leaderboard as a Markdown table: rank, model, rating, interval, comparisons, W/T/L.

        Ratings and interval ends are rounded to whole points; an interval
        without a bootstrap reads ``n/a``. ``|`` in a model name is escaped.

        Example:
            >>> row = ModelRating("m", 12.4, -3.6, 30.0, 5, 3, 1, 1)
            >>> board = Leaderboard((row,), ((math.nan,),), ((0,),), 5, 0, 0, 1, 1.0, 9, 0.95, None)
            >>> print(board.to_markdown())
            | rank | model | rating | 95% interval | comparisons | W/T/L |
            | ---: | --- | ---: | --- | ---: | --- |
            | 1 | m | 12 | [-4, 30] | 5 | 3/1/1 |
        """
        coverage = f"{self.confidence * 100:g}%"
        lines = [
            f"| rank | model | rating | {coverage} interval | comparisons | W/T/L |",
            "| ---: | --- | ---: | --- | ---: | --- |",
        ]
        for rank, e in enumerate(self.entries, start=1):
            interval = (
                "n/a"
                if math.isnan(e.low) or math.isnan(e.high)
                else f"[{_points(e.low)}, {_points(e.high)}]"
            )
            lines.append(
                f"| {rank} | {e.model.replace('|', chr(92) + '|')} | {_points(e.rating)} "
                f"| {interval} | {e.comparisons} | {e.wins}/{e.ties}/{e.losses} |"
            )
        return "\n".join(lines)


def judgements_from_votes(
    votes: Iterable[Vote], seats: Sequence[str], *, debate: DebateId
) -> tuple[Judgement, ...]:
    """The judgements of one debate, from its vote ledger and the model in each seat.

    Vote ``(author, a, op, b)`` becomes ``Judgement(debate, seats[author],
    seats[a], seats[b], outcome)`` with outcome ``1.0`` for ``">"`` and ``0.5``
    for ``"="``. Votes the debate reward counts as malformed
    (:func:`~llm_envs.judgements.is_valid_vote`) and votes whose author
    is no seat are skipped. Nothing is dropped for self-interest here:
    :func:`rate_models` does that, and counts it.

    Args:
        votes: The debate's votes, e.g. :attr:`DebateEnv.votes <llm_envs.debate.env.DebateEnv>`.
        seats: ``seats[i]`` is the model playing agent ``i``.
        debate: The debate's id, shared by all its judgements.

    Raises:
        ValueError: If ``seats`` names fewer than two agents.

    Example:
        >>> judgements_from_votes([Vote(2, 0, "=", 1)], ("a", "b", "c"), debate="q1")
        (Judgement(debate='q1', judge='c', first='a', second='b', outcome=0.5),)
    """
    num_agents = len(seats)
    if num_agents < 2:
        raise ValueError(
            f"seats must name the model of at least two agents, got {list(seats)}: "
            "a debate compares the answers of two or more agents"
        )
    # Looked up as is_valid_vote reads a vote's sides: 1, 1.0 and numpy.int64(1) name seat 1.
    seat_ids: dict[object, int] = {i: i for i in range(num_agents)}
    judgements = []
    for vote in votes:
        if not is_valid_vote(vote, num_agents):
            continue
        author, a, op, b = vote
        try:
            judge = seat_ids.get(author)
        except TypeError:  # an unhashable author names no seat
            judge = None
        if judge is None:
            continue
        judgements.append(
            Judgement(
                debate,
                seats[judge],
                seats[seat_ids[a]],
                seats[seat_ids[b]],
                FIRST_WINS if op == ">" else TIE,
            )
        )
    return tuple(judgements)


GAME: Final = ""
"""The judge of a judgement that a game's outcome made (:func:`judgements_from_returns`):
no model (a model's name is never empty), so none is dropped as self-interested."""


def judgements_from_returns(
    returns: Mapping[str, float], seats: Mapping[str, str], *, debate: DebateId
) -> tuple[Judgement, ...]:
    """The judgements of one game: every two seats, the higher return wins, equal ones tie.

    For a family without votes whose seats compete (a board or card game, a
    game of your own): each pair of agents that acted is one judgement
    between the models in their seats, judged by :data:`GAME`, the rule a
    league rates its pool by. Two seats of one model make a judgement that
    :func:`rate_models` drops (and counts) like any same-model one.

    Args:
        returns: each agent's return in the game.
        seats: each agent's model; only agents with a return take part.
        debate: the game's id (the bootstrap resamples games whole).

    Example:
        >>> judgements_from_returns({"agent_0": 1.0, "agent_1": -1.0},
        ...                         {"agent_0": "a", "agent_1": "b"}, debate=7)
        (Judgement(debate=7, judge='', first='a', second='b', outcome=1.0),)
    """
    agents = [agent for agent in seats if agent in returns]
    judgements = []
    for i, first in enumerate(agents):
        for second in agents[i + 1 :]:
            a, b = float(returns[first]), float(returns[second])
            if math.isnan(a) or math.isnan(b):
                continue
            outcome = FIRST_WINS if a > b else SECOND_WINS if a < b else TIE
            judgements.append(Judgement(debate, GAME, seats[first], seats[second], outcome))
    return tuple(judgements)


def rate_models(
    judgements: Iterable[Judgement],
    *,
    prior_wins: float = 1.0,
    num_bootstrap: int = 1000,
    confidence: float = 0.95,
    seed: int | np.random.Generator = 0,
    anchor: str | None = None,
) -> Leaderboard:
    """Rate models by the Bradley-Terry fit of pairwise judgements, with bootstrap intervals.

    The rules (what is dropped, the prior, the scale, the bootstrap) are in the
    module docstring. The result does not depend on the order of
    ``judgements``, and renaming models renames the rows.

    Args:
        judgements: Judgements from any number of debates.
        prior_wins: Virtual wins each way per pair of rated models; ``> 0``.
        num_bootstrap: Debate resamples behind the intervals; ``0`` skips the
            bootstrap (intervals are NaN).
        confidence: The intervals' coverage, in ``(0, 1)``.
        seed: Seeds a fresh :func:`numpy.random.default_rng`; a Generator given
            here is used (and advanced) as it is.
        anchor: A model whose rating is 0 (in every replicate too); None gives
            ratings mean 0.

    Returns:
        The leaderboard; empty (no entries) when no judgement counts.

    Raises:
        ValueError: On an argument out of range, or an ``anchor`` that is not rated.
        TypeError: If an item of ``judgements`` is not a :class:`Judgement`.

    Example:
        >>> js = [Judgement(d, "ref", "a", "b", FIRST_WINS) for d in range(3)]
        >>> js += [Judgement(0, "a", "a", "b", FIRST_WINS), Judgement(1, "ref", "b", "b", TIE)]
        >>> board = rate_models(js, num_bootstrap=200, seed=1)
        >>> board.models, board.self_judgements_dropped, board.same_model_dropped
        (('a', 'b'), 1, 1)
        >>> a = board.entry("a")  # P(a beats b) = (3 + 1) / (3 + 2) = 0.8: 4:1 odds, 241 points
        >>> round(a.rating - board.entry("b").rating, 1), a.low <= a.rating <= a.high
        (240.8, True)
    """
    _check_arguments(prior_wins, num_bootstrap, confidence)
    kept, self_dropped, same_dropped = _informative(judgements)

    # Models and debates in a canonical order, so that the input's order never matters.
    models = sorted({j.first for j in kept} | {j.second for j in kept})
    debates = sorted({j.debate for j in kept}, key=_debate_order)
    if anchor is not None and anchor not in models:
        raise ValueError(f"anchor {anchor!r} is not rated: the rated models are {models}")
    model_index = {model: i for i, model in enumerate(models)}
    debate_index = {debate: d for d, debate in enumerate(debates)}
    num_models = len(models)
    anchor_index = None if anchor is None else model_index[anchor]

    half_wins, wins_KK, ties_KK = _tally(kept, model_index, debate_index)
    # The same as sparse entries E (sorted, so that the order of judgements never matters).
    cells = sorted(half_wins)
    debate_E = np.array([d for d, _, _ in cells], dtype=np.int64)
    cell_E = np.array([i * num_models + j for _, i, j in cells], dtype=np.int64)
    half_wins_E = np.array([half_wins[cell] for cell in cells], dtype=np.int64)

    half_wins_KK = wins_KK * 2 + ties_KK
    ratings_K = _ratings(half_wins_KK[None] / 2.0, prior_wins, anchor_index)[0]
    low_K = high_K = np.full(num_models, math.nan)
    if num_bootstrap > 0 and num_models > 0:
        replicates_BK = _bootstrap(
            (debate_E, cell_E, half_wins_E),
            num_models,
            len(debates),
            num_bootstrap=num_bootstrap,
            seed=seed,
            prior_wins=prior_wins,
            anchor_index=anchor_index,
        )
        tail = 50.0 * (1.0 - confidence)
        low_K, high_K = np.percentile(replicates_BK, [tail, 100.0 - tail], axis=0)
        # Widened to contain the rating itself (see "Intervals" in the module docstring).
        low_K = np.minimum(low_K, ratings_K)
        high_K = np.maximum(high_K, ratings_K)

    order = sorted(range(num_models), key=lambda i: (-round(ratings_K[i], _TIE_DIGITS), models[i]))
    comparisons_KK = wins_KK + wins_KK.T + ties_KK
    entries = tuple(
        ModelRating(
            model=models[i],
            rating=float(ratings_K[i]),
            low=float(low_K[i]),
            high=float(high_K[i]),
            comparisons=int(comparisons_KK[i].sum()),
            wins=int(wins_KK[i].sum()),
            ties=int(ties_KK[i].sum()),
            losses=int(wins_KK[:, i].sum()),
        )
        for i in order
    )
    win_fraction = tuple(
        tuple(
            float(half_wins_KK[i, j] / (2 * comparisons_KK[i, j]))
            if comparisons_KK[i, j]
            else math.nan
            for j in order
        )
        for i in order
    )
    counts = tuple(tuple(int(comparisons_KK[i, j]) for j in order) for i in order)
    return Leaderboard(
        entries=entries,
        win_fraction=win_fraction,
        comparison_counts=counts,
        judgements_used=len(kept),
        self_judgements_dropped=self_dropped,
        same_model_dropped=same_dropped,
        num_debates=len(debates),
        prior_wins=float(prior_wins),
        num_bootstrap=num_bootstrap,
        confidence=float(confidence),
        anchor=anchor,
    )


def _ratings(wins_BKK: Float64Array, prior_wins: float, anchor_index: int | None) -> Float64Array:
    """``ratings_BK`` on the Elo scale, mean 0 or 0 at ``anchor_index``."""
    ratings = ELO_SCALE * bradley_terry(wins_BKK, prior_wins)
    if anchor_index is not None:
        ratings = ratings - ratings[..., anchor_index : anchor_index + 1]
    return ratings


def _bootstrap(
    entries: tuple[Int64Array, Int64Array, Int64Array],
    num_models: int,
    num_debates: int,
    *,
    num_bootstrap: int,
    seed: int | np.random.Generator,
    prior_wins: float,
    anchor_index: int | None,
) -> Float64Array:
    """``ratings_BK`` refitted on debates resampled with replacement.

    ``entries`` is ``(debate_E, cell_E, half_wins_E)``: debate ``debate_E[e]``
    holds ``half_wins_E[e]`` half-wins in cell ``cell_E[e] = i * K + j`` of the
    wins matrix.
    """
    debate_E, cell_E, half_wins_E = entries
    rng = seed if isinstance(seed, np.random.Generator) else np.random.default_rng(seed)
    uniform_D = np.full(num_debates, 1.0 / num_debates)
    batches = []
    for start in range(0, num_bootstrap, _REPLICATES_PER_BATCH):
        size = min(_REPLICATES_PER_BATCH, num_bootstrap - start)
        # counts_BD[b, d]: how often debate d is drawn in replicate b.
        counts_BD = rng.multinomial(num_debates, uniform_D, size=size)
        wins_BKK = np.stack(
            [
                np.bincount(cell_E, counts_D[debate_E] * half_wins_E, num_models * num_models)
                for counts_D in counts_BD
            ]
        ).reshape(size, num_models, num_models)
        batches.append(_ratings(wins_BKK / 2.0, prior_wins, anchor_index))
    return np.concatenate(batches)


def _debate_order(debate: DebateId) -> tuple[int, int, str]:
    """A total order on debate ids: ints first, by value, then strs."""
    return (1, 0, debate) if isinstance(debate, str) else (0, debate, "")


def _points(rating: float) -> str:
    """A rating rounded to whole points, never ``-0``."""
    return str(round(rating))


def _informative(judgements: Iterable[Judgement]) -> tuple[list[Judgement], int, int]:
    """The judgements that rate models, and the counts of self- and same-model ones dropped."""
    kept: list[Judgement] = []
    self_dropped = same_dropped = 0
    for judgement in judgements:
        if not isinstance(judgement, Judgement):
            raise TypeError(
                f"judgements must be Judgement objects, got {judgement!r}: "
                "build them with Judgement(...) or judgements_from_votes"
            )
        if judgement.first == judgement.second:
            same_dropped += 1
        elif judgement.judge in (judgement.first, judgement.second):
            self_dropped += 1
        else:
            kept.append(judgement)
    return kept, self_dropped, same_dropped


def _tally(
    kept: Sequence[Judgement], model_index: Mapping[str, int], debate_index: Mapping[DebateId, int]
) -> tuple[Counter[tuple[int, int, int]], Int64Array, Int64Array]:
    """Half-wins per (debate, model, model), and the win and tie matrices over all debates.

    Half-wins (2 per win, 1 per tie) keep every count an exact integer:
    ``half_wins[(d, i, j)]`` is model i's half-wins over model j in debate d.
    """
    num_models = len(model_index)
    half_wins: Counter[tuple[int, int, int]] = Counter()
    wins_KK = np.zeros((num_models, num_models), dtype=np.int64)
    ties_KK = np.zeros((num_models, num_models), dtype=np.int64)
    for j in kept:
        d, a, b = debate_index[j.debate], model_index[j.first], model_index[j.second]
        if j.outcome == TIE:
            half_wins[d, a, b] += 1
            half_wins[d, b, a] += 1
            ties_KK[a, b] += 1
            ties_KK[b, a] += 1
        else:
            winner, loser = (a, b) if j.outcome == FIRST_WINS else (b, a)
            half_wins[d, winner, loser] += 2
            wins_KK[winner, loser] += 1
    return half_wins, wins_KK, ties_KK


def _check_arguments(prior_wins: float, num_bootstrap: int, confidence: float) -> None:
    check_prior(prior_wins)
    check_bootstrap(num_bootstrap, confidence)
