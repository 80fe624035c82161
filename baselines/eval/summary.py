"""From results lines to what an evaluation reports: scores, differences, debate ratings.

Everything here is a pure function of the lines of ``episodes/eval.jsonl``
(:func:`baselines.eval.results.episode_line`) and the settings, so a summary
can be recomputed from a results file at any time.

Per model (:class:`ModelScore`)
    Its *score* is what it earned: per problem, the mean return of every seat
    it played in that problem's episodes; the mean over problems with a
    bootstrap interval (:func:`baselines.eval.scores.mean_with_interval`). Next
    to it, the mean of each numeric outcome of its last turns (``solution_correct``,
    ``correct``, ``pass_rate``...), the share of its turns with a parse error,
    and the paired difference to the baseline model on the problems both played
    (:func:`~baselines.eval.scores.paired_difference`): the before/after check
    of a training run.

Tournaments (:class:`Tournament`)
    The vote ledgers of the debates become judgements between models
    (:func:`~baselines.eval.ratings.judgements_from_votes`) and Bradley-Terry
    ratings with bootstrap intervals over debates
    (:func:`~baselines.eval.ratings.rate_models`, which drops self- and
    same-model judgements). A model no counted judgement compares is *unrated*:
    it is listed after the rated ones without a rank (no vote places it among
    them; a model that alone follows the contract judges the others and is
    never judged), ordered by the share of correct final solutions, then of
    outputs that state the right answer at all (``answer_in_text``), then by
    fewer parse errors, and the table says so. When no model is rated, those
    columns give the ranks.
    A model that never follows the debate's XML contract casts no vote and
    gives no answer to vote on: its place comes from those columns.

    A family without votes whose seats compete (no team reward: a board or card
    game, a game of your own) is rated the same way from its outcomes: every
    two seats of an episode with two models is a judgement, the higher return
    winning (:func:`~baselines.eval.ratings.judgements_from_returns`, the
    rule a league rates its pool by); its matrix is the cross-play matrix.
"""

from __future__ import annotations

import dataclasses
import math
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from baselines.eval.ratings import (
    FIRST_WINS,
    TIE,
    Judgement,
    Leaderboard,
    judgements_from_returns,
    judgements_from_votes,
    rate_models,
)
from baselines.eval.scores import Estimate, format_estimate, mean_with_interval, paired_difference
from llm_envs.capabilities import TeamReward, provides
from llm_envs.judgements import Vote, is_valid_vote, lower_seat_wins
from llm_envs.registration import family_class, is_family, metric_title

__all__ = [
    "EvalSummary",
    "ModelScore",
    "Tournament",
    "TournamentRow",
    "summarize",
    "unjudged_pairs",
]


@dataclass(frozen=True)
class ModelScore:
    """One model's results.

    Attributes:
        model: Its name.
        episodes: Episodes it played in.
        seats_played: ``(episode, seat)`` pairs it played.
        score: Its mean score over problems, with an interval.
        per_problem: Problem -> its score on that problem (what the difference pairs).
        metrics: Metric -> its mean over the seats it played.
        turn_parse_error: The share of its turns that were parse errors (NaN: no turn, or
            an environment without parse errors).
        difference: Its score minus the baseline's, paired by problem (None for the baseline).
    """

    model: str
    episodes: int
    seats_played: int
    score: Estimate
    per_problem: dict[int, float]
    metrics: dict[str, float]
    turn_parse_error: float
    difference: Estimate | None


@dataclass(frozen=True)
class TournamentRow:
    """One model's row in a debate tournament's table.

    Attributes:
        model: Its name.
        rating: Its Bradley-Terry rating (Elo scale), None when unrated.
        low: The lower end of its interval (NaN: none).
        high: The upper end (NaN: none).
        comparisons: Judgements it took part in that count.
        wins: Judgements it won.
        ties: Judgements it tied.
        losses: Judgements it lost.
        votes_cast: Valid votes its seats wrote (all of them, counted or not).
    """

    model: str
    rating: float | None
    low: float
    high: float
    comparisons: int
    wins: int
    ties: int
    losses: int
    votes_cast: int


@dataclass(frozen=True)
class Tournament:
    """A tournament's ratings in table order: a debate's from its votes, a game's from outcomes.

    Attributes:
        rows: Rated models by rating, then unrated ones (module docstring).
        ranks: The rank of each row: 1, 2, ...; unrated models that no column
            tells apart share a rank. When some models are rated, the unrated
            ones have no rank (0, shown as ``-``): nothing places them on the
            rating scale, so listing them last would be a verdict no vote gave.
        leaderboard: The ratings (:func:`~baselines.eval.ratings.rate_models`).
        votes_total: Valid votes in all the debates (0 in a game).
        seat_order: Of the valid strict votes (``a > b``), how many put the
            lower-numbered seat first, and how many there were
            (:func:`~llm_envs.judgements.lower_seat_wins`); in a game, of the
            decided pairings of two models, how many the lower-numbered seat won.
        judged_by: ``"votes"`` (a debate's judgements) or ``"outcomes"`` (a
            game's: every two seats, the higher return wins,
            :func:`~baselines.eval.ratings.judgements_from_returns`).
    """

    rows: tuple[TournamentRow, ...]
    ranks: tuple[int, ...]
    leaderboard: Leaderboard
    votes_total: int
    seat_order: tuple[int, int]
    judged_by: str = "votes"


@dataclass(frozen=True)
class EvalSummary:
    """What an evaluation found.

    Attributes:
        env: The environment.
        models: Every model, in the order given.
        baseline: The model the others are compared with.
        num_episodes: Episodes summarized.
        num_problems: Distinct problems among them.
        scores: One :class:`ModelScore` per model, in the order given.
        tournament: The ratings of a debate with models mixed in its seats, else None.
        headline: The metrics the tables show.
    """

    env: str
    models: tuple[str, ...]
    baseline: str
    num_episodes: int
    num_problems: int
    scores: tuple[ModelScore, ...]
    tournament: Tournament | None
    headline: tuple[str, ...] = field(default=())

    def score(self, model: str) -> ModelScore:
        """The :class:`ModelScore` of ``model``.

        Raises:
            KeyError: naming the models.
        """
        for s in self.scores:
            if s.model == model:
                return s
        raise KeyError(f"{model!r} is not evaluated: the models are {list(self.models)}")

    def scores_markdown(self) -> str:
        """The scores side by side: mean and interval, the paired difference to the baseline."""
        confidence = self.scores[0].score.confidence if self.scores else 0.95
        coverage = f"{confidence * 100:g}%"
        head = [
            "model",
            "episodes",
            f"score [{coverage} interval]",
            f"minus {self.baseline} [{coverage} interval]",
            *(metric_title(self.env, m) for m in self.headline),
            "parse errors",
        ]
        lines = [_row(head), _row(["---", "---:", "---", "---", *["---:"] * (len(head) - 4)])]
        for s in self.scores:
            difference = "(baseline)" if s.difference is None else format_estimate(s.difference)
            lines.append(
                _row(
                    [
                        _escape(s.model),
                        str(s.episodes),
                        format_estimate(s.score),
                        difference,
                        *(_rate(s.metrics.get(m, math.nan)) for m in self.headline),
                        _rate(s.turn_parse_error),
                    ]
                )
            )
        return "\n".join(lines)

    def tournament_markdown(self) -> str:
        """The leaderboard: ratings, intervals, W/T/L, votes (a debate's), parse errors, metrics."""
        if self.tournament is None:
            return ""
        board = self.tournament.leaderboard
        coverage = f"{board.confidence * 100:g}%"
        votes = self.tournament.judged_by == "votes"
        head = [
            "rank",
            "model",
            "rating",
            f"{coverage} interval",
            "W/T/L",
            *(["votes cast"] if votes else []),
            "parse errors",
            *(metric_title(self.env, m) for m in self.headline),
        ]
        lines = [
            _row(head),
            _row(["---:", "---", "---:", "---", "---", *["---:"] * (len(head) - 5)]),
        ]
        for rank, row in zip(self.tournament.ranks, self.tournament.rows, strict=True):
            s = self.score(row.model)
            rated = row.rating is not None
            interval = (
                f"[{round(row.low)}, {round(row.high)}]"
                if rated and not math.isnan(row.low)
                else ("n/a" if rated else "-")
            )
            lines.append(
                _row(
                    [
                        str(rank) if rank else "-",
                        _escape(row.model),
                        str(round(row.rating)) if row.rating is not None else "unrated",
                        interval,
                        f"{row.wins}/{row.ties}/{row.losses}",
                        *([str(row.votes_cast)] if votes else []),
                        _rate(s.turn_parse_error),
                        *(_rate(s.metrics.get(m, math.nan)) for m in self.headline),
                    ]
                )
            )
        return "\n".join(lines)

    def ranking_basis(self) -> str:
        """One line above the tournament table: what its ranking rests on."""
        if self.tournament is None or not self.tournament.rows:
            return ""
        rows = self.tournament.rows
        unrated = sum(r.rating is None for r in rows)
        if unrated == len(rows):
            return (
                "No judgement compares two models, so no model is rated: ranked by correct "
                "solutions, then answers stated in the text, then fewer parse errors."
            )
        used = self.tournament.leaderboard.judgements_used
        line = f"Ranked by Bradley-Terry ratings (Elo scale) from {used} judgements"
        if self.tournament.judged_by == "outcomes":
            line = (
                f"Ranked by Bradley-Terry ratings (Elo scale) from {used} games between two "
                "models (the higher return wins, equal returns tie)"
            )
        if unrated:
            models = "model" if unrated == 1 else "models"
            line += f"; {unrated} unrated {models} listed after them, without a rank"
        return line + "."

    def tournament_notes(self) -> list[str]:
        """What the tournament table needs said: dropped judgements, unrated models."""
        if self.tournament is None:
            return []
        if self.tournament.judged_by == "outcomes":
            return self._game_notes()
        board = self.tournament.leaderboard
        notes = [
            f"{self.tournament.votes_total} valid votes in {self.num_episodes} debates; "
            f"{board.judgements_used} judgements rate models, "
            f"{board.self_judgements_dropped} dropped (the judge is one of the two models), "
            f"{board.same_model_dropped} dropped (both sides are the same model)."
        ]
        lower, strict = self.tournament.seat_order
        if strict:
            notes.append(
                f"{lower} of {strict} strict votes ({lower / strict:.0%}) put the "
                "lower-numbered seat first. Every model sits in every seat equally often, so "
                "judges that read the answers put it first about half the time; far from half, "
                "the votes follow the seats, and the ratings with them."
            )
        unjudged = unjudged_pairs(board.models, board.comparison_counts)
        if unjudged:
            pairs = ", ".join(f"{a} and {b}" for a, b in unjudged)
            notes.append(
                f"Never judged against each other: {pairs}. Only a third model's vote "
                "judges a pair, and none was cast; such a pair's order comes only from each "
                "model's record against the others, not from a comparison."
            )
        unrated = [r.model for r in self.tournament.rows if r.rating is None]
        if unrated and len(unrated) < len(self.tournament.rows):
            notes.append(
                f"Unrated (no counted judgement compares them): {', '.join(unrated)}; listed "
                "after the rated models without a rank, since no vote places them among "
                "them: compare their votes cast, parse errors and correctness instead. A model "
                "that alone follows the contract judges the others and is never judged."
            )
        elif unrated:
            notes.append(
                f"Unrated (no counted judgement compares them): {', '.join(unrated)}; ranked "
                "by correct solutions, then answers stated in the text, then fewer parse "
                "errors; models those columns do not tell apart share a rank."
            )
        return notes

    def _game_notes(self) -> list[str]:
        """The notes of a game's tournament: what counts, the seat's advantage, who never met."""
        assert self.tournament is not None
        board = self.tournament.leaderboard
        notes = [
            f"{self.num_episodes} games; {board.judgements_used} pairs of seats with two "
            f"models rate them, {board.same_model_dropped} dropped (both seats the same model)."
        ]
        lower, decided = self.tournament.seat_order
        if decided:
            notes.append(
                f"The lower-numbered seat won {lower} of the {decided} decided games "
                f"({lower / decided:.0%}); far from half, one seat has the advantage (moving "
                "first, or second), which every model shares when it sits in every seat "
                "equally often."
            )
        unmet = unjudged_pairs(board.models, board.comparison_counts)
        if unmet:
            pairs = ", ".join(f"{a} and {b}" for a, b in unmet)
            notes.append(
                f"Never met: {pairs}; their order comes only from each one's games against "
                "the others (--seating rotations meets every pair)."
            )
        unrated = [r.model for r in self.tournament.rows if r.rating is None]
        if unrated:
            notes.append(f"Unrated (never played another model): {', '.join(unrated)}.")
        return notes

    def matrix_markdown(self) -> str:
        """The vote matrix: row model's share of its judgements against the column model."""
        if self.tournament is None or not self.tournament.leaderboard.entries:
            return ""
        board = self.tournament.leaderboard
        models = board.models
        lines = [_row(["wins of row over column", *map(_escape, models)])]
        lines.append(_row(["---", *["---:"] * len(models)]))
        for i, model in enumerate(models):
            cells = [
                ""
                if i == j
                else f"{_rate(board.win_fraction[i][j])} ({board.comparison_counts[i][j]})"
                for j in range(len(models))
            ]
            lines.append(_row([_escape(model), *cells]))
        return "\n".join(lines)

    def to_text(self) -> str:
        """Every table, as the command prints them."""
        parts = [
            f"{self.env}: {len(self.models)} models, {self.num_episodes} episodes on "
            f"{self.num_problems} problems",
            "",
            self.scores_markdown(),
        ]
        if self.tournament is not None:
            parts += ["", self.ranking_basis(), "", self.tournament_markdown()]
            parts += ["", *self.tournament_notes()]
            matrix = self.matrix_markdown()
            if matrix and self.tournament.judged_by == "outcomes":
                parts += ["", "Cross-play matrix (games in brackets):", "", matrix]
            elif matrix:
                parts += ["", "Vote matrix (judgements in brackets):", "", matrix]
        return "\n".join(parts)

    def to_json(self) -> dict[str, Any]:
        """Everything as JSON values (``summary.json``; NaN becomes None)."""
        out: dict[str, Any] = {
            "env": self.env,
            "models": list(self.models),
            "baseline": self.baseline,
            "num_episodes": self.num_episodes,
            "num_problems": self.num_problems,
            "headline": list(self.headline),
            "scores": [
                {
                    "model": s.model,
                    "episodes": s.episodes,
                    "seats_played": s.seats_played,
                    "score": s.score.to_json(),
                    "difference": None if s.difference is None else s.difference.to_json(),
                    "metrics": {k: _json(v) for k, v in s.metrics.items()},
                    "turn_parse_error": _json(s.turn_parse_error),
                }
                for s in self.scores
            ],
            "tournament": None,
        }
        if self.tournament is not None:
            board = self.tournament.leaderboard
            out["tournament"] = {
                "rows": [
                    {"rank": rank, **{k: _json(v) for k, v in dataclasses.asdict(r).items()}}
                    for rank, r in zip(self.tournament.ranks, self.tournament.rows, strict=True)
                ],
                "judged_by": self.tournament.judged_by,
                "rated_models": list(board.models),
                "win_fraction": [[_json(x) for x in row] for row in board.win_fraction],
                "comparison_counts": [list(row) for row in board.comparison_counts],
                "votes_total": self.tournament.votes_total,
                "strict_votes": self.tournament.seat_order[1],
                "strict_votes_lower_seat_first": self.tournament.seat_order[0],
                "judgements_used": board.judgements_used,
                "self_judgements_dropped": board.self_judgements_dropped,
                "same_model_dropped": board.same_model_dropped,
                "num_debates": board.num_debates,
                "prior_wins": board.prior_wins,
                "num_bootstrap": board.num_bootstrap,
                "confidence": board.confidence,
                "notes": self.tournament_notes(),
            }
        return out


def _json(x: float) -> float | None:
    return None if isinstance(x, float) and math.isnan(x) else x


def _row(cells: Sequence[str]) -> str:
    return "| " + " | ".join(cells) + " |"


def _escape(name: str) -> str:
    return name.replace("|", "\\|")


def _rate(x: float) -> str:
    return "n/a" if math.isnan(x) else f"{x:.2f}"


def summarize(
    lines: Sequence[Mapping[str, Any]],
    models: Sequence[str],
    *,
    env: str,
    baseline: str | None = None,
    num_bootstrap: int = 1000,
    confidence: float = 0.95,
    prior_wins: float = 1.0,
    seed: int = 0,
) -> EvalSummary:
    """Summarize results lines (see the module docstring).

    Args:
        lines: the results lines (:func:`~baselines.eval.results.episode_line`).
        models: every model's name, in the order to report them.
        env: the environment (which headline metrics; a debate gets ratings).
        baseline: the model compared with; None: the first.
        num_bootstrap: bootstrap resamples for every interval; 0: none.
        confidence: the intervals' coverage.
        prior_wins: see :func:`~baselines.eval.ratings.rate_models`.
        seed: seeds the bootstraps.

    Raises:
        ValueError: no models, a baseline that is none of them, or a line that
            seats a model not in ``models``.
    """
    models = tuple(models)
    if not models:
        raise ValueError("summarize needs at least one model")
    baseline = models[0] if baseline is None else baseline
    if baseline not in models:
        raise ValueError(f"baseline {baseline!r} is none of the models {list(models)}")
    returns: dict[str, dict[int, list[float]]] = {m: defaultdict(list) for m in models}
    metric_values: dict[str, dict[str, list[float]]] = {m: defaultdict(list) for m in models}
    turns = dict.fromkeys(models, 0)
    errors = dict.fromkeys(models, 0)
    episodes = dict.fromkeys(models, 0)
    problems = set()
    for line in lines:
        seats: Mapping[str, str] = line["seats"]
        unknown = sorted(set(seats.values()) - set(models))
        if unknown:
            raise ValueError(
                f"episode {line.get('episode_id')!r} seats {unknown}, which are not among the "
                f"models {list(models)}"
            )
        problems.add(line["problem"])
        for model in set(seats.values()):
            episodes[model] += 1
        for agent, model in seats.items():
            returns[model][line["problem"]].append(float(line["returns"][agent]))
            for key, value in line.get("metrics", {}).get(agent, {}).items():
                metric_values[model][key].append(float(value))
            if agent in line.get("answer_in_text", {}):
                metric_values[model]["answer_in_text"].append(float(line["answer_in_text"][agent]))
            if agent in line.get("turn_parse_errors", {}):  # only envs that parse answers
                turns[model] += int(line.get("turns_taken", {}).get(agent, 0))
                errors[model] += int(line["turn_parse_errors"][agent])

    per_problem = {m: {p: sum(v) / len(v) for p, v in sorted(returns[m].items())} for m in models}
    settings: dict[str, Any] = {
        "num_bootstrap": num_bootstrap,
        "confidence": confidence,
        "seed": seed,
    }
    scores = []
    for model in models:
        scores.append(
            ModelScore(
                model=model,
                episodes=episodes[model],
                seats_played=sum(len(v) for v in returns[model].values()),
                score=mean_with_interval(list(per_problem[model].values()), **settings),
                per_problem=per_problem[model],
                metrics={k: sum(v) / len(v) for k, v in metric_values[model].items()},
                turn_parse_error=errors[model] / turns[model] if turns[model] else math.nan,
                difference=None
                if model == baseline
                else paired_difference(per_problem[model], per_problem[baseline], **settings),
            )
        )
    tournament = None
    mixed = any(len(set(line["seats"].values())) > 1 for line in lines)
    voted = any("votes" in line for line in lines)
    # A family that records votes (a debate), or one whose seats play against each other.
    if mixed and (voted or _seats_compete(env)):
        tournament = _tournament(
            _judged_by_votes(lines) if voted else _judged_by_outcomes(lines),
            scores,
            num_bootstrap=num_bootstrap,
            confidence=confidence,
            prior_wins=prior_wins,
            seed=seed,
        )
    return EvalSummary(
        env=env,
        models=models,
        baseline=baseline,
        num_episodes=len(lines),
        num_problems=len(problems),
        scores=tuple(scores),
        tournament=tournament,
        headline=getattr(family_class(env), "headline_metrics", ()) if is_family(env) else (),
    )


def unjudged_pairs(models: Sequence[str], counts: Sequence[Sequence[int]]) -> list[tuple[str, str]]:
    """The pairs of rated models that no counted judgement compares, in table order.

    Example:
        >>> unjudged_pairs(["a", "b", "c"], [[0, 0, 3], [0, 0, 2], [3, 2, 0]])
        [('a', 'b')]
    """
    return [
        (models[i], models[j])
        for i in range(len(models))
        for j in range(i + 1, len(models))
        if counts[i][j] == 0
    ]


def _seats_compete(env: str) -> bool:
    """Whether the seats of ``env``'s episodes play against each other (no team reward)."""
    return is_family(env) and not provides(family_class(env), TeamReward)


class _Judged(NamedTuple):
    """What a tournament's lines say: its judgements, who voted, and the seat-order counts."""

    judgements: list[Judgement]
    votes_cast: dict[str, int]
    votes_total: int
    seat_order: tuple[int, int]
    judged_by: str


def _judged_by_outcomes(lines: Sequence[Mapping[str, Any]]) -> _Judged:
    """A game without votes: each two seats of a game, the higher return wins."""
    judgements: list[Judgement] = []
    first_seat = [0, 0]  # decided pairings the first of the two seats won, and all decided
    for line in lines:
        # Every seat, whether it acted or not: a game that the first mover lost with an
        # invalid move is the other seat's win.
        found = judgements_from_returns(line["returns"], line["seats"], debate=line["episode_id"])
        judgements.extend(found)
        for j in found:
            if j.first != j.second and j.outcome != TIE:
                first_seat[0] += j.outcome == FIRST_WINS
                first_seat[1] += 1
    return _Judged(judgements, defaultdict(int), 0, (first_seat[0], first_seat[1]), "outcomes")


def _judged_by_votes(lines: Sequence[Mapping[str, Any]]) -> _Judged:
    """A debate: every valid vote is a judgement between the two seats it compares."""
    judgements: list[Judgement] = []
    votes_cast: dict[str, int] = defaultdict(int)
    votes_total = 0
    seat_order = [0, 0]
    for line in lines:
        # The debate's agents are agent_0 ... agent_{N-1}; a vote names seats by index.
        seats = tuple(line["seats"][f"agent_{i}"] for i in range(len(line["seats"])))
        votes = [Vote(int(a), int(x), str(op), int(b)) for a, x, op, b in line.get("votes", [])]
        for vote in votes:
            if is_valid_vote(vote, len(seats)):
                votes_cast[seats[vote.author]] += 1
                votes_total += 1
        judgements.extend(judgements_from_votes(votes, seats, debate=line["episode_id"]))
        lower, strict = lower_seat_wins(votes, len(seats))
        seat_order[0] += lower
        seat_order[1] += strict
    return _Judged(judgements, votes_cast, votes_total, (seat_order[0], seat_order[1]), "votes")


def _tournament(
    judged: _Judged,
    scores: Sequence[ModelScore],
    *,
    num_bootstrap: int,
    confidence: float,
    prior_wins: float,
    seed: int,
) -> Tournament:
    board = rate_models(
        judged.judgements,
        prior_wins=prior_wins,
        num_bootstrap=num_bootstrap,
        confidence=confidence,
        seed=seed,
    )
    rows, ranks = _rows(board, scores, judged.votes_cast)
    return Tournament(
        rows, ranks, board, judged.votes_total, judged.seat_order, judged_by=judged.judged_by
    )


def _rows(
    board: Leaderboard, scores: Sequence[ModelScore], votes_cast: Mapping[str, int]
) -> tuple[tuple[TournamentRow, ...], tuple[int, ...]]:
    """The table's rows, rated models then unrated ones, and their ranks (module docstring)."""
    rated = [
        TournamentRow(**dataclasses.asdict(e), votes_cast=votes_cast.get(e.model, 0))
        for e in board.entries
    ]

    def fallback(s: ModelScore) -> tuple[float, ...]:
        def value(x: float) -> float:
            return -1.0 if math.isnan(x) else x

        return (
            -value(s.metrics.get("solution_correct", math.nan)),
            -value(s.metrics.get("answer_in_text", math.nan)),
            value(s.turn_parse_error),
        )

    unrated_scores = sorted((s for s in scores if s.model not in board.models), key=fallback)
    unrated = [
        TournamentRow(s.model, None, math.nan, math.nan, 0, 0, 0, 0, votes_cast.get(s.model, 0))
        for s in unrated_scores
    ]
    ranks = list(range(1, len(rated) + 1))
    for i, s in enumerate(unrated_scores):
        if rated:
            # A rating cannot place them among rated models: no rank, rather than "last".
            ranks.append(0)
            continue
        tied = i > 0 and fallback(s) == fallback(unrated_scores[i - 1])
        ranks.append(ranks[-1] if tied else i + 1)
    return tuple(rated + unrated), tuple(ranks)
