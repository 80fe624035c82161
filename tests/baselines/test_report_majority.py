"""The report shows debate's majority vote beside the debate's correct answers."""

from __future__ import annotations

from baselines.report import write_report
from baselines.report.metrics import evaluation_metrics
from tests.baselines.test_report import is_trainer_run, write_run

MAJORITY = "eval/majority_vote/correct"
SINGLE = "eval/single_answer/correct"


def test_the_majority_vote_is_a_row_of_the_evaluation_table():
    names = [MAJORITY, SINGLE, "eval/solution_correct", "eval/num_episodes"]
    rows = dict(evaluation_metrics(names))
    assert set(rows) == {MAJORITY, SINGLE, "eval/solution_correct"}
    assert "majority answer" in rows[MAJORITY] and "alone" in rows[SINGLE]


def test_a_debate_run_charts_the_majority_vote_beside_its_correct_answers(tmp_path):
    rows, config = is_trainer_run()
    for row in rows:
        if "eval/reward/total" in row:
            row |= {"eval/solution_correct": 0.25, MAJORITY: 0.5, SINGLE: 0.4}
    page = write_report(write_run(tmp_path / "debate", rows, config)).read_text()
    chart = page[page.index("the debate and the majority vote") :]
    chart = chart[: chart.index("</svg>")]
    assert all(name in chart for name in ("eval/solution_correct", MAJORITY, SINGLE))
    table = page[page.index("<h2>Evaluation</h2>") :]
    assert MAJORITY in table[: table.index("</table>")]


def test_a_run_without_it_has_no_such_chart(tmp_path):
    rows, config = is_trainer_run()
    page = write_report(write_run(tmp_path / "plain", rows, config)).read_text()
    assert "the majority vote" not in page
