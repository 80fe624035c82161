"""The league's pure parts: matchmaking, online ratings, the pool, an iteration's episodes."""

from __future__ import annotations

import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from baselines.league import (
    LATEST,
    League,
    LeagueRatings,
    Opponent,
    choose,
    game_score,
    league_batch,
    learner_seat,
    matchmaking_probabilities,
    parse_anchor,
    pfsp_weight,
)
from baselines.rollouts import rollout
from baselines.samplers.scripted import ScriptedPolicy
from llm_envs.registration import make_family

probability = st.floats(0.0, 1.0, allow_nan=False)
names = st.lists(st.text("abcdef", min_size=1, max_size=4), min_size=1, max_size=6, unique=True)

# ------------------------------------------------------------------ matchmaking


@given(
    names, st.data(), st.sampled_from(["pfsp", "uniform"]), st.sampled_from(["hard", "variance"])
)
def test_matchmaking_is_a_distribution_over_the_pool(pool, data, mode, weighting):
    wins = {n: data.draw(probability) for n in pool}
    p = matchmaking_probabilities(mode, pool, wins, weighting=weighting)
    assert list(p) == pool
    assert all(v >= 0 for v in p.values())
    assert math.isclose(sum(p.values()), 1.0)


@given(probability, probability)
def test_hard_pfsp_prefers_the_opponents_the_learner_loses_to(a, b):
    # (1 - p)^2 falls as p rises: a harder opponent is never met less often.
    p = matchmaking_probabilities("pfsp", ["a", "b"], {"a": a, "b": b})
    if a < b and (1 - a) ** 2 + (1 - b) ** 2 > 0:
        assert p["a"] >= p["b"]


@pytest.mark.parametrize(
    ("p", "weighting", "weight"),
    [
        *[(0.0, "hard", 1.0), (0.5, "hard", 0.25), (0.75, "hard", 0.0625), (1.0, "hard", 0.0)],
        *[(0.0, "variance", 0.0), (0.5, "variance", 0.25), (0.9, "variance", 0.09)],
    ],
)
def test_pfsp_weights_by_hand(p, weighting, weight):
    assert pfsp_weight(p, weighting) == pytest.approx(weight)


def test_matchmaking_by_hand_and_its_refusals():
    # Beaten for sure by nobody: hard PFSP meets a (p=0.5, weight 1/4) three times as
    # often as b (p=0.75, weight 1/16): 0.8 and 0.2.
    p = matchmaking_probabilities("pfsp", ["a", "b"], {"a": 0.5, "b": 0.75})
    assert p == pytest.approx({"a": 0.8, "b": 0.2})
    # The learner beats everyone for sure: every weight is 0, the draw is uniform.
    assert matchmaking_probabilities("pfsp", ["a", "b"], {"a": 1.0, "b": 1.0}) == {
        "a": 0.5,
        "b": 0.5,
    }
    assert matchmaking_probabilities("latest", ["x", LATEST], {}) == {"x": 0.0, LATEST: 1.0}
    with pytest.raises(ValueError, match="pool is empty"):
        matchmaking_probabilities("pfsp", [], {})
    with pytest.raises(ValueError, match="needs 'latest' in the pool"):
        matchmaking_probabilities("latest", ["x"], {})
    with pytest.raises(ValueError, match="unknown matchmaking 'elo'"):
        matchmaking_probabilities("elo", ["x"], {})  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"in \[0, 1\], got 1.5"):
        pfsp_weight(1.5)


@given(st.integers(0, 2**31))
def test_choice_is_a_function_of_the_seed_and_never_an_impossible_opponent(seed):
    p = {"a": 0.0, "b": 0.3, "c": 0.7}
    assert choose(p, seed) == choose(p, seed) != "a"


def test_choices_follow_the_probabilities():
    p = {"a": 0.8, "b": 0.2}
    drawn = [choose(p, seed) for seed in range(2000)]
    assert drawn.count("a") / len(drawn) == pytest.approx(0.8, abs=0.03)


# ------------------------------------------------------------------ ratings


@given(st.floats(-5, 5), st.floats(-5, 5))
def test_a_game_is_won_by_the_higher_return(a, b):
    assert game_score(a, b) + game_score(b, a) == 1.0
    assert game_score(a, b) == (1.0 if a > b else 0.5 if a == b else 0.0)


@given(st.lists(st.sampled_from([0.0, 0.5, 1.0]), max_size=30), st.floats(0.1, 4.0))
@settings(max_examples=50)
def test_one_opponents_rating_is_the_record_with_the_prior(scores, prior):
    # Two players: the Bradley-Terry fit is the win share, prior_wins added each way.
    ratings = LeagueRatings(decay=1.0, prior_wins=prior)
    ratings.add_iteration([("a", s) for s in scores], ["a"])
    expected = (sum(scores) + prior) / (len(scores) + 2 * prior)
    assert ratings.win_probability()["a"] == pytest.approx(expected, rel=1e-6)
    elo = ratings.ratings()
    assert elo["learner"] == pytest.approx(-elo["a"])


@given(st.lists(st.tuples(st.sampled_from("abc"), st.sampled_from([0.0, 0.5, 1.0])), max_size=30))
@settings(max_examples=50)
def test_ratings_have_mean_zero_and_survive_the_checkpoint(games):
    ratings = LeagueRatings(decay=1.0, prior_wins=1.0)
    ratings.add_iteration(games, "abc")
    assert sum(ratings.ratings().values()) == pytest.approx(0.0, abs=1e-6)
    assert all(0 < p < 1 for p in ratings.win_probability().values())
    assert LeagueRatings.from_json(json.loads(json.dumps(ratings.to_json()))) == ratings


def test_ratings_by_hand_decay_and_refusals():
    ratings = LeagueRatings(decay=0.5, prior_wins=1.0)
    ratings.add_iteration([("a", 1.0), ("a", 1.0), ("a", 0.5)], ["a", "b"])
    assert ratings.tallies == {"a": [2.5, 0.5], "b": [0.0, 0.0]}
    ratings.add_iteration([("a", 0.0)], ["a", "b"])  # the old games count half
    assert ratings.tallies == {"a": [1.25, 1.25], "b": [0.0, 0.0]}
    # Level tallies: every opponent is an even match.
    assert ratings.win_probability() == pytest.approx({"a": 0.5, "b": 0.5})
    ratings.forget("b")
    assert list(ratings.tallies) == ["a"]
    with pytest.raises(ValueError, match=r"rating decay is in \(0, 1\]"):
        LeagueRatings(decay=0.0)
    with pytest.raises(ValueError, match="prior_wins must be finite and > 0"):
        LeagueRatings(prior_wins=0.0)
    with pytest.raises(ValueError, match=r"score is in \[0, 1\], got 2"):
        ratings.add_iteration([("a", 2)], ["a"])


# ------------------------------------------------------------------ the pool


def test_snapshots_enter_every_k_iterations_and_the_oldest_leave():
    league = League(snapshot_every=2, max_snapshots=2, anchors=[parse_anchor("scripted:random")])
    due = [i for i in range(7) if league.snapshot_due(i)]
    assert due == [0, 2, 4, 6]
    for i in due:
        league.record([(o, 1.0) for o in league.names])
        evicted = league.add_snapshot(i, f"league/snapshot_{i:05d}")
        assert evicted == (
            []
            if i < 4
            else [
                Opponent(f"snapshot_{i - 4:05d}", "snapshot", f"league/snapshot_{i - 4:05d}", i - 4)
            ]
        )
    assert league.names == [LATEST, "scripted:random", "snapshot_00004", "snapshot_00006"]
    assert set(league.ratings.tallies) == {LATEST, "scripted:random", "snapshot_00004"}
    assert not league.snapshot_due(6)  # already taken (a resumed run does not take it twice)
    assert League.from_json(json.loads(json.dumps(league.to_json()))) == league
    assert not League(snapshot_every=0).snapshot_due(0)
    assert not League(max_snapshots=0).snapshot_due(0)


def test_assignments_depend_on_the_seed_and_the_group_only():
    league = League(matchmaking="uniform", anchors=[parse_anchor("scripted:random")])
    first = league.assign(range(8), seed=3)
    assert league.assign(range(8), seed=3) == first
    assert league.assign([5], seed=3) == [first[5]]  # a process's share draws the same
    assert set(first) == {LATEST, "scripted:random"}
    assert League(matchmaking="latest").assign(range(4), seed=1) == [LATEST] * 4


@pytest.mark.parametrize(
    ("spec", "opponent"),
    [
        ("scripted:random", Opponent("scripted:random", "scripted", "random")),
        ("http://h:1/v1", Opponent("http://h:1/v1", "endpoint", "http://h:1/v1")),
        ("big=https://h/v1#Qwen/Q", Opponent("big", "endpoint", "https://h/v1#Qwen/Q")),
    ],
)
def test_anchor_specs(spec, opponent):
    assert parse_anchor(spec) == opponent


@pytest.mark.parametrize("spec", ["random", "scripted:", "ftp://h", "x=y"])
def test_bad_anchor_specs_name_both_forms(spec):
    with pytest.raises(ValueError, match=r"is not scripted:SET .* or \[NAME=\]http"):
        parse_anchor(spec)


def test_anchor_names_are_distinct_and_not_the_pools_own():
    with pytest.raises(ValueError, match="distinct names"):
        League(anchors=[parse_anchor("scripted:a"), parse_anchor("scripted:a")])
    with pytest.raises(ValueError, match="other than 'latest' and 'learner'"):
        League(anchors=[Opponent("learner", "scripted", "x")])


# ------------------------------------------------------------------ an iteration's episodes


def test_learner_seats_take_turns():
    assert [learner_seat(("a", "b", "c"), g) for g in range(4)] == ["a", "b", "c", "a"]


def test_a_league_batch_plays_the_learner_in_one_seat_against_the_groups_opponent():
    family = make_family("textarena", {"game": "TicTacToe-v0"})
    plan = league_batch(family, [4, 5], ["scripted:reference", LATEST], seed=9, group_size=3)
    assert plan.groups == [4, 4, 4, 5, 5, 5]
    assert plan.seats == ["agent_0"] * 3 + ["agent_1"] * 3
    assert plan.opponents == ["scripted:reference"] * 3 + [LATEST] * 3
    # The copies of a group are one training episode: the same reset seed and options.
    reference = family.training([4, 5], seed=9)
    assert plan.batch.seeds == [reference.seeds[0]] * 3 + [reference.seeds[1]] * 3
    assert [sorted(t) for t in plan.batch.trained_agents] == [["agent_0"]] * 3 + [["agent_1"]] * 3

    learner = ScriptedPolicy(family.scripted_players(1)["random"])
    minimax = ScriptedPolicy(family.reference_players())
    policies = {"scripted:reference": minimax, LATEST: learner}
    results = rollout(
        plan.batch.envs,
        plan.assignment(learner, policies.__getitem__),
        seeds=plan.batch.seeds,
        options=plan.batch.options,
    )
    groups = plan.to_groups(results)
    # One group per league group, of the learner's trajectories only.
    assert [len(g.trajectories_G) for g in groups] == [3, 3]
    assert groups[0].final_rewards_G == tuple(results[i].final_rewards["agent_0"] for i in range(3))
    games = plan.games(results)
    assert [o for o, _ in games] == plan.opponents  # two seats: one game per episode
    # Minimax never loses: the random learner scores at most a draw against it.
    assert all(score <= 0.5 for o, score in games if o == "scripted:reference")


def test_a_one_seat_family_has_no_league():
    with pytest.raises(ValueError, match="a league needs opponents' seats"):
        league_batch(make_family("expert_iteration"), [0], [LATEST], seed=0, group_size=2)
