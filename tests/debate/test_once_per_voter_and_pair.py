"""once_per_voter_and_pair: the opt-in rule that counts a voter's comparison of a pair once.

Table tests carry hand-computed numbers; property tests pin the rule's
algebra (idempotent, a subsequence, the identity without repeats) and what it
does to the rewards.
"""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.debate import Vote, is_valid_vote, once_per_voter_and_pair, win_minus_loss, win_rate
from llm_envs.debate.testing import vote_lists

V = Vote

# The spam round: agent 0 votes 2 > 1, agent 1 votes 0 > 2, agent 2 writes 1 > 0 100 times.
HONEST = [V(0, 2, ">", 1), V(1, 0, ">", 2)]
SPAM = [V(2, 1, ">", 0)] * 100


# (votes, kept)
DEDUP_TABLE = [
    pytest.param([], [], id="no-votes"),
    pytest.param(HONEST + SPAM, [*HONEST, V(2, 1, ">", 0)], id="one-voter-repeats-100-times"),
    # The pair is unordered: 1 > 0 after 0 > 1 is a contradiction, and the first stays.
    pytest.param([V(2, 0, ">", 1), V(2, 1, ">", 0)], [V(2, 0, ">", 1)], id="contradiction"),
    pytest.param([V(2, 0, "=", 1), V(2, 0, ">", 1)], [V(2, 0, "=", 1)], id="tie-then-win"),
    pytest.param([V(2, 1, ">", 0), V(2, 0, "=", 1)], [V(2, 1, ">", 0)], id="win-then-tie"),
    # Different voters on the same pair, or one voter on different pairs: all kept.
    pytest.param(
        [V(2, 0, ">", 1), V(3, 0, ">", 1), V(2, 0, ">", 3)],
        [V(2, 0, ">", 1), V(3, 0, ">", 1), V(2, 0, ">", 3)],
        id="distinct-voters-and-pairs",
    ),
    # Invalid votes pass through (counted as malformed later); an invalid first vote does
    # not take the pair's place, so the valid 0 > 1 after "0 < 1" is kept.
    pytest.param(
        [V(2, 0, "<", 1), V(2, 0, ">", 1), V(2, 7, ">", 0), V(2, 7, ">", 0), V(2, 1, "=", 1)],
        [V(2, 0, "<", 1), V(2, 0, ">", 1), V(2, 7, ">", 0), V(2, 7, ">", 0), V(2, 1, "=", 1)],
        id="invalid-votes-kept",
    ),
]


@pytest.mark.parametrize(("votes", "kept"), DEDUP_TABLE)
def test_dedup_table(votes: list[Vote], kept: list[Vote]) -> None:
    assert once_per_voter_and_pair(votes, 4) == kept


# One voter repeats a comparison 100 times (three agents, one round); the working:
# as written: agent 0: 1 win (1: 0 > 2), 100 losses (2: 1 > 0) -> 1/101; S = (1 - 100)/101
#             agent 1: 1 loss (0: 2 > 1), 100 wins -> 100/101;          S = (100 - 1)/101
#             agent 2: 1 win (0: 2 > 1), 1 loss (1: 0 > 2) -> 1/2;      S = 0/2
# once:       the 100 collapse to one: every agent 1 win, 1 loss -> 1/2; S = 0
SPAM_TABLE = [
    pytest.param(
        False, (1 / 101, 100 / 101, 0.5), (-99 / 101, 99 / 101, 0.0), 102, id="as_written"
    ),
    pytest.param(True, (0.5, 0.5, 0.5), (0.0, 0.0, 0.0), 3, id="once_per_pair"),
]


@pytest.mark.parametrize(("once", "expected_wr", "expected_wml", "total"), SPAM_TABLE)
def test_one_voter_repeating_a_comparison_100_times(
    once: bool, expected_wr: tuple[float, ...], expected_wml: tuple[float, ...], total: int
) -> None:
    votes = HONEST + SPAM
    counted = once_per_voter_and_pair(votes, 3) if once else votes
    assert win_rate(counted, 3).rewards == pytest.approx(expected_wr)
    assert win_minus_loss(counted, 3).rewards == pytest.approx(expected_wml)
    assert win_rate(counted, 3).total_votes == total


@pytest.mark.parametrize("num_agents", [1, 0, True])
def test_num_agents_is_checked(num_agents: int) -> None:
    with pytest.raises(ValueError, match="num_agents must be an int >= 2"):
        once_per_voter_and_pair([], num_agents)


# ------------------------------------------------------------------------ properties

ROUNDS = vote_lists(4, allow_invalid=True, max_size=30)


def _key(vote: Vote) -> tuple[int, frozenset[int]]:
    return (vote.author, frozenset((vote.a, vote.b)))


@given(ROUNDS)
def test_idempotent(votes: list[Vote]) -> None:
    once = once_per_voter_and_pair(votes, 4)
    assert once_per_voter_and_pair(once, 4) == once


@given(ROUNDS)
def test_keeps_a_subsequence_and_never_increases_a_count(votes: list[Vote]) -> None:
    once = once_per_voter_and_pair(votes, 4)
    remaining = iter(votes)
    assert all(any(v == w for w in remaining) for v in once), "not a subsequence, in order"
    assert not Counter(once) - Counter(votes)
    assert win_rate(once, 4).total_votes <= win_rate(votes, 4).total_votes
    # Invalid votes all stay, so the malformed count never changes.
    assert win_rate(once, 4).malformed == win_rate(votes, 4).malformed


@given(ROUNDS)
def test_one_vote_per_voter_and_pair_the_first_written(votes: list[Vote]) -> None:
    once = once_per_voter_and_pair(votes, 4)
    valid = [v for v in votes if is_valid_vote(v, 4)]
    kept = [v for v in once if is_valid_vote(v, 4)]
    first: dict[tuple[int, frozenset[int]], Vote] = {}
    for v in valid:
        first.setdefault(_key(v), v)
    assert kept == list(first.values())


@given(ROUNDS)
def test_identity_without_repeats(votes: list[Vote]) -> None:
    seen: set[tuple[int, frozenset[int]]] = set()
    unique = []
    for v in votes:
        if not is_valid_vote(v, 4) or _key(v) not in seen:
            unique.append(v)
            seen.add(_key(v))
    assert once_per_voter_and_pair(unique, 4) == unique


@given(ROUNDS, st.integers(1, 20))
def test_repeating_the_votes_changes_nothing(votes: list[Vote], times: int) -> None:
    # However often an agent repeats what it wrote, adjacent or not, the rewards are
    # those of writing it once.
    once = once_per_voter_and_pair(votes, 4)
    valid_once = [v for v in once if is_valid_vote(v, 4)]
    for spammed in ([v for v in votes for _ in range(times)], votes * times):
        counted = once_per_voter_and_pair(spammed, 4)
        assert [v for v in counted if is_valid_vote(v, 4)] == valid_once
        assert win_rate(counted, 4).rewards == win_rate(once, 4).rewards
        assert win_minus_loss(counted, 4).rewards == win_minus_loss(once, 4).rewards
