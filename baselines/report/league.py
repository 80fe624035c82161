"""The report's league section: the pool's ratings over training, the opponent mix, the scores.

Built from the ``league/...`` metrics a league run logs every iteration
(docs/league.md): ``league/rating/NAME`` (the Elo ratings of the learner and
every member of the pool), ``league/mix/NAME`` (the share of the iteration's
groups that met it) and ``league/score/NAME`` (the learner's mean score
against it). A run without them has no league section. Where the run logs a
meter (``eval/exploitability``: Kuhn Poker), the table shows each snapshot's
value, read at the evaluation of its iteration: a snapshot of iteration ``k``
holds the weights the evaluation before iteration ``k`` measured (the
learner: its last evaluation); a snapshot without an evaluation at its
iteration shows none.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from baselines.report._common import Series
from baselines.report.markup import Markup, join, markup
from baselines.report.svg import Curve, line_chart
from llm_envs.formatting import fmt

__all__ = ["league_html"]

# Enough colours for a pool: the learner, `latest`, two anchors, eight snapshots.
_PALETTE = (
    "#1f6fb2",
    "#d9480f",
    "#2b8a3e",
    "#7048e8",
    "#c2255c",
    "#0b7285",
    "#e67700",
    "#5c940d",
    "#495057",
    "#862e9c",
    "#a61e4d",
    "#364fc7",
)


def _members(series: Mapping[str, Series], prefix: str) -> dict[str, Series]:
    return {n.removeprefix(prefix): s for n, s in sorted(series.items()) if n.startswith(prefix)}


def _curves(members: Mapping[str, Series], order: list[str]) -> list[Curve]:
    return [
        Curve(name, *members[name], _PALETTE[order.index(name) % len(_PALETTE)])
        for name in order
        if name in members
    ]


_METER = "eval/exploitability"
_SNAPSHOT = re.compile(r"snapshot_(\d+)")


def _measured(name: str, meter: Series) -> str:
    """A member's exploitability: a snapshot's at its iteration, the learner's last; else ""."""
    xs, ys = meter
    if name == "learner":
        return fmt(ys[-1]) if ys else ""
    found = _SNAPSHOT.fullmatch(name)
    if found is None:
        return ""
    at = {int(x): y for x, y in zip(xs, ys, strict=True)}
    value = at.get(int(found.group(1)))
    return "" if value is None else fmt(value)


def league_html(series: Mapping[str, Series], unit: str, crossplay: Markup | None = None) -> Markup:
    """The league section of the report; ``""`` for a run without a league.

    ``crossplay``: the evaluation section of ``RUN/league/eval`` (where
    ``llm-envs eval`` rated the snapshots against the anchors), shown under
    the league's own curves: its leaderboard and its matrix of win rates.
    """
    ratings = _members(series, "league/rating/")
    if not ratings:
        return Markup("")
    mix = _members(series, "league/mix/")
    scores = _members(series, "league/score/")

    def first_seen(name: str) -> tuple[float, str]:
        found = [s[0][0] for s in (ratings.get(name), mix.get(name), scores.get(name)) if s]
        return (min(found), name)

    # The learner first, then the pool in the order its members appeared.
    others = {*ratings, *mix, *scores} - {"learner"}
    order = ["learner", *sorted(others, key=first_seen)]
    charts = [
        line_chart(_curves(ratings, order), width=600, height=260, title=f"Elo rating per {unit}"),
        line_chart(
            _curves(mix, order),
            width=600,
            height=220,
            title=f"share of the groups that met each opponent, per {unit}",
        ),
        line_chart(
            _curves(scores, order),
            width=600,
            height=220,
            title=f"learner's score against each opponent (1 win, 0.5 tie, 0 loss), per {unit}",
        ),
    ]
    meter = series.get(_METER)
    rows = []
    for name in order:
        rating = ratings.get(name)
        met = mix.get(name)
        score = scores.get(name)
        measured = markup("<td class='n'>{}</td>", _measured(name, meter)) if meter else ""
        rows.append(
            markup(
                "<tr><td><code>{}</code></td><td class='n'>{}</td><td class='n'>{}</td>"
                "<td class='n'>{}</td><td class='n'>{}</td>{}</tr>",
                name,
                fmt(rating[1][-1]) if rating else "",
                fmt(sum(met[1]) / len(met[1])) if met else "",
                len(met[1]) if met else 0,
                fmt(score[1][-1]) if score else "",
                measured,
            )
        )
    table = markup(
        "<table class='evaluation'><tr><th>member</th><th>last rating</th>"
        "<th>mean share met</th><th>{}s met</th><th>last score</th>{}</tr>{}</table>",
        unit,
        markup("<th>exploitability</th>") if meter else "",
        join("", rows),
    )
    cross = (
        markup("<h3>Cross-play of the snapshots and anchors</h3>{}", crossplay)
        if crossplay
        else Markup("")
    )
    return markup(
        "<h2>League</h2><p class='muted'>The learner's online Bradley-Terry ratings against the "
        "pool (Elo scale, mean 0), which opponents its groups met, and how it scored. "
        "<code>llm-envs eval</code> rates the snapshots against each other and the anchors "
        "(docs/league.md).</p>{}<div class='panels'>{}</div>{}",
        table,
        join("", (c for c in charts if c)),
        cross,
    )
