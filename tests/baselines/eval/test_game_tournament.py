"""A game without votes is rated from its outcomes: ratings, the cross-play matrix, the report.

Before, a Tic Tac Toe evaluation of mixed models gave scores only
(``"tournament": null``) and a league's report showed its "Cross-play" heading
over nothing: only a debate's votes made judgements.
"""

from __future__ import annotations

import json
import math

import pytest

from baselines.eval.config import EvalConfig
from baselines.eval.ratings import ELO_SCALE, GAME, Judgement, judgements_from_returns
from baselines.eval.run import Evaluation
from baselines.eval.summary import summarize
from baselines.report.evaluation import evaluation_html

TICTACTOE = {"game": "TicTacToe-v0"}


@pytest.mark.parametrize(
    ("returns", "seats", "expected"),
    [
        # A win, a loss and a draw of two seats; the winner's model is first or second.
        ({"agent_0": 1.0, "agent_1": -1.0}, {"agent_0": "a", "agent_1": "b"}, [("a", "b", 1.0)]),
        ({"agent_0": -1.0, "agent_1": 1.0}, {"agent_0": "a", "agent_1": "b"}, [("a", "b", 0.0)]),
        ({"agent_0": 0.0, "agent_1": 0.0}, {"agent_0": "a", "agent_1": "b"}, [("a", "b", 0.5)]),
        # Three seats: every two; an agent without a return (it never acted) is no side.
        (
            {"agent_0": 2.0, "agent_1": 0.5, "agent_2": 0.5},
            {"agent_0": "a", "agent_1": "b", "agent_2": "c"},
            [("a", "b", 1.0), ("a", "c", 1.0), ("b", "c", 0.5)],
        ),
        ({"agent_0": 1.0}, {"agent_0": "a", "agent_1": "b"}, []),
        # A NaN return decides nothing.
        ({"agent_0": math.nan, "agent_1": 1.0}, {"agent_0": "a", "agent_1": "b"}, []),
    ],
)
def test_judgements_from_returns(returns, seats, expected):
    found = judgements_from_returns(returns, seats, debate="g")
    assert [(j.first, j.second, j.outcome) for j in found] == expected
    assert all(j.judge == GAME and j.debate == "g" for j in found)
    assert isinstance(found, tuple) and all(isinstance(j, Judgement) for j in found)


def _line(episode: int, winner: str, seats: tuple[str, str]) -> dict:
    """A results line of one Tic Tac Toe game: the seat ``winner`` (or "" for a draw) won."""
    agents = ("agent_0", "agent_1")
    returns = {a: 0.0 if not winner else (1.0 if a == winner else -1.0) for a in agents}
    return {
        "episode_id": f"e{episode}",
        "problem": episode // 2,
        "seats": dict(zip(agents, seats, strict=True)),
        "returns": returns,
        "turns_taken": dict.fromkeys(agents, 3),
    }


def test_a_two_seat_game_gets_ratings_and_its_cross_play_matrix():
    # a beats b three times, b wins once; two of the wins from seat 0.
    lines = [
        _line(0, "agent_0", ("a", "b")),
        _line(1, "agent_1", ("b", "a")),
        _line(2, "agent_0", ("a", "b")),
        _line(3, "agent_0", ("b", "a")),
    ]
    summary = summarize(lines, ["a", "b"], env="textarena", num_bootstrap=0)
    tournament = summary.tournament
    assert tournament is not None and tournament.judged_by == "outcomes"
    board = tournament.leaderboard
    # With one virtual win each way: P(a beats b) = (3 + 1) / (4 + 2) = 2/3, odds 2:1.
    gap = board.entry("a").rating - board.entry("b").rating
    assert gap == pytest.approx(ELO_SCALE * math.log(2))  # 120.4 points
    assert board.models == ("a", "b")
    assert board.win_fraction[0][1] == 0.75 and board.comparison_counts[0][1] == 4
    assert tournament.seat_order == (3, 4)  # the lower seat won 3 of the 4 decided games
    assert [(r.model, r.wins, r.ties, r.losses) for r in tournament.rows] == [
        ("a", 3, 0, 1),
        ("b", 1, 0, 3),
    ]
    text = summary.to_text()
    assert "Cross-play matrix (games in brackets)" in text and "| a |  | 0.75 (4) |" in text
    assert "votes cast" not in text
    out = summary.to_json()["tournament"]
    assert out["judged_by"] == "outcomes" and out["rated_models"] == ["a", "b"]


def test_a_game_lost_before_the_other_seat_acted_is_its_win():
    # The first mover's invalid move ends the game: the second seat never acted, and won.
    line = _line(0, "agent_1", ("a", "b"))
    line["turns_taken"] = {"agent_0": 1, "agent_1": 0}
    summary = summarize([line], ["a", "b"], env="textarena", num_bootstrap=0)
    assert summary.tournament is not None
    assert [(r.model, r.wins, r.losses) for r in summary.tournament.rows] == [
        ("b", 1, 0),
        ("a", 0, 1),
    ]


def test_self_play_and_a_team_are_not_a_tournament():
    alone = [_line(0, "agent_0", ("a", "a"))]
    assert summarize(alone, ["a"], env="textarena", num_bootstrap=0).tournament is None
    team = [
        {
            "episode_id": "e0",
            "problem": 0,
            "seats": {"helper": "a", "main": "b"},
            "returns": {"helper": 2.0, "main": 2.0},
        }
    ]
    # Code collaboration pays the team: its seats do not play against each other.
    assert summarize(team, ["a", "b"], env="code_collab", num_bootstrap=0).tournament is None


def test_an_evaluation_of_tic_tac_toe_rates_every_entrant_and_reports_the_matrix(tmp_path):
    config = EvalConfig(
        models=("scripted:random", "reference", "again=scripted:random"),
        env="textarena",
        env_kwargs=TICTACTOE,
        seating="rotations",
        problems=4,
        num_bootstrap=50,
        output_dir=str(tmp_path / "eval"),
        progress=False,
    )
    summary = Evaluation(config).run()
    assert summary.tournament is not None
    rows = {r.model: r for r in summary.tournament.rows}
    assert all(r.rating is not None for r in rows.values())
    # The minimax player never loses: first, and its W/T/L has no L.
    assert summary.tournament.rows[0].model == "reference" and rows["reference"].losses == 0
    written = json.loads((tmp_path / "eval" / "summary.json").read_text())
    assert written["tournament"]["judged_by"] == "outcomes"
    html, notes = evaluation_html(tmp_path / "eval")
    assert not notes
    assert "Cross-play matrix" in html and "Tournament: leaderboard" in html
    assert "Vote matrix" not in html and "votes cast" not in html
