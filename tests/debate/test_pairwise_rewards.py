"""Pairwise rewards: the debate recipe's leave-one-out win rate and win minus loss.

Table tests carry hand-computed numbers (the working is in the comments);
property tests run the reusable invariant checks of llm_envs.debate.testing and
compare against a literal, slow transcription of the seed's formulas. Mutation
tests make sure the tables and the checks would catch a wrong formula.
"""

from __future__ import annotations

import pickle
import random
from collections.abc import Callable, Iterable, Sequence

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.debate import (
    PAIRWISE_REWARDS,
    PairwiseResult,
    Vote,
    get_pairwise_reward,
    is_valid_vote,
    win_minus_loss,
    win_rate,
)
from llm_envs.debate.testing import (
    agents_and_vote_lists,
    check_invalid_votes_ignored,
    check_leave_one_out,
    check_no_valid_votes,
    check_pairwise_invariants,
    check_range,
    check_relabelling,
    check_tie_symmetry,
    check_win_minus_loss_relation,
    invalid_votes,
    vote_lists,
)

V = Vote

# (id, num_agents, votes, win_rate, win_minus_loss, total_votes, malformed)
# Notation: W/V wins and votes (win rate), S/M score and matchups (win minus loss);
# "u: a > b" is a vote by u. A vote never counts for the side its author is on.
TABLE = [
    pytest.param(3, [], (0.0, 0.0, 0.0), (0.0, 0.0, 0.0), 0, 0, id="no-votes"),
    # 2: 0 > 1 -> W0=1 V0=1, V1=1; S0=+1 M0=1, S1=-1 M1=1. Agent 2 is in no vote.
    pytest.param(3, [V(2, 0, ">", 1)], (1.0, 0.0, 0.0), (1.0, -1.0, 0.0), 1, 0, id="one-win"),
    # 2: 0 = 1 -> W0=W1=1/2, V0=V1=1; a tie moves no score but is a matchup: S=0, M=1.
    pytest.param(3, [V(2, 0, "=", 1)], (0.5, 0.5, 0.0), (0.0, 0.0, 0.0), 1, 0, id="one-tie"),
    # 2: 0 > 1 -> W0=1 V0=1, V1=1.   0: 1 > 2 -> W1=1 V1=2, V2=1.
    # win rate: 1/1, 1/2, 0/1.  S0=1/1, S1=(-1+1)/2=0, S2=-1/1.
    pytest.param(
        3,
        [V(2, 0, ">", 1), V(0, 1, ">", 2)],
        (1.0, 0.5, 0.0),
        (1.0, 0.0, -1.0),
        2,
        0,
        id="two-votes",
    ),
    # 0: 0 > 1 -> agent 0 wrote it, so only agent 1's side counts: V1=1 (a loss).
    # win rate: agent 0 has V0=0 -> 0; agent 1 0/1. S1=-1/1. The vote is still valid.
    pytest.param(3, [V(0, 0, ">", 1)], (0.0, 0.0, 0.0), (0.0, -1.0, 0.0), 1, 0, id="author-wins"),
    # 1: 0 = 1 -> only agent 0's side counts: W0=1/2 V0=1; S0=0 M0=1.
    pytest.param(3, [V(1, 0, "=", 1)], (0.5, 0.0, 0.0), (0.0, 0.0, 0.0), 1, 0, id="author-ties"),
    # 0: 1 > 2 | W1=1 V1=1, V2=1          | S1=+1, S2=-1
    # 0: 3 = 1 | W3=.5 V3=1, W1+=.5 V1=2  | M3=1, M1=2
    # 1: 0 > 3 | W0=1 V0=1, V3=2          | S0=+1, S3=-1
    # 2: 1 > 0 | W1=2.5 V1=3, V0=2        | S1=+2, S0=0
    # 3: 2 > 1 | W2=1 V2=2, V1=4          | S2=0, S1=+1
    # win rate: 1/2, 2.5/4, 1/2, .5/2.  wml: 0/2, 1/4, 0/2, -1/2.
    pytest.param(
        4,
        [V(0, 1, ">", 2), V(0, 3, "=", 1), V(1, 0, ">", 3), V(2, 1, ">", 0), V(3, 2, ">", 1)],
        (0.5, 0.625, 0.5, 0.25),
        (0.0, 0.25, 0.0, -0.5),
        5,
        0,
        id="four-agents",
    ),
    # 1: 0 > 2, 1: 2 > 0, 2: 0 > 1 -> W0=2 V0=3, V1=1, W2=1 V2=2.
    # S0=(1-1+1)/3, S1=-1/1, S2=(-1+1)/2.
    pytest.param(
        3,
        [V(1, 0, ">", 2), V(1, 2, ">", 0), V(2, 0, ">", 1)],
        (2 / 3, 0.0, 0.5),
        (1 / 3, -1.0, 0.0),
        3,
        0,
        id="thirds",
    ),
    # Repeated votes all count: 3 x (2: 0 > 1) and 2: 1 > 0 -> W0=3 V0=4, W1=1 V1=4.
    # S0=(3-1)/4, S1=(1-3)/4.
    pytest.param(
        3,
        [V(2, 0, ">", 1)] * 3 + [V(2, 1, ">", 0)],
        (0.75, 0.25, 0.0),
        (0.5, -0.5, 0.0),
        4,
        0,
        id="repeats",
    ),
    # Every vote invalid: 3 is out of range, 1 = 1, "<" and "==" are not vote ops, -1 < 0.
    pytest.param(
        3,
        [V(0, 3, ">", 1), V(0, 1, "=", 1), V(2, 0, "<", 1), V(2, 0, "==", 1), V(1, -1, ">", 0)],
        (0.0, 0.0, 0.0),
        (0.0, 0.0, 0.0),
        0,
        5,
        id="all-malformed",
    ),
    # 2: 1 > 1 compares agent 1 with itself: malformed, so agent 1 keeps its single loss.
    pytest.param(
        3,
        [V(2, 0, ">", 1), V(2, 1, ">", 1)],
        (1.0, 0.0, 0.0),
        (1.0, -1.0, 0.0),
        1,
        1,
        id="self-vs-self",
    ),
    # Two agents: 0: 1 > 0 counts only for agent 1 (W1=1 V1=1); 1: 0 > 2 is out of range.
    pytest.param(
        2, [V(0, 1, ">", 0), V(1, 0, ">", 2)], (0.0, 1.0), (0.0, 1.0), 1, 1, id="two-agents"
    ),
]


@pytest.mark.parametrize(
    ("num_agents", "votes", "expected_wr", "expected_wml", "total", "malformed"), TABLE
)
def test_table(
    num_agents: int,
    votes: list[Vote],
    expected_wr: tuple[float, ...],
    expected_wml: tuple[float, ...],
    total: int,
    malformed: int,
) -> None:
    wr = win_rate(votes, num_agents)
    wml = win_minus_loss(votes, num_agents)
    assert wr.rewards == pytest.approx(expected_wr, abs=1e-12)
    assert wml.rewards == pytest.approx(expected_wml, abs=1e-12)
    for result in (wr, wml):
        assert isinstance(result, PairwiseResult)
        assert (result.total_votes, result.malformed, result.any_votes) == (
            total,
            malformed,
            total > 0,
        )
        assert all(type(r) is float for r in result.rewards)


# --------------------------------------------------- a literal seed reference


def seed_reference(
    votes: Iterable[Vote],
    num_agents: int,
    mode: str,
    *,
    leave_one_out: bool = True,
    tie_win: float = 0.5,
    tie_is_matchup: bool = True,
    a_equals_b_valid: bool = False,
) -> tuple[float, ...]:
    """The debate recipe's definitions, transcribed target agent by target agent.

    The keyword arguments switch on deliberate mistakes (mutants), so that the
    tests below can show that they would be caught.
    """
    valid = [
        (u, a, op, b)
        for u, a, op, b in votes
        if 0 <= a < num_agents
        and 0 <= b < num_agents
        and (a != b or a_equals_b_valid)
        and op in (">", "=")
    ]
    rewards = []
    for i in range(num_agents):
        numerator = 0.0
        denominator = 0
        for u, a, op, b in valid:
            if (leave_one_out and u == i) or i not in (a, b):
                continue
            if op == "=" and not tie_is_matchup:
                continue
            denominator += 1
            if mode == "win_rate":
                numerator += (1.0 if i == a else 0.0) if op == ">" else tie_win
            else:
                numerator += (1.0 if i == a else -1.0) if op == ">" else 0.0
        rewards.append(numerator / denominator if denominator else 0.0)
    return tuple(rewards)


def test_reference_matches_table() -> None:
    for row in TABLE:
        num_agents, votes, expected_wr, expected_wml, _, _ = row.values
        assert seed_reference(votes, num_agents, "win_rate") == pytest.approx(expected_wr)
        assert seed_reference(votes, num_agents, "win_minus_loss") == pytest.approx(expected_wml)


MUTANTS = {
    "no-leave-one-out": {"leave_one_out": False},
    "tie-is-a-full-win": {"tie_win": 1.0},
    "tie-is-a-loss": {"tie_win": 0.0},
    "tie-not-a-matchup": {"tie_is_matchup": False},
    "a-equals-b-valid": {"a_equals_b_valid": True},
}
# A tie scores 0 in win minus loss whatever tie_win says, so those two apply to win_rate only.
MUTANT_CASES = [
    (mode, mutant)
    for mode in ("win_rate", "win_minus_loss")
    for mutant in MUTANTS
    if not (mode == "win_minus_loss" and "tie_win" in MUTANTS[mutant])
]


@pytest.mark.parametrize(("mode", "mutant"), MUTANT_CASES)
def test_table_catches_mutant(mode: str, mutant: str) -> None:
    caught = []
    for row in TABLE:
        num_agents, votes, expected_wr, expected_wml, _, _ = row.values
        expected = expected_wr if mode == "win_rate" else expected_wml
        got = seed_reference(votes, num_agents, mode, **MUTANTS[mutant])  # type: ignore[arg-type]
        caught.append(got != pytest.approx(expected))
    assert any(caught), f"no table row tells the {mutant} mutant of {mode} apart"


@given(agents_and_vote_lists(allow_invalid=True, max_size=60))
def test_matches_seed_reference(case: tuple[int, list[Vote]]) -> None:
    num_agents, votes = case
    assert win_rate(votes, num_agents).rewards == pytest.approx(
        seed_reference(votes, num_agents, "win_rate"), abs=1e-12
    )
    assert win_minus_loss(votes, num_agents).rewards == pytest.approx(
        seed_reference(votes, num_agents, "win_minus_loss"), abs=1e-12
    )


# ------------------------------------------------------- invariant properties


@given(agents_and_vote_lists(allow_invalid=True))
def test_win_rate_invariants(case: tuple[int, list[Vote]]) -> None:
    num_agents, votes = case
    check_pairwise_invariants(win_rate, votes, num_agents, low=0.0, high=1.0)


@given(agents_and_vote_lists(allow_invalid=True))
def test_win_minus_loss_invariants(case: tuple[int, list[Vote]]) -> None:
    num_agents, votes = case
    check_pairwise_invariants(win_minus_loss, votes, num_agents, low=-1.0, high=1.0)


@given(agents_and_vote_lists(allow_invalid=True))
def test_win_minus_loss_is_twice_win_rate_minus_one_without_ties(
    case: tuple[int, list[Vote]],
) -> None:
    num_agents, votes = case
    check_win_minus_loss_relation(win_rate, win_minus_loss, votes, num_agents)


@given(agents_and_vote_lists(allow_invalid=True), st.randoms(use_true_random=False))
def test_counters_and_order(case: tuple[int, list[Vote]], rng: random.Random) -> None:
    num_agents, votes = case
    shuffled = votes[:]
    rng.shuffle(shuffled)
    for reward_fn in (win_rate, win_minus_loss):
        result = reward_fn(votes, num_agents)
        assert result.total_votes + result.malformed == len(votes)
        assert result.total_votes == sum(is_valid_vote(v, num_agents) for v in votes)
        assert result.any_votes == (result.total_votes > 0)
        # The order of votes never matters, and any iterable (a generator) is accepted.
        assert reward_fn(shuffled, num_agents) == result
        assert reward_fn((v for v in votes), num_agents) == result


@given(vote_lists(4), st.lists(invalid_votes(4), min_size=1, max_size=8))
def test_drawn_invalid_votes_are_ignored(votes: list[Vote], invalid: list[Vote]) -> None:
    assert not any(is_valid_vote(v, 4) for v in invalid)
    for reward_fn in (win_rate, win_minus_loss):
        check_invalid_votes_ignored(reward_fn, votes, 4, invalid)
        check_no_valid_votes(reward_fn, invalid, 4)


def test_valid_votes_strategy_draws_only_valid_votes() -> None:
    @given(vote_lists(3, allow_ties=False))
    def inner(votes: list[Vote]) -> None:
        assert all(is_valid_vote(v, 3) and v.op == ">" for v in votes)

    inner()


# -------------------------------------------------- the checks catch mutants


def _mutant(mode: str, **mistakes: object) -> Callable[[list[Vote], int], tuple[float, ...]]:
    return lambda votes, n: seed_reference(votes, n, mode, **mistakes)  # type: ignore[arg-type]


def _doubled(votes: list[Vote], n: int) -> tuple[float, ...]:
    return tuple(2 * r for r in win_rate(votes, n).rewards)


def _favours_agent_0(votes: list[Vote], n: int) -> tuple[float, ...]:
    rewards = list(win_rate(votes, n).rewards)
    rewards[0] = max(rewards[0], 0.75)
    return tuple(rewards)


def _half_by_default(votes: list[Vote], n: int) -> tuple[float, ...]:
    return tuple(r if r else 0.5 for r in win_rate(votes, n).rewards)


def _tie_favours_a(votes: list[Vote], n: int) -> tuple[float, ...]:
    return win_rate([V(u, a, ">" if op == "=" else op, b) for u, a, op, b in votes], n).rewards


def _shrunk_wml(votes: list[Vote], n: int) -> tuple[float, ...]:
    return tuple(0.9 * r for r in win_minus_loss(votes, n).rewards)


TWO_VOTES = [V(2, 0, ">", 1), V(1, 0, "=", 2)]
CHECK_MUTANTS: list[tuple[str, Callable[[], None]]] = [
    ("range", lambda: check_range(_doubled, TWO_VOTES, 3, low=0.0, high=1.0)),
    (
        "leave-one-out",
        lambda: check_leave_one_out(_mutant("win_rate", leave_one_out=False), TWO_VOTES, 3),
    ),
    ("relabelling", lambda: check_relabelling(_favours_agent_0, TWO_VOTES, 3)),
    ("tie symmetry", lambda: check_tie_symmetry(_tie_favours_a, TWO_VOTES, 3)),
    ("no-valid-vote", lambda: check_no_valid_votes(_half_by_default, [], 3)),
    (
        "invalid votes not ignored",
        lambda: check_invalid_votes_ignored(
            _mutant("win_rate", a_equals_b_valid=True), TWO_VOTES, 3
        ),
    ),
    (
        "win_minus_loss != 2",
        lambda: check_win_minus_loss_relation(win_rate, _shrunk_wml, TWO_VOTES, 3),
    ),
]


@pytest.mark.parametrize(("message", "run_check"), CHECK_MUTANTS, ids=[m for m, _ in CHECK_MUTANTS])
def test_checks_catch_mutants(message: str, run_check: Callable[[], None]) -> None:
    with pytest.raises(AssertionError, match=message):
        run_check()


def test_checks_count_invalid_votes_in_malformed() -> None:
    def forgets_malformed(votes: Sequence[Vote], n: int) -> PairwiseResult:
        result = win_rate(votes, n)
        return PairwiseResult(result.rewards, result.total_votes, 0, result.any_votes)

    with pytest.raises(AssertionError, match="malformed"):
        check_invalid_votes_ignored(forgets_malformed, TWO_VOTES, 3)  # type: ignore[arg-type]


# ---------------------------------------------------------- errors and API


@pytest.mark.parametrize("num_agents", [1, 0, -3, 2.0, True, "3"])
def test_num_agents_must_be_an_int_of_at_least_two(num_agents: object) -> None:
    for reward_fn in (win_rate, win_minus_loss):
        with pytest.raises(ValueError, match=r"num_agents must be an int >= 2, got"):
            reward_fn([], num_agents)  # type: ignore[arg-type]


def test_unhashable_votes_name_the_fix() -> None:
    with pytest.raises(TypeError, match=r"Vote\(\*item\)"):
        win_rate([[0, 1, ">", 2]], 3)  # type: ignore[list-item]


def test_ids_are_compared_by_value_and_odd_items_are_malformed() -> None:
    np = pytest.importorskip("numpy")
    votes = [
        (0, 1, ">", 2),  # a plain tuple is a vote too
        (0, np.int64(1), ">", np.int64(2)),  # equal to ints, as in `1 in range(3)`
        (0, 1.0, ">", 2.0),
        (0, "1", ">", 2),  # a string is no id
        (0, 1, ">"),  # not a 4-tuple
        "0>1",
    ]
    result = win_rate(votes, 3)  # type: ignore[arg-type]
    assert (result.total_votes, result.malformed) == (3, 3)
    assert result.rewards == (0.0, 1.0, 0.0)
    assert [is_valid_vote(v, 3) for v in votes] == [True, True, True, False, False, False]  # type: ignore[arg-type]


def test_registry_and_lookup() -> None:
    assert dict(PAIRWISE_REWARDS) == {"win_rate": win_rate, "win_minus_loss": win_minus_loss}
    assert get_pairwise_reward("win_minus_loss") is win_minus_loss
    with pytest.raises(ValueError, match=r"unknown pairwise reward mode 'winrate'.*win_rate"):
        get_pairwise_reward("winrate")
    with pytest.raises(TypeError):
        PAIRWISE_REWARDS["other"] = win_rate  # type: ignore[index]


def test_result_is_frozen_and_picklable() -> None:
    result = win_rate([V(2, 0, ">", 1)], 3)
    assert pickle.loads(pickle.dumps(result)) == result
    with pytest.raises(AttributeError):
        result.total_votes = 3  # type: ignore[misc]


def test_large_vote_list() -> None:
    # The benchmark's size: 100k votes among 8 agents, a tenth of them malformed.
    rng = random.Random(0)
    votes = [
        V(rng.randrange(8), rng.randrange(9), rng.choice(">="), rng.randrange(8))
        for _ in range(100_000)
    ]
    wr = win_rate(votes, 8)
    wml = win_minus_loss(votes, 8)
    assert wr.total_votes + wr.malformed == 100_000
    assert wr.rewards == pytest.approx(seed_reference(votes, 8, "win_rate"))
    assert wml.rewards == pytest.approx(seed_reference(votes, 8, "win_minus_loss"))
