"""The debate's opt-in vote_counting="once_per_pair": one voter repeating a comparison.

The debate recipe counts every comparison as written (the default, "as_written"); the
option counts each agent's comparison of a pair of agents once per round, the
first one written. Table tests carry hand-computed numbers; property tests
check that the default is exactly today's reward and the option is the pure
rule applied to each answer.
"""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.debate import (
    PAIRWISE_REWARDS,
    DebateConfig,
    DebateEnv,
    Vote,
    env,
    format_answer,
    once_per_voter_and_pair,
    parse_response,
    raw_env,
    win_rate,
)
from llm_envs.testing.conformance import check_aec_env, play_aec


def answer(comparisons=(), consensus=False):
    return format_answer("x", "N/A", comparisons, consensus, "r")


def final_rewards(seen):
    return {agent: reward for agent, _, reward, term, trunc, _ in seen if term or trunc}


def last_infos(seen):
    return {agent: info for agent, *_, info in seen}


def play(debate, actions):
    texts = iter(actions)
    return play_aec(debate, lambda agent, obs, info: next(texts), seed=0)


# Round 1: everyone proposes (no votes). Round 2, everyone says YES and votes:
#   agent 0: Agent 2 > Agent 1;  agent 1: Agent 0 > Agent 2;  agent 2: Agent 1 > Agent 0, 100 times.
SPAM_DEBATE = [
    answer(),
    answer(),
    answer(),
    answer(["Agent 2 > Agent 1"], consensus=True),
    answer(["Agent 0 > Agent 2"], consensus=True),
    answer(["Agent 1 > Agent 0"] * 100, consensus=True),
]

# Leave-one-out win rate W/V and win minus loss S/M, by hand:
# as written (the seed): 102 votes.
#   agent 0: wins (1: 0 > 2) = 1, losses (2: 1 > 0) x 100 -> 1/101;     S = (1 - 100)/101
#   agent 1: loses (0: 2 > 1) once, wins (2: 1 > 0) x 100 -> 100/101;   S = (100 - 1)/101
#   agent 2: wins (0: 2 > 1), loses (1: 0 > 2) -> 1/2;                  S = 0/2
# once per pair: agent 2's 100 lines are one vote, 3 votes in all.
#   every agent: one win, one loss -> 1/2;                              S = 0
SPAM_TABLE = [
    pytest.param(
        "as_written",
        "win_rate",
        {"agent_0": 1 / 101, "agent_1": 100 / 101, "agent_2": 0.5},
        102,
        0,
        id="as_written-win_rate",
    ),
    pytest.param(
        "as_written",
        "win_minus_loss",
        {"agent_0": -99 / 101, "agent_1": 99 / 101, "agent_2": 0.0},
        102,
        0,
        id="as_written-win_minus_loss",
    ),
    pytest.param(
        "once_per_pair",
        "win_rate",
        {"agent_0": 0.5, "agent_1": 0.5, "agent_2": 0.5},
        3,
        99,
        id="once_per_pair-win_rate",
    ),
    pytest.param(
        "once_per_pair",
        "win_minus_loss",
        {"agent_0": 0.0, "agent_1": 0.0, "agent_2": 0.0},
        3,
        99,
        id="once_per_pair-win_minus_loss",
    ),
]


@pytest.mark.parametrize(("vote_counting", "reward", "expected", "total", "dropped"), SPAM_TABLE)
def test_one_voter_repeating_a_comparison_100_times(
    vote_counting, reward, expected, total, dropped
):
    debate = env(num_agents=3, max_rounds=2, reward=reward, vote_counting=vote_counting)
    seen = play(debate, SPAM_DEBATE)
    assert debate.unwrapped.consensus_reached
    assert final_rewards(seen) == pytest.approx(expected)
    infos = last_infos(seen)
    assert infos["agent_0"]["pairwise_total_votes"] == total
    assert len(debate.unwrapped.votes) == total
    assert infos["agent_2"]["votes_cast"] == 100  # as written, whatever is counted
    assert infos["agent_2"]["repeated_votes_dropped"] == dropped
    assert infos["agent_0"]["repeated_votes_dropped"] == 0


def test_the_default_counts_every_comparison_as_the_seed_does():
    assert DebateConfig().vote_counting == "as_written"
    default = play(env(num_agents=3, max_rounds=2), SPAM_DEBATE)
    explicit = play(env(num_agents=3, max_rounds=2, vote_counting="as_written"), SPAM_DEBATE)
    assert final_rewards(default) == final_rewards(explicit)
    assert final_rewards(default)["agent_0"] == pytest.approx(1 / 101)


def test_a_contradiction_keeps_the_first_comparison():
    # Round 1 only: agent 2 writes 1 > 0, then 0 > 1, then 0 = 1, then 1 < 0 (read 0 > 1).
    lines = ["Agent 1 > Agent 0", "Agent 0 > Agent 1", "Agent 0 = Agent 1", "Agent 1 < Agent 0"]
    debate = raw_env(num_agents=3, max_rounds=1, vote_counting="once_per_pair")
    infos = last_infos(play(debate, [answer(), answer(), answer(lines)]))
    assert debate.votes == [Vote(2, 1, ">", 0)]
    assert infos["agent_2"]["votes_cast"] == 4
    assert infos["agent_2"]["repeated_votes_dropped"] == 3


def test_the_same_pair_counts_again_in_a_later_round():
    # Agent 2 votes 1 > 0 three times in round 1 and twice in round 2: once per round.
    actions = [
        answer(),
        answer(),
        answer(["Agent 1 > Agent 0"] * 3),
        answer(),
        answer(),
        answer(["Agent 1 > Agent 0", "Agent 0 < Agent 1"]),
    ]
    debate = raw_env(num_agents=3, max_rounds=2, vote_counting="once_per_pair")
    play(debate, actions)
    assert debate.votes == [Vote(2, 1, ">", 0), Vote(2, 1, ">", 0)]
    assert [t.round for t in debate.turns if t.agent == 2] == [1, 2]


def test_the_record_names_the_rule_and_what_each_turn_lost():
    debate = raw_env(num_agents=3, max_rounds=2, vote_counting="once_per_pair")
    play(debate, SPAM_DEBATE)
    record = debate.record()
    assert record["summary"]["vote_counting"] == "once_per_pair"
    assert record["summary"]["valid_votes"] == 3
    assert record["summary"]["win_rate"] == pytest.approx([0.5, 0.5, 0.5])
    assert len(record["turns"][5]["details"]["votes"]) == 100  # the transcript keeps every line
    assert [t["details"]["repeated_votes_dropped"] for t in record["turns"]] == [0] * 5 + [99]
    assert "Votes: 3" in debate.transcript()


@pytest.mark.parametrize(
    "value", ["once", "once-per-pair", "ONCE_PER_PAIR", None, 1, ["once_per_pair"]]
)
def test_a_bad_vote_counting_names_the_value_and_the_fix(value):
    expected = (
        f"vote_counting must be one of ('as_written', 'once_per_pair'), got {value!r}: "
        "leave it out (or 'as_written') to count every comparison as the seed does, or pass "
        "'once_per_pair' to count each agent's comparison of a pair once per round"
    )
    with pytest.raises(ValueError, match=re.escape(expected)):
        DebateEnv(vote_counting=value)


def test_pettingzoo_conformance_with_the_option():
    check_aec_env(lambda: env(num_agents=3, max_rounds=2, vote_counting="once_per_pair"))


# ------------------------------------------------------------------------ properties

_LINE = st.builds(
    "Agent {} {} Agent {}".format,
    st.integers(0, 4),  # 4 is out of range among 4 agents: a malformed vote, kept as written
    st.sampled_from([">", "<", "=", "=="]),
    st.integers(0, 4),
)
_ANSWERS = st.lists(st.lists(_LINE, max_size=6), min_size=8, max_size=8)  # 4 agents, 2 rounds


@settings(max_examples=40, deadline=None)
@given(_ANSWERS)
def test_rewards_are_the_rule_applied_to_each_answer(comparisons):
    actions = [answer(lines) for lines in comparisons]
    written = [parse_response(a, i % 4).votes for i, a in enumerate(actions)]
    as_written = [v for votes in written for v in votes]
    once = [v for votes in written for v in once_per_voter_and_pair(votes, 4)]
    for vote_counting, ledger in (("as_written", as_written), ("once_per_pair", once)):
        for reward, reward_fn in PAIRWISE_REWARDS.items():
            debate = env(num_agents=4, max_rounds=2, reward=reward, vote_counting=vote_counting)
            seen = play(debate, actions)
            assert debate.unwrapped.votes == ledger
            expected = reward_fn(ledger, 4).rewards
            # Exactly today's rewards when the option is off: the same floats, not approx.
            assert final_rewards(seen) == {f"agent_{i}": r for i, r in enumerate(expected)}
    # Never more votes counted, never a different malformed count.
    assert win_rate(once, 4).total_votes <= win_rate(as_written, 4).total_votes
    assert win_rate(once, 4).malformed == win_rate(as_written, 4).malformed
