"""Evaluations end to end with scripted policies: every environment, seatings, resume, report."""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter

import pytest

from baselines.eval.arenas import make_arena
from baselines.eval.config import EvalConfig
from baselines.eval.run import Evaluation
from baselines.eval.summary import summarize
from baselines.report import write_report
from baselines.samplers.scripted import ScriptedPolicy
from llm_envs.code_collab.agents import CanonicalCoder, GarbageCoder
from llm_envs.debate import scripted_debaters
from llm_envs.debate.agents import MalformedDebater
from llm_envs.expert_iteration import ScriptedMathSolver

DEBATE = {"num_agents": 3, "max_rounds": 2, "on_parse_error": "mask"}


class Counting(ScriptedPolicy):
    """A scripted policy that counts the requests it answered."""

    requests = 0

    def sample(self, requests, params):
        Counting.requests += len(requests)
        return super().sample(requests, params)


def debate_policies():
    return {
        "a": Counting(scripted_debaters(3, seed=1)),
        "b": Counting(scripted_debaters(3, seed=2)),
        "c": Counting(MalformedDebater("prose")),
    }


def config(tmp_path, **kwargs):
    settings = {
        "models": ("a", "b", "c"),
        "env_kwargs": DEBATE,
        "task": "arithmetic",
        "problems": 2,
        "num_bootstrap": 100,
        "output_dir": str(tmp_path / "run"),
        "progress": False,
    }
    return EvalConfig(**{**settings, **kwargs})


def read_lines(tmp_path):
    path = tmp_path / "run" / "episodes" / "eval.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_debate_tournament_seats_every_model_in_every_seat(tmp_path):
    summary = Evaluation(config(tmp_path), policies=debate_policies()).run()
    lines = read_lines(tmp_path)
    assert len(lines) == 2 * 3  # 2 problems x 3 rotations
    for problem in (0, 1):
        seats = Counter(
            (agent, model)
            for line in lines
            if line["problem"] == problem
            for agent, model in line["seats"].items()
        )
        assert set(seats.values()) == {1} and len(seats) == 9  # each model once in each seat
    assert summary.tournament is not None
    board = summary.tournament.leaderboard
    assert set(board.models) <= {"a", "b", "c"}
    c = summary.score("c")
    votes_cast = {r.model: r.votes_cast for r in summary.tournament.rows}
    assert c.turn_parse_error == 1.0 and votes_cast["c"] == 0 and votes_cast["a"] > 0
    assert summary.score("a").turn_parse_error == 0.0
    text = summary.to_text()
    assert "Ranked by Bradley-Terry ratings" in text and "| rank | model | rating |" in text
    saved = json.loads((tmp_path / "run" / "summary.json").read_text())
    assert saved["tournament"]["votes_total"] == summary.tournament.votes_total
    page = (tmp_path / "run" / "report" / "index.html").read_text()
    for piece in ("Evaluation: scores", "Debate tournament: leaderboard", "Vote matrix"):
        assert piece in page
    assert "no metrics.jsonl" not in page
    transcript = (tmp_path / "run" / "report" / "eval.html").read_text()
    assert "seats" in transcript and "p00000-s000" in transcript


def test_a_restart_plays_only_the_missing_episodes_and_repairs_a_torn_line(tmp_path):
    Evaluation(config(tmp_path, problems=1), policies=debate_policies()).run()
    path = tmp_path / "run" / "episodes" / "eval.jsonl"
    with path.open("a") as f:
        f.write('{"episode_id": "p00001-s0')  # a kill while writing the next line
    Counting.requests = 0
    with pytest.warns(UserWarning, match="dropped a torn last line"):
        Evaluation(config(tmp_path, problems=2), policies=debate_policies()).run()
    ids = [line["episode_id"] for line in read_lines(tmp_path)]
    assert ids == [f"p{p:05d}-s{s:03d}" for p in (0, 1) for s in range(3)]
    # 3 new debates x 3 agents x 2 rounds, and each model's majority vote, measured again
    # for 2 problems: 3 models x 2 problems x 3 answers alone.
    assert Counting.requests == 3 * 3 * 2 + 3 * 2 * 3
    Counting.requests = 0
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        Evaluation(config(tmp_path, problems=2), policies=debate_policies()).run()
    assert Counting.requests == 0  # nothing left to play


def test_a_folder_of_another_evaluation_is_refused(tmp_path):
    Evaluation(config(tmp_path, problems=1), policies=debate_policies()).run()
    with pytest.raises(
        ValueError, match=r"other settings \(temperature: 0.7 -> 0.2\).*--output-dir"
    ):
        Evaluation(config(tmp_path, temperature=0.2), policies=debate_policies())


def test_more_problems_than_the_task_has_are_refused(tmp_path):
    with pytest.raises(ValueError, match="problems=7, but task='default' of env='debate' has 6"):
        Evaluation(config(tmp_path, task="default", problems=7), policies=debate_policies())


def test_before_and_after_in_expert_iteration(tmp_path):
    policies = {
        "base": ScriptedPolicy(ScriptedMathSolver(first_attempt="wrong")),
        "trained": ScriptedPolicy(ScriptedMathSolver(first_attempt="right")),
    }
    settings = config(
        tmp_path, models=("base", "trained"), env="expert_iteration", env_kwargs={}, problems=4
    )
    evaluation = Evaluation(settings, policies=policies)
    assert evaluation.seating_mode == "self"
    summary = evaluation.run()
    base, trained = summary.score("base"), summary.score("trained")
    assert (base.score.mean, trained.score.mean) == (0.0, 1.0)
    assert math.isnan(trained.turn_parse_error)  # expert iteration parses no answer format
    assert trained.difference is not None
    assert (trained.difference.mean, trained.difference.low, trained.difference.high) == (1, 1, 1)
    assert trained.metrics["correct"] == 1.0 and summary.tournament is None
    assert "| trained | 4 | 1.000 [1.000, 1.000] | 1.000 [1.000, 1.000] |" in summary.to_text()


def test_code_collaboration_scores_each_model_as_a_team(tmp_path):
    from llm_envs.code_collab import load_problems

    problems = load_problems("humaneval")
    policies = {
        "canonical": ScriptedPolicy(CanonicalCoder(problems)),
        "garbage": ScriptedPolicy(GarbageCoder()),
    }
    settings = config(
        tmp_path,
        models=("garbage", "canonical"),
        env="code_collab",
        env_kwargs={"num_agents": 1, "num_turns": 1},
        task="humaneval",
        problems=2,
    )
    summary = Evaluation(settings, policies=policies).run()
    assert summary.score("canonical").metrics["pass_rate"] == 1.0
    assert summary.score("garbage").metrics["pass_rate"] == 0.0
    assert summary.score("canonical").difference.mean > 0


def line(episode, seats, votes, correct=None):
    """A results line: seats of agent_0.. and votes (author, a, op, b)."""
    agents = {f"agent_{i}": m for i, m in enumerate(seats)}
    metrics = {
        a: ({} if correct is None else {"solution_correct": correct[m]}) for a, m in agents.items()
    }
    return {
        "episode_id": episode,
        "problem": 0,
        "seats": agents,
        "returns": dict.fromkeys(agents, 0.0),
        "metrics": metrics,
        "turns_taken": dict.fromkeys(agents, 1),
        "turn_parse_errors": dict.fromkeys(agents, 0),
        "votes": votes,
    }


def preferring_x() -> list[dict]:
    """Seats (x, y, z) rotated; each judge prefers "x" over the other model it judges."""
    lines = []
    for d, seats in enumerate([("x", "y", "z"), ("y", "z", "x"), ("z", "x", "y")]):
        pos = {m: i for i, m in enumerate(seats)}
        votes = []
        for judge in seats:
            others = [m for m in seats if m != judge]
            winner = "x" if "x" in others else others[0]
            loser = next(m for m in others if m != winner)
            votes.append([pos[judge], pos[winner], ">", pos[loser]])
        lines.append(line(f"d{d}", seats, votes))
    return lines


def test_a_model_every_outside_judge_prefers_ranks_first():
    lines = preferring_x()
    summary = summarize(lines, ["z", "y", "x"], env="debate", num_bootstrap=50)
    assert summary.tournament.rows[0].model == "x"
    renamed = summarize(
        [{**ln, "seats": {a: m.upper() for a, m in ln["seats"].items()}} for ln in lines],
        ["Z", "Y", "X"],
        env="debate",
        num_bootstrap=50,
    )
    assert [r.model.lower() for r in renamed.tournament.rows] == [
        r.model for r in summary.tournament.rows
    ]
    assert [r.rating for r in renamed.tournament.rows] == pytest.approx(
        [r.rating for r in summary.tournament.rows]
    )


def test_without_votes_models_are_ordered_by_correctness_and_marked_unrated():
    correct = {"weak": False, "strong": True, "mid": False}
    lines = [line("d0", ("weak", "strong", "mid"), [], correct)]
    summary = summarize(lines, ["weak", "mid", "strong"], env="debate", num_bootstrap=0)
    assert [r.model for r in summary.tournament.rows] == ["strong", "weak", "mid"]
    assert summary.tournament.ranks == (1, 2, 2)  # nothing tells weak and mid apart
    assert all(r.rating is None for r in summary.tournament.rows)
    assert any("Unrated" in note for note in summary.tournament_notes())
    assert "| 1 | strong | unrated | - |" in summary.tournament_markdown()
    assert summary.ranking_basis().startswith("No judgement compares two models")
    assert summary.ranking_basis() in summary.to_text()


def test_a_model_only_judging_is_unrated_and_unranked_beside_rated_ones():
    # "judge" alone writes the contract: it votes a over b in each debate and is never
    # judged itself. Listing it last would say it lost; it gets no rank instead.
    correct = {"judge": True, "a": False, "b": False}
    lines = [line(f"d{d}", ("a", "b", "judge"), [[2, 0, ">", 1]], correct) for d in range(3)]
    summary = summarize(lines, ["judge", "a", "b"], env="debate", num_bootstrap=0)
    assert [r.model for r in summary.tournament.rows] == ["a", "b", "judge"]
    assert summary.tournament.ranks == (1, 2, 0)
    assert summary.tournament.rows[2].votes_cast == 3
    assert "| - | judge | unrated | - |" in summary.tournament_markdown()
    assert summary.ranking_basis() == (
        "Ranked by Bradley-Terry ratings (Elo scale) from 3 judgements; 1 unrated model "
        "listed after them, without a rank."
    )
    assert any("without a rank" in note for note in summary.tournament_notes())


def test_the_report_of_a_folder_without_an_evaluation_is_unchanged(tmp_path):
    (tmp_path / "episodes").mkdir()
    (tmp_path / "episodes" / "x.jsonl").write_text('{"env": "debate_v0", "turns": []}\n')
    page = write_report(tmp_path).read_text()
    assert "no metrics.jsonl" in page and "Evaluation: scores" not in page
    (tmp_path / "summary.json").write_text("{not json")
    page = write_report(tmp_path).read_text()
    assert "summary.json is not readable JSON" in page


@pytest.mark.parametrize(
    ("votes", "counted"),
    [
        ([[2, 0, ">", 1], [2, 0, ">", 1]], (2, 2)),  # always the lower seat: position
        ([[2, 0, ">", 1], [2, 1, ">", 0], [0, 1, "=", 2]], (1, 2)),  # ties left out
        ([[2, 0, ">", 7], [1, 0, "?", 2]], (0, 0)),  # invalid votes left out
    ],
)
def test_strict_votes_by_seat_are_counted_and_said(votes, counted):
    correct = {"a": True, "b": False, "c": False}
    lines = [line("d0", ("a", "b", "c"), votes, correct)]
    summary = summarize(lines, ["a", "b", "c"], env="debate", num_bootstrap=0)
    assert summary.tournament.seat_order == counted
    saved = summary.to_json()["tournament"]
    assert (saved["strict_votes_lower_seat_first"], saved["strict_votes"]) == counted
    said = [note for note in summary.tournament_notes() if "lower-numbered seat" in note]
    lower, strict = counted
    if strict:
        assert len(said) == 1
        assert said[0].startswith(f"{lower} of {strict} strict votes ({lower / strict:.0%})")
    else:
        assert said == []  # nothing to say without strict votes


def test_two_models_only_a_silent_third_could_judge_are_said_never_compared():
    # The tournament of docs/evaluate.md: "tiny" never votes, so cold and hot judge only
    # each other's games against it, and no vote compares cold with hot.
    lines = []
    for d, seats in enumerate([("cold", "hot", "tiny"), ("hot", "tiny", "cold")]):
        pos = {m: i for i, m in enumerate(seats)}
        votes = [
            [pos["cold"], pos["hot"], ">", pos["tiny"]],
            [pos["hot"], pos["cold"], ">", pos["tiny"]],
        ]
        lines.append(line(f"d{d}", seats, votes))
    summary = summarize(lines, ["cold", "hot", "tiny"], env="debate", num_bootstrap=0)
    assert summary.to_json()["tournament"]["comparison_counts"] == [[0, 0, 2], [0, 0, 2], [2, 2, 0]]
    said = [n for n in summary.tournament_notes() if n.startswith("Never judged")]
    assert said == [
        "Never judged against each other: cold and hot. Only a third model's vote judges a "
        "pair, and none was cast; such a pair's order comes only from each model's record "
        "against the others, not from a comparison."
    ]
    # A tournament where every pair has a judgement says nothing of the kind.
    summary = summarize(preferring_x(), ["x", "y", "z"], env="debate", num_bootstrap=0)
    assert not any(n.startswith("Never judged") for n in summary.tournament_notes())


# --- the reference entrant ----------------------------------------------------------------


def test_the_reference_entrant_answers_right_and_judges_every_pair_by_the_answer(tmp_path):
    # Four entrants over three seats: each pair of the others meets the reference in
    # one seating per problem, and the reference ranks the answers in three levels.
    right = make_arena("debate", DEBATE, "arithmetic", 0, {}).reference()
    policies = {
        "right": right,  # answers like the reference, and judges like it
        "wrong": ScriptedPolicy(scripted_debaters(3, seed=1)),  # "42", random votes
        "broken": ScriptedPolicy(MalformedDebater("prose")),
    }
    models = ("reference", "right", "wrong", "broken")
    summary = Evaluation(config(tmp_path, models=models, problems=3), policies=policies).run()
    lines = read_lines(tmp_path)
    assert len(lines) == 3 * 4  # 3 problems x 4 rotations of 3 seats
    level = {"right": 2, "wrong": 1, "broken": 0}
    judged = set()
    for line in lines:
        by_seat = {int(agent.split("_")[1]): model for agent, model in line["seats"].items()}
        for author, a, op, b in line["votes"]:
            if by_seat[author] != "reference":
                continue
            first, second = level[by_seat[a]], level[by_seat[b]]
            assert (op, first > second) in ((">", True), ("=", False)), line["votes"]
            assert op != "=" or first == second
            judged.add(frozenset((by_seat[a], by_seat[b])))
    assert judged == {
        frozenset(p) for p in (("right", "wrong"), ("right", "broken"), ("wrong", "broken"))
    }
    assert summary.score("reference").metrics["solution_correct"] == 1.0
    board = summary.tournament.leaderboard
    rated = [m for m in board.models if m != "reference"]
    assert rated == ["right", "wrong", "broken"]
    assert not any(n.startswith("Never judged") for n in summary.tournament_notes())


@pytest.mark.parametrize(
    ("settings", "match"),
    [
        (
            {"env": "expert_iteration", "task": "coophumaneval", "env_kwargs": {}},
            "CoopHumanEval/0 has none; use --task humaneval or mbpp",
        ),
        ({"task": "default"}, "has none; use --task arithmetic or gsm8k"),
        ({"env_kwargs": {**DEBATE, "observation_mode": "chat"}}, "observation_mode at 'prompt'"),
        ({"models": ("reference@temperature=0.5", "a")}, "is scripted and samples nothing"),
    ],
)
def test_the_reference_entrant_is_refused_where_it_cannot_play(tmp_path, settings, match):
    with pytest.raises(ValueError, match=match):
        # ("tiny": a model that loads offline, so the reference is what is refused)
        Evaluation(config(tmp_path, **{"models": ("reference", "tiny"), **settings}))


def test_a_reference_entrant_is_never_loaded_as_a_model():
    from baselines.eval.entrants import build_policies, parse_entrants

    with pytest.raises(ValueError, match="played by the environment's scripted players"):
        build_policies(parse_entrants(["reference", "tiny"]))


def test_scripted_entrants_play_without_a_model(tmp_path):
    # TicTacToe's random player against its minimax player (reference), both scripted.
    settings = {
        "models": ("scripted:random", "reference"),
        "env": "textarena",
        "env_kwargs": {"game": "TicTacToe-v0"},
        "task": "default",
        "problems": 3,
        "seating": "rotations",
    }
    summary = Evaluation(config(tmp_path, **settings)).run()
    lines = read_lines(tmp_path)
    assert len(lines) == 6  # three games, each with either player first
    wins = summary.to_json()
    assert "scripted:random" in json.dumps(wins) and "reference" in json.dumps(wins)
    # Minimax never loses: the random player wins no game.
    for line in lines:
        random_seat = next(a for a, m in line["seats"].items() if m == "scripted:random")
        assert line["summary"]["outcome"][random_seat] in ("loss", "draw")


def test_a_scripted_set_the_family_lacks_is_refused_before_playing(tmp_path):
    with pytest.raises(ValueError, match=r"has scripted players \['reference'\]"):
        Evaluation(config(tmp_path, models=("scripted:random", "reference")))
    with pytest.raises(ValueError, match="is scripted and samples nothing"):
        Evaluation(config(tmp_path, models=("scripted:random@temperature=1", "reference")))


def test_a_training_runs_folder_is_refused_naming_a_folder_of_its_own(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "metrics.jsonl").write_text('{"iteration": 0, "loss": 1.0}\n')
    with pytest.raises(ValueError, match="is a training run's folder") as refused:
        Evaluation(config(tmp_path, models=("reference", "tiny")))
    assert f"--output-dir '{run / 'eval'}'" in str(refused.value)
    assert sorted(p.name for p in run.iterdir()) == ["metrics.jsonl"]  # nothing written


def test_a_folder_that_cannot_be_made_fails_before_any_episode(tmp_path):
    (tmp_path / "file").write_text("")
    with pytest.raises(NotADirectoryError, match="cannot be created"):
        Evaluation(
            config(tmp_path, models=("reference", "tiny"), output_dir=str(tmp_path / "file" / "x"))
        )
