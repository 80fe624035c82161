"""Matchmaking ``anchors``: a fixed opponent, the anchors alone (the bench's ``random`` arm)."""

from __future__ import annotations

import pytest

from baselines.league.matchmaking import matchmaking_probabilities
from baselines.league.pool import League, parse_anchor


def test_anchors_matchmaking_meets_the_anchors_alone():
    pool = ["latest", "scripted:random", "scripted:reference", "snapshot_00000"]
    assert matchmaking_probabilities("anchors", pool, {}, anchors=["scripted:random"]) == {
        "latest": 0.0,
        "scripted:random": 1.0,
        "scripted:reference": 0.0,
        "snapshot_00000": 0.0,
    }
    both = matchmaking_probabilities("anchors", pool, {}, anchors=pool[1:3])
    assert both["scripted:random"] == both["scripted:reference"] == 0.5


def test_a_league_of_one_anchor_always_meets_it():
    league = League(matchmaking="anchors", anchors=[parse_anchor("scripted:random")])
    assert set(league.assign(range(20), seed=3)) == {"scripted:random"}
    league.add_snapshot(0, "league/snapshot_00000")
    assert set(league.assign(range(20), seed=4)) == {"scripted:random"}


def test_anchors_matchmaking_without_an_anchor_is_refused():
    with pytest.raises(ValueError, match="needs an anchor in the pool"):
        matchmaking_probabilities("anchors", ["latest"], {})
