"""The report shows the meter: ``eval/exploitability`` in the evaluation table and its curves.

And the league section shows each snapshot's value at its iteration.
"""

from __future__ import annotations

import re

from baselines.report import write_report
from baselines.report.metrics import evaluation_metrics
from tests.baselines.test_report import is_trainer_run, write_run


def test_the_meter_is_a_row_of_the_evaluation_table():
    names = ["eval/exploitability", "eval/exploitability_low", "eval/exploitability_chips"]
    rows = dict(evaluation_metrics(names))
    assert list(rows) == names[::2]
    assert "best response" in rows["eval/exploitability"]
    assert "11/24" in rows["eval/exploitability_chips"]


def test_a_league_run_shows_each_snapshots_exploitability(tmp_path):
    rows, config = is_trainer_run()
    # Evaluations at iterations 0 and 5; snapshot_00005 holds the weights evaluated at 5.
    meter = {0: 0.46, 5: 0.31}
    for row in rows:
        if "eval/reward/total" in row:
            row["eval/exploitability"] = meter.get(int(row["iteration"]), 0.2)
    league = [
        {"league/rating/learner": 10.0, "league/rating/latest": -10.0, "league/mix/latest": 1.0},
        {
            "league/rating/learner": 40.0,
            "league/rating/snapshot_00001": -35.0,
            "league/rating/snapshot_00005": -30.0,
            "league/mix/snapshot_00001": 1.0,
        },
    ]
    training = [r for r in rows if "eval/reward/total" not in r or "optim/loss" in r]
    for row, extra in zip(training, league, strict=False):
        row.update(extra)
    page = write_report(write_run(tmp_path / "league", rows, config)).read_text()
    section = page[page.index("<h2>League</h2>") :]
    assert "<th>exploitability</th>" in section
    cells = dict(
        re.findall(
            r"<code>([^<]+)</code></td>(?:<td[^>]*>[^<]*</td>){4}<td class='n'>([^<]*)</td>",
            section,
        )
    )
    assert cells["snapshot_00005"] == "0.31"
    assert cells["snapshot_00001"] == ""  # no evaluation at its iteration
    assert cells["latest"] == ""
    curves = page[page.index("<h2>Every metric that changed</h2>") :]
    assert "eval/exploitability" in curves
