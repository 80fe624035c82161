"""The report's evaluation section: scores side by side, and a debate tournament's leaderboard.

It appears when the run folder holds ``summary.json``, as ``python -m
baselines.eval`` writes it (:meth:`baselines.eval.summary.EvalSummary.to_json`):

* the scores: per model, its mean score with its interval, the paired
  difference to the baseline model, its headline metrics and parse errors;
* for a tournament (a debate's, rated from its votes; a game's, from who won
  each two seats), the leaderboard (rating, interval drawn as a bar
  on a shared axis, W/T/L, votes cast, parse errors, correctness), the notes
  on dropped judgements and unrated models, and the vote (or cross-play) matrix as a heat map:
  cell ``(i, j)`` is the share of judgements between the two that the row
  model won, coloured from red (0) through white (0.5) to blue (1), with the
  number of judgements.

The transcripts are the report's own (``episodes/eval.jsonl``). Like the rest
of the report: static HTML, inline SVG, nothing fetched.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baselines.report.markup import Markup, join, markup
from baselines.run_directory import SUMMARY_FILE
from llm_envs.registration import metric_title

__all__ = ["evaluation_html", "read_summary"]

_STYLE = Markup(
    "<style>table.heat td.n { min-width: 4.5rem; text-align: center; }"
    "table.heat td.diag { background: #f0f0f0; }</style>"
)


def read_summary(run: Path) -> tuple[dict[str, Any] | None, str | None]:
    """``summary.json`` of ``run`` and a note when it cannot be read; ``(None, None)`` if absent."""
    path = Path(run) / SUMMARY_FILE
    if not path.exists():
        return None, None
    try:
        summary = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        return None, f"{SUMMARY_FILE} is not readable JSON ({exc}): the evaluation is not shown"
    if not isinstance(summary, dict) or not isinstance(summary.get("scores"), list):
        return None, f"{SUMMARY_FILE} is not an evaluation summary: the evaluation is not shown"
    return summary, None


def _number(x: Any, digits: int = 3) -> str:
    return "n/a" if not isinstance(x, int | float) or math.isnan(x) else f"{x:.{digits}f}"


def _estimate(e: Any) -> str:
    if not e:
        return "(baseline)"
    if not isinstance(e, Mapping):
        return "n/a"
    interval = (
        f"[{_number(e.get('low'))}, {_number(e.get('high'))}]"
        if isinstance(e.get("low"), int | float) and isinstance(e.get("high"), int | float)
        else "[n/a]"
    )
    return f"{_number(e.get('mean'))} {interval}"


def _coverage(confidence: Any) -> str:
    """``"95%"``: an interval's confidence; 95% when the summary does not say it as a number."""
    if isinstance(confidence, bool) or not isinstance(confidence, int | float):
        confidence = 0.95
    return f"{confidence * 100:g}%"


def _scores_html(summary: Mapping[str, Any]) -> Markup:
    headline = [str(h) for h in summary.get("headline", [])]
    env = str(summary.get("env", ""))
    baseline = str(summary.get("baseline", ""))
    rows = []
    for s in summary["scores"]:
        metrics = s.get("metrics") or {}
        rows.append(
            markup(
                "<tr><td>{}</td><td class='n'>{}</td><td class='n'>{}</td><td class='n'>{}</td>"
                "{}<td class='n'>{}</td></tr>",
                str(s.get("model")),
                s.get("episodes", ""),
                _estimate(s.get("score")),
                _estimate(s.get("difference")),
                join(
                    "",
                    (markup("<td class='n'>{}</td>", _number(metrics.get(h), 2)) for h in headline),
                ),
                _number(s.get("turn_parse_error"), 2),
            )
        )
    score = summary["scores"][0].get("score") if rows else None
    coverage = _coverage(score.get("confidence") if isinstance(score, Mapping) else None)
    head = join("", (markup("<th>{}</th>", metric_title(env, h)) for h in headline))
    return markup(
        "<h2>Evaluation: scores</h2><p class='muted'>{env}: "
        "{episodes} episodes on {problems} problems. "
        "Score: the mean return of the seats a model played, per problem, then over problems; "
        "{coverage} bootstrap intervals resample problems; the difference to "
        "<b>{baseline}</b> is paired by problem.</p>"
        "<table class='scores'><tr><th>model</th><th>episodes</th><th>score [{coverage}]</th>"
        "<th>minus {baseline} [{coverage}]</th>{head}<th>parse errors</th></tr>{rows}</table>",
        env=str(summary.get("env")),
        episodes=summary.get("num_episodes"),
        problems=summary.get("num_problems"),
        coverage=coverage,
        baseline=baseline,
        head=head,
        rows=join("", rows),
    )


def _interval_bar(row: Mapping[str, Any], lo: float, hi: float, width: int = 160) -> Markup:
    rating = row.get("rating")
    if not isinstance(rating, int | float):
        return Markup("")

    def x(value: float) -> float:
        return 4 + (width - 8) * (value - lo) / (hi - lo)

    low, high = row.get("low"), row.get("high")
    parts = [
        markup('<svg width="{}" height="14" role="img">', width),
        markup('<line class="g" x1="{0:.1f}" x2="{0:.1f}" y1="0" y2="14"/>', x(0)),
    ]
    if isinstance(low, int | float) and isinstance(high, int | float):
        parts.append(
            markup(
                '<line x1="{:.1f}" x2="{:.1f}" y1="7" y2="7" stroke="#1f6fb2" stroke-width="2"/>',
                x(low),
                x(high),
            )
        )
    parts.append(markup('<circle cx="{:.1f}" cy="7" r="3.5" fill="#1f6fb2"/></svg>', x(rating)))
    return join("", parts)


def _leaderboard_html(summary: Mapping[str, Any], tournament: Mapping[str, Any]) -> Markup:
    headline = [str(h) for h in summary.get("headline", [])]
    env = str(summary.get("env", ""))
    scores = {s.get("model"): s for s in summary["scores"]}
    rows = tournament.get("rows") or []
    ends = [
        float(v)
        for r in rows
        for v in (r.get("low"), r.get("high"), r.get("rating"))
        if isinstance(v, int | float)
    ]
    lo, hi = (min([*ends, 0.0]), max([*ends, 0.0])) if ends else (0.0, 0.0)
    lo, hi = (lo - 1.0, hi + 1.0) if hi - lo < 1e-9 else (lo, hi)
    coverage = _coverage(tournament.get("confidence"))
    body = []
    for position, r in enumerate(rows, 1):
        rank = r.get("rank", position) or "-"  # 0: unrated beside rated models, no rank
        s = scores.get(r.get("model"), {})
        metrics = s.get("metrics") or {}
        rated = isinstance(r.get("rating"), int | float)
        votes = r.get("votes_cast", 0)
        interval = (
            f"[{round(r['low'])}, {round(r['high'])}]"
            if rated and isinstance(r.get("low"), int | float)
            else ("n/a" if rated else "-")
        )
        body.append(
            markup(
                "<tr><td class='n'>{}</td><td>{}</td><td class='n'>{}</td><td class='n'>{}</td>"
                "<td>{}</td><td class='n'>{}/{}/{}</td>{}"
                "<td class='n'>{}</td>{}</tr>",
                rank,
                str(r.get("model")),
                round(r["rating"]) if rated else "unrated",
                interval,
                _interval_bar(r, lo, hi),
                r.get("wins", 0),
                r.get("ties", 0),
                r.get("losses", 0),
                "" if _by_outcomes(tournament) else markup("<td class='n'>{}</td>", votes),
                _number(s.get("turn_parse_error"), 2),
                join(
                    "",
                    (markup("<td class='n'>{}</td>", _number(metrics.get(h), 2)) for h in headline),
                ),
            )
        )
    head = join("", (markup("<th>{}</th>", metric_title(env, h)) for h in headline))
    notes = join(
        "", (markup("<p class='note'>{}</p>", str(n)) for n in tournament.get("notes", []))
    )
    if _by_outcomes(tournament):
        title = markup(
            "<h2>Tournament: leaderboard</h2><p class='muted'>Bradley-Terry ratings from the "
            "games (Elo scale): every two seats of a game with two models, the higher return "
            "wins and equal returns tie (two seats of one model are dropped); {} bootstrap "
            "intervals resample games; the bar's grey line is rating 0.</p>",
            coverage,
        )
    else:
        title = markup(
            "<h2>Debate tournament: leaderboard</h2><p class='muted'>Bradley-Terry ratings from "
            "the pairwise votes (Elo scale, a tie counts half a win; judgements by one of the two "
            "models compared, or between two seats of one model, are dropped); {} "
            "bootstrap intervals resample debates; the bar's grey line is rating 0.</p>",
            coverage,
        )
    return markup(
        "{}<table class='leaderboard'><tr><th>rank</th><th>model</th><th>rating</th>"
        "<th>{} interval</th><th></th><th>W/T/L</th>{}"
        "<th>parse errors</th>{}</tr>{}</table>{}",
        title,
        coverage,
        Markup("") if _by_outcomes(tournament) else Markup("<th>votes cast</th>"),
        head,
        join("", body),
        notes,
    )


def _by_outcomes(tournament: Mapping[str, Any]) -> bool:
    """Whether a tournament is a game's, rated from outcomes (not a debate's votes)."""
    return tournament.get("judged_by") == "outcomes"


def _heat_colour(fraction: float) -> tuple[float, float, float]:
    """Red (0) through white (0.5) to blue (1), as RGB."""
    t = max(0.0, min(1.0, fraction))
    if t < 0.5:
        k = t / 0.5  # 0 -> red, 1 -> white
        return 230 + 25 * k, 90 + 165 * k, 80 + 175 * k
    k = (t - 0.5) / 0.5  # 0 -> white, 1 -> blue
    return 255 - 200 * k, 255 - 140 * k, 255 - 45 * k


def _heat_map_html(tournament: Mapping[str, Any]) -> Markup:
    models = [str(m) for m in tournament.get("rated_models") or []]
    fractions = tournament.get("win_fraction") or []
    counts = tournament.get("comparison_counts") or []
    if not models:
        return Markup("")
    head = join("", (markup("<th>{}</th>", m) for m in models))
    rows = []
    for i, model in enumerate(models):
        cells = []
        for j in range(len(models)):
            f = fractions[i][j] if i < len(fractions) and j < len(fractions[i]) else None
            n = counts[i][j] if i < len(counts) and j < len(counts[i]) else 0
            if i == j:
                cells.append(Markup("<td class='n diag'></td>"))
            elif isinstance(f, int | float):
                cells.append(
                    markup(
                        "<td class='n' title=\"{} over {}\" "
                        "style='background:rgb({:.0f},{:.0f},{:.0f})'>"
                        "{:.2f}<br><span class='meaning'>{} {}</span></td>",
                        model,
                        models[j],
                        *_heat_colour(float(f)),
                        float(f),
                        n,
                        "games" if _by_outcomes(tournament) else "judgements",
                    )
                )
            else:
                cells.append(
                    Markup("<td class='n'><span class='meaning'>never compared</span></td>")
                )
        rows.append(markup("<tr><th>{}</th>{}</tr>", model, join("", cells)))
    games = _by_outcomes(tournament)
    return markup(
        "<h3>{}</h3><p class='muted'>The share of {} between the row model and the column model "
        "that the row model won (a tie counts one half), from red (0) through white (0.5) to "
        "blue (1).</p>"
        "<table class='heat'><tr><th>row over column</th>{}</tr>{}</table>",
        "Cross-play matrix" if games else "Vote matrix",
        "games" if games else "judgements",
        head,
        join("", rows),
    )


def evaluation_html(run: str | Path) -> tuple[Markup, list[str]]:
    """The evaluation section of ``run``'s report and its notes; ``("", [])`` without one."""
    summary, note = read_summary(Path(run))
    if summary is None:
        return Markup(""), [note] if note else []
    try:
        parts = [_STYLE, _scores_html(summary)]
        tournament = summary.get("tournament")
        if isinstance(tournament, Mapping):
            parts += [_leaderboard_html(summary, tournament), _heat_map_html(tournament)]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        return Markup(""), [
            f"{SUMMARY_FILE} has an unexpected shape ({exc!r}): the evaluation is not shown"
        ]
    return join("\n", parts), []
