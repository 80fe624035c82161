"""Each check's formula and threshold, on hand-made episodes with hand-computed numbers."""

from __future__ import annotations

import math

import pytest

from baselines.check import checks
from baselines.check.play import Episode, Play


def episode(returns, *, measured=None, group=0, players=None, turns=None, record=None):
    measured = tuple(returns) if measured is None else measured
    return Episode(dict(returns), measured, players or {}, group, turns or {}, {}, record)


def plays_of(reference, empty, random_text):
    return {
        "reference": Play([episode({"a": r}) for r in reference]),
        "empty": Play([episode({"a": r}) for r in empty]),
        "random_text": Play([episode({"a": r}) for r in random_text]),
    }


@pytest.mark.parametrize(
    ("reference", "empty", "random_text", "declared", "margin", "status"),
    [
        # means 1, -1, 0: margin 1 - 0 = 1, needs 0.1 * width 2 = 0.2
        ([1.0, 1.0], [-1.0, -1.0], [0.0, 0.0], (-1.0, 1.0), 1.0, "PASS"),
        # means 0.5, 0.4, 0: margin 0.1 < 0.2
        ([0.5, 0.5], [0.4, 0.4], [0.0, 0.0], (-1.0, 1.0), 0.1, "FAIL"),
        # the reference scores 0 like the others: margin 0
        ([0.0, 0.0], [0.0, 0.0], [0.0, 0.0], (0.0, 1.0), 0.0, "FAIL"),
        # no declared range: the needed margin is 0.1 * 1; means 0.25, 0, 0.125
        ([0.5, 0.0], [0.0, 0.0], [0.25, 0.0], None, 0.125, "PASS"),
        # code_collab's scale: means 4.2, 0, 0; needs 0.1 * 8 = 0.8
        ([4.2], [0.0], [0.0], (0.0, 8.0), 4.2, "PASS"),
    ],
)
def test_the_reference_must_beat_the_empty_and_the_random_answer(
    reference, empty, random_text, declared, margin, status
):
    result = checks.reference(plays_of(reference, empty, random_text), declared, 0.1)
    assert result.status == status
    assert result.numbers["margin"] == pytest.approx(margin)


def test_only_the_measured_seats_count_for_the_reference():
    # agent "b" is the opponent (the reference players): its return is not the candidate's
    plays = {
        "reference": Play([episode({"a": 0.0, "b": 0.0}, measured=("a",))]),
        "empty": Play([episode({"a": -1.0, "b": 1.0}, measured=("a",))]),
        "random_text": Play([episode({"a": -1.0, "b": 1.0}, measured=("a",))]),
    }
    result = checks.reference(plays, (-1.0, 1.0), 0.1)
    assert result.numbers["mean_return"] == {"reference": 0.0, "empty": -1.0, "random_text": -1.0}
    assert result.status == "PASS"


@pytest.mark.parametrize(
    ("groups", "varied", "total", "status"),
    [
        ({0: [1.0, 1.0], 1: [0.0, 1.0]}, 1, 2, "PASS"),  # 1/2 = 50% >= 50%
        ({0: [0.5, 0.5], 1: [0.5, 0.5], 2: [0.5, 0.5]}, 0, 3, "FAIL"),  # constant rewards
        ({0: [0.0, 1.0], 1: [0.0, 0.0], 2: [1.0, 1.0]}, 1, 3, "FAIL"),  # 33% < 50%
        ({0: [0.0, 1e-12]}, 0, 1, "FAIL"),  # closer than TIE: equal
        ({0: [-1.0, 1.0]}, 1, 1, "PASS"),
    ],
)
def test_the_share_of_groups_whose_rewards_vary(groups, varied, total, status):
    episodes = [episode({"a": r}, group=g) for g, rs in groups.items() for r in rs]
    result = checks.reward_variance("reward_variance", Play(episodes), 0.5, "test")
    assert (result.numbers["varied"], result.numbers["groups"], result.status) == (
        varied,
        total,
        status,
    )


def test_a_group_of_several_agents_varies_across_its_agents():
    # one debate is one group: its agents' returns 1 and 0 differ
    assert checks.varied_groups([episode({"agent_0": 1.0, "agent_1": 0.0})]) == (1, 1)
    # only the measured agents count (expert iteration groups the solver alone)
    only = episode({"solver": 1.0, "critic": 0.0}, measured=("solver",))
    assert checks.varied_groups([only]) == (0, 1)


@pytest.mark.parametrize(
    ("returns", "declared", "status", "words"),
    [
        ([0.0, 1.0], (0.0, 1.0), "PASS", "every return of 2 in [0, 1] (seen 0 .. 1)"),
        ([0.0, 1.0 + 1e-12], (0.0, 1.0), "PASS", "every return of 2 in [0, 1]"),  # rounding
        ([0.0, 2.0], (0.0, 1.0), "FAIL", "1 of 2 returns outside [0, 1] (seen 0 .. 2)"),
        ([-0.5], (0.0, 1.0), "FAIL", "1 of 1 returns outside [0, 1]"),
        ([0.0, 5.0], None, "SKIP", "declares no reward_range"),
        ([0.0, math.nan], None, "FAIL", "1 of 2 returns are not finite"),
        ([math.inf], (0.0, 1.0), "FAIL", "1 of 1 returns are not finite"),
    ],
)
def test_returns_against_the_declared_range(returns, declared, status, words):
    result = checks.reward_range([Play([episode({"a": r}) for r in returns])], declared)
    assert result.status == status
    assert words in result.summary


@pytest.mark.parametrize(
    ("a", "b", "difference"),
    [
        ({"x": [1, 2]}, {"x": [1, 2]}, None),
        ({"x": [1, 2]}, {"x": [1, 3]}, "['x'][1]: 2 != 3"),
        ({"x": 1}, {"x": 1, "y": 2}, "['y'] only in the second play"),
        ([1, 2], [1], ": 2 items != 1"),
        ({"r": math.nan}, {"r": math.nan}, None),  # NaN is the same NaN here
        ({"r": 0.1 + 0.2}, {"r": 0.3}, "['r']: 0.30000000000000004 != 0.3"),  # no tolerance
    ],
)
def test_the_first_difference_of_two_plays(a, b, difference):
    assert checks.first_difference(a, b) == difference


def test_determinism_compares_turns_finals_and_records():
    def played(noise):
        turns = {"a": [((121, 101, 115), 1.0, {"turn": 1, "noise": noise})]}
        return Play([episode({"a": 1.0}, turns=turns, record={"turns": 1})])

    assert checks.determinism(played(0.5), played(0.5)).status == "PASS"
    failed = checks.determinism(played(0.5), played(0.25))
    assert failed.status == "FAIL"
    assert "['turns']['a'][0][2]['noise']: 0.5 != 0.25" in failed.summary


def judged(agreement, lower, player="reference"):
    turns = [
        ((), 0.0, {"vote_agreement": a, "vote_lower_seat": b})
        for a, b in zip(agreement, lower, strict=True)
    ]
    return Play([episode({}, players={"agent_0": player}, turns={"agent_0": turns})])


@pytest.mark.parametrize(
    ("agreement", "lower", "status"),
    [
        ([1.0] * 20, [0.0, 1.0] * 10, "PASS"),  # agrees; lower seat 0.5 exactly
        ([0.5] * 20, [0.0, 1.0] * 10, "FAIL"),  # agreement 0.5 < 0.6
        ([1.0] * 20, [1.0] * 20, "FAIL"),  # always the lower seat: 1 - 0.5 = 0.5 > 0.15 (error 0)
        # 0.7 ± 0.21 (n=20, sd 0.47): 0.2 - 0.21 < 0.15, not shown to be biased
        ([1.0] * 20, [1.0] * 14 + [0.0] * 6, "PASS"),
        ([1.0] * 5, [1.0] * 5, "PASS"),  # 5 answers < min_votes 10: the bias is not judged
    ],
)
def test_the_judge_agrees_and_favours_no_seat(agreement, lower, status):
    result = checks.judge(
        "judge", judged(agreement, lower), {"reference"}, "test",
        min_agreement=0.6, max_bias=0.15, min_votes=10,
    )  # fmt: skip
    assert result.status == status, result.summary


def test_the_judge_reads_only_the_named_players_seats():
    play = judged([0.0] * 20, [0.5] * 20, player="teacher")
    result = checks.judge(
        "judge", play, {"reference"}, "test", min_agreement=0.6, max_bias=0.15, min_votes=10
    )
    assert result.status == "SKIP"  # no reference seat judged anything
    whole = checks.judge("judge", play, None, "t", min_agreement=0.6, max_bias=0.15, min_votes=10)
    assert whole.status == "FAIL" and whole.numbers["agreement"] == 0.0


@pytest.mark.parametrize(
    ("values", "error"),
    [
        ([0.0, 1.0] * 50, 1.96 * math.sqrt(0.25252525 / 100)),  # sample variance 25/99
        ([0.5] * 10, 0.0),
        ([1.0], math.inf),  # one value: no error known
    ],
)
def test_the_margin_of_error(values, error):
    assert checks.margin_of_error(values) == pytest.approx(error, rel=1e-6)


def test_stable_under_load_compares_every_episode():
    alone = Play([episode({"main": 4.2}), episode({"main": 2.1})])
    same = Play([episode({"main": 4.2}), episode({"main": 2.1})])
    flipped = Play([episode({"main": 4.2}), episode({"main": 1.1})])  # a test timed out
    assert checks.stable_under_load(alone, same, 2).status == "PASS"
    result = checks.stable_under_load(alone, flipped, 2)
    assert result.status == "FAIL" and result.numbers["changed"] == [1]


@pytest.mark.parametrize(
    ("steps", "seconds", "limit", "status", "words"),
    [
        (200, 0.5, 5.0, "PASS", "2.5 ms per step over 200 steps"),
        (10, 60.0, 5.0, "FAIL", "6 s per step over 10 steps"),
        (0, 0.0, 5.0, "SKIP", "no step was played"),
    ],
)
def test_time_per_step(steps, seconds, limit, status, words):
    result = checks.step_time([Play([], steps=steps, env_seconds=seconds)], limit)
    assert result.status == status and words in result.summary
