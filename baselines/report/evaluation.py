"""The report's evaluation section: scores side by side, and a debate tournament's leaderboard.

It appears when the run folder holds ``summary.json``, as ``python -m
baselines.eval`` writes it (:meth:`baselines.eval.summary.EvalSummary.to_json`):

* the scores: per model, its mean score with its interval, the paired
  difference to the baseline model, its headline metrics and parse errors;
* for a debate tournament, the leaderboard (rating, interval drawn as a bar
  on a shared axis, W/T/L, votes cast, parse errors, correctness), the notes
  on dropped judgements and unrated models, and the vote matrix as a heat map:
  cell ``(i, j)`` is the share of judgements between the two that the row
  model won, coloured from red (0) through white (0.5) to blue (1), with the
  number of judgements.

The transcripts are the report's own (``episodes/eval.jsonl``). Like the rest
of the report: static HTML, inline SVG, nothing fetched.
"""

from __future__ import annotations

import html
import json
import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from baselines.run_directory import SUMMARY_FILE
from llm_envs.registration import metric_title

__all__ = ["evaluation_html", "read_summary"]

_STYLE = (
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


def _estimate(e: Mapping[str, Any] | None) -> str:
    if not e:
        return "(baseline)"
    interval = (
        f"[{_number(e.get('low'))}, {_number(e.get('high'))}]"
        if isinstance(e.get("low"), int | float) and isinstance(e.get("high"), int | float)
        else "[n/a]"
    )
    return f"{_number(e.get('mean'))} {interval}"


def _scores_html(summary: Mapping[str, Any]) -> str:
    headline = [str(h) for h in summary.get("headline", [])]
    env = str(summary.get("env", ""))
    baseline = html.escape(str(summary.get("baseline", "")))
    rows = []
    for s in summary["scores"]:
        metrics = s.get("metrics") or {}
        rows.append(
            f"<tr><td>{html.escape(str(s.get('model')))}</td>"
            f"<td class='n'>{s.get('episodes', '')}</td>"
            f"<td class='n'>{_estimate(s.get('score'))}</td>"
            f"<td class='n'>{_estimate(s.get('difference'))}</td>"
            + "".join(f"<td class='n'>{_number(metrics.get(h), 2)}</td>" for h in headline)
            + f"<td class='n'>{_number(s.get('turn_parse_error'), 2)}</td></tr>"
        )
    confidence = summary["scores"][0].get("score", {}).get("confidence", 0.95) if rows else 0.95
    coverage = f"{confidence * 100:g}%"
    head = "".join(f"<th>{html.escape(metric_title(env, h))}</th>" for h in headline)
    return (
        f"<h2>Evaluation: scores</h2><p class='muted'>{html.escape(str(summary.get('env')))}: "
        f"{summary.get('num_episodes')} episodes on {summary.get('num_problems')} problems. "
        f"Score: the mean return of the seats a model played, per problem, then over problems; "
        f"{coverage} bootstrap intervals resample problems; the difference to "
        f"<b>{baseline}</b> is paired by problem.</p>"
        f"<table class='scores'><tr><th>model</th><th>episodes</th><th>score [{coverage}]</th>"
        f"<th>minus {baseline} [{coverage}]</th>{head}<th>parse errors</th></tr>"
        + "".join(rows)
        + "</table>"
    )


def _interval_bar(row: Mapping[str, Any], lo: float, hi: float, width: int = 160) -> str:
    rating = row.get("rating")
    if not isinstance(rating, int | float):
        return ""

    def x(value: float) -> float:
        return 4 + (width - 8) * (value - lo) / (hi - lo)

    low, high = row.get("low"), row.get("high")
    parts = [f'<svg width="{width}" height="14" role="img">']
    parts.append(f'<line class="g" x1="{x(0):.1f}" x2="{x(0):.1f}" y1="0" y2="14"/>')
    if isinstance(low, int | float) and isinstance(high, int | float):
        parts.append(
            f'<line x1="{x(low):.1f}" x2="{x(high):.1f}" y1="7" y2="7" stroke="#1f6fb2" '
            'stroke-width="2"/>'
        )
    parts.append(f'<circle cx="{x(rating):.1f}" cy="7" r="3.5" fill="#1f6fb2"/></svg>')
    return "".join(parts)


def _leaderboard_html(summary: Mapping[str, Any], tournament: Mapping[str, Any]) -> str:
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
    coverage = f"{float(tournament.get('confidence', 0.95)) * 100:g}%"
    body = []
    for position, r in enumerate(rows, 1):
        rank = r.get("rank", position) or "-"  # 0: unrated beside rated models, no rank
        s = scores.get(r.get("model"), {})
        metrics = s.get("metrics") or {}
        rated = isinstance(r.get("rating"), int | float)
        interval = (
            f"[{round(r['low'])}, {round(r['high'])}]"
            if rated and isinstance(r.get("low"), int | float)
            else ("n/a" if rated else "-")
        )
        body.append(
            f"<tr><td class='n'>{rank}</td><td>{html.escape(str(r.get('model')))}</td>"
            f"<td class='n'>{round(r['rating']) if rated else 'unrated'}</td>"
            f"<td class='n'>{interval}</td><td>{_interval_bar(r, lo, hi)}</td>"
            f"<td class='n'>{r.get('wins', 0)}/{r.get('ties', 0)}/{r.get('losses', 0)}</td>"
            f"<td class='n'>{r.get('votes_cast', 0)}</td>"
            f"<td class='n'>{_number(s.get('turn_parse_error'), 2)}</td>"
            + "".join(f"<td class='n'>{_number(metrics.get(h), 2)}</td>" for h in headline)
            + "</tr>"
        )
    head = "".join(f"<th>{html.escape(metric_title(env, h))}</th>" for h in headline)
    notes = "".join(
        f"<p class='note'>{html.escape(str(n))}</p>" for n in tournament.get("notes", [])
    )
    return (
        "<h2>Debate tournament: leaderboard</h2><p class='muted'>Bradley-Terry ratings from the "
        "pairwise votes (Elo scale, a tie counts half a win; judgements by one of the two "
        f"models compared, or between two seats of one model, are dropped); {coverage} "
        "bootstrap intervals resample debates; the bar's grey line is rating 0.</p>"
        f"<table class='leaderboard'><tr><th>rank</th><th>model</th><th>rating</th>"
        f"<th>{coverage} interval</th><th></th><th>W/T/L</th><th>votes cast</th>"
        f"<th>parse errors</th>{head}</tr>{''.join(body)}</table>{notes}"
    )


def _heat_colour(fraction: float) -> str:
    """Red (0) through white (0.5) to blue (1)."""
    t = max(0.0, min(1.0, fraction))
    if t < 0.5:
        k = t / 0.5  # 0 -> red, 1 -> white
        r, g, b = 230 + 25 * k, 90 + 165 * k, 80 + 175 * k
    else:
        k = (t - 0.5) / 0.5  # 0 -> white, 1 -> blue
        r, g, b = 255 - 200 * k, 255 - 140 * k, 255 - 45 * k
    return f"rgb({r:.0f},{g:.0f},{b:.0f})"


def _heat_map_html(tournament: Mapping[str, Any]) -> str:
    models = [str(m) for m in tournament.get("rated_models") or []]
    fractions = tournament.get("win_fraction") or []
    counts = tournament.get("comparison_counts") or []
    if not models:
        return ""
    head = "".join(f"<th>{html.escape(m)}</th>" for m in models)
    rows = []
    for i, model in enumerate(models):
        cells = []
        for j in range(len(models)):
            f = fractions[i][j] if i < len(fractions) and j < len(fractions[i]) else None
            n = counts[i][j] if i < len(counts) and j < len(counts[i]) else 0
            if i == j:
                cells.append("<td class='n diag'></td>")
            elif isinstance(f, int | float):
                tip = html.escape(f"{model} over {models[j]}", quote=True)
                cells.append(
                    f"<td class='n' title=\"{tip}\" style='background:{_heat_colour(float(f))}'>"
                    f"{float(f):.2f}<br><span class='meaning'>{n} judgements</span></td>"
                )
            else:
                cells.append("<td class='n'><span class='meaning'>never compared</span></td>")
        rows.append(f"<tr><th>{html.escape(model)}</th>{''.join(cells)}</tr>")
    return (
        "<h3>Vote matrix</h3><p class='muted'>The share of judgements between the row model and "
        "the column model that the row model won (a tie counts one half), from red (0) through "
        "white (0.5) to blue (1).</p>"
        f"<table class='heat'><tr><th>row over column</th>{head}</tr>{''.join(rows)}</table>"
    )


def evaluation_html(run: str | Path) -> tuple[str, list[str]]:
    """The evaluation section of ``run``'s report and its notes; ``("", [])`` without one."""
    summary, note = read_summary(Path(run))
    if summary is None:
        return "", [note] if note else []
    try:
        parts = [_STYLE, _scores_html(summary)]
        tournament = summary.get("tournament")
        if isinstance(tournament, Mapping):
            parts += [_leaderboard_html(summary, tournament), _heat_map_html(tournament)]
    except (KeyError, TypeError, ValueError, IndexError, AttributeError) as exc:
        return "", [
            f"{SUMMARY_FILE} has an unexpected shape ({exc!r}): the evaluation is not shown"
        ]
    return "\n".join(parts), []
