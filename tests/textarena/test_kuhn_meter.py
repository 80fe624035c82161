"""Kuhn Poker in the environment: the chips payoff, texts read, the sampled meter, players.

Reading texts at each information set as the game does, the meter's interval,
the scripted Kuhn players and the family's meter.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.testing.conformance import play_aec
from llm_envs.textarena import raw_env
from llm_envs.textarena.family import TextArenaFamily
from llm_envs.textarena.kuhn import CHIPS, INFOSETS, KuhnRules, exploitability, nash_policy
from llm_envs.textarena.kuhn_meter import (
    agent_sampler,
    exploitability_interval,
    infoset_positions,
    measure,
    policy_from_counts,
    read_move,
)
from llm_envs.textarena.players import KuhnPolicyPlayer, kuhn_history, kuhn_player, random_player

ONE_ROUND_CHIPS = {"game": "KuhnPoker-v0", "payoff": "chips", "game_kwargs": {"max_rounds": 1}}


def play(moves, **kwargs):
    arena = raw_env(game="KuhnPoker-v0", **kwargs)
    arena.reset(seed=0)  # seed 0 deals agent_1 the K and agent_0 the J, then K/J and J/Q
    for move in moves:
        arena.step(move)
    return arena


# Round 1 (agent_1 opens with K against J), round 2 (agent_0 opens with K against J),
# round 3 (agent_1 opens with Q against J). TextArena pays the win alone; chips count bets.
GAMES = [
    (
        "bet-call, bet-call, check-check",
        ["[bet]", "[call]"] * 2 + ["[check]"] * 2,
        (-1, 1),
        (-1, 1),
    ),
    ("bet-fold twice, check-check", ["[bet]", "[fold]"] * 2 + ["[check]"] * 2, (-1, 1), (-1, 1)),
    (
        "check-bet-call, bet-call, bet-fold",
        ["[check]", "[bet]", "[call]", "[bet]", "[call]", "[bet]", "[fold]"],
        (-1, 1),
        (-1, 1),
    ),
    ("forfeit at the first move", ["oops", "oops again"], (1, -1), (1, -1)),
    ("forfeit in round 2 after bet-call", ["[bet]", "[call]", "?", "?"], (-1, 1), (-3, 3)),
]


@pytest.mark.parametrize(("name", "moves", "game", "chips"), GAMES, ids=[g[0] for g in GAMES])
def test_the_chips_payoff_counts_bets_and_the_game_payoff_does_not(name, moves, game, chips):
    assert tuple(play(moves).rewards.values()) == game
    assert tuple(play(moves, payoff="chips").rewards.values()) == chips


def test_chips_by_hand():
    # Round 1: agent_1's K bets, agent_0's J calls: agent_1 +2. Round 2: agent_0's K bets,
    # agent_1's J calls: agent_0 +2. Round 3: check-check, agent_1's Q beats the J: +1.
    arena = play(["[bet]", "[call]"] * 2 + ["[check]"] * 2, payoff="chips")
    assert arena.rewards == {"agent_0": -1.0, "agent_1": 1.0}
    # agent_0 forfeits round 2 after losing round 1's called bet: -2 then -1.
    arena = play(["[bet]", "[call]", "?", "?"], payoff="chips")
    assert arena.rewards == {"agent_0": -3.0, "agent_1": 3.0}


def test_kuhn_rules_follow_the_settings():
    assert raw_env(game="KuhnPoker-v0").kuhn_rules() == KuhnRules(0, 3, "win_loss", 1)
    assert raw_env(**ONE_ROUND_CHIPS).kuhn_rules() == CHIPS
    assert raw_env(game="KuhnPoker-v0-short", payoff="chips").kuhn_rules().rounds == 5
    with pytest.raises(ValueError, match="payoff='chips' is Kuhn Poker's"):
        raw_env(game="TicTacToe-v0", payoff="chips")
    with pytest.raises(ValueError, match="payoff must be one of"):
        raw_env(game="KuhnPoker-v0", payoff="points")
    with pytest.raises(ValueError, match="measured for Kuhn Poker"):
        raw_env(game="TicTacToe-v0").kuhn_rules()


@pytest.fixture(scope="module")
def positions():
    return infoset_positions({"game": "KuhnPoker-v0"})


def test_each_position_shows_its_mover_the_card_and_the_moves(positions):
    for name, arena in positions.items():
        agent = arena.agent_selection
        text = "\n".join(m["content"] for m in arena.observe(agent)["messages"])
        assert agent == ("agent_1" if name[1:] in ("", "cb") else "agent_0")
        assert f"Your card is: '{name[0]}'" in text
        assert kuhn_history(text) == name[1:]


@pytest.mark.parametrize(
    ("history", "texts"),
    [
        ("", {"[bet]": "bet", "[check]": "passive", "[call]": "invalid", "I bet": "invalid"}),
        ("c", {"[Bet]": "bet", "x [check] y": "passive", "[fold]": "invalid", "": "invalid"}),
        ("b", {"[call]": "bet", "[fold]": "passive", "[check]": "invalid", "[bet]": "invalid"}),
        ("cb", {"[CALL]": "bet", "[fold]": "passive", "call": "bet", "[raise]": "invalid"}),
    ],
)
def test_read_move_reads_as_the_game_does(positions, history, texts):
    for card in "JQK":
        for text, expected in texts.items():
            assert read_move(positions[card + history], text) == expected, (card + history, text)


def test_reading_leaves_the_position_as_it_was(positions):
    before = positions["Qb"].transcript()
    read_move(positions["Qb"], "[call]")
    assert positions["Qb"].transcript() == before


def test_measure_an_always_bet_player_exactly():
    found = measure(agent_sampler(kuhn_player("always_bet")), ONE_ROUND_CHIPS, samples=8, draws=200)
    assert found.counts == dict.fromkeys(INFOSETS, (8, 0, 0))
    assert found.exploitability == pytest.approx(1 / 3)
    assert found.low <= 1 / 3 <= found.high
    default = measure(
        agent_sampler(kuhn_player("always_bet")), {"game": "KuhnPoker-v0"}, samples=8, draws=200
    )
    assert default.exploitability == 0.0  # a free bet: never folding is unexploitable
    assert default.chips == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("player", "truth"),
    [(lambda: random_player("KuhnPoker-v0", 5), 11 / 24), (lambda: kuhn_player("nash", 5), 0.0)],
    ids=["uniform", "nash"],
)
def test_measured_intervals_hold_the_true_value(player, truth):
    found = measure(agent_sampler(player()), ONE_ROUND_CHIPS, samples=64, seed=3, draws=400)
    assert found.low <= truth <= found.high
    # Measured: uniform 0.447 [0.362, 0.532], Nash 0.012 [0, 0.062] (N=64).
    assert found.high - found.low < 0.25


def test_a_player_that_never_writes_a_move_forfeits_everything():
    found = measure(
        agent_sampler(lambda obs, info: "I am thinking"),
        {"game": "KuhnPoker-v0"},
        samples=4,
        draws=200,
    )
    assert found.metrics()["exploitability_invalid"] == 1.0
    assert found.exploitability == 1.0 and found.high <= 1.0
    assert found.chips == 1.0  # a forfeit costs the stake, as a fold


def test_measure_refuses_bad_input():
    sampler = agent_sampler(kuhn_player("always_bet"))
    with pytest.raises(ValueError, match="samples per information set"):
        measure(sampler, {"game": "KuhnPoker-v0"}, samples=0)
    with pytest.raises(ValueError, match="returned 1 texts for 12 turns"):
        measure(lambda turns: ["[bet]"], {"game": "KuhnPoker-v0"}, samples=1)
    with pytest.raises(ValueError, match="measured for Kuhn Poker"):
        measure(sampler, {"game": "TicTacToe-v0"}, samples=1)
    with pytest.raises(ValueError, match="no sampled moves at J"):
        policy_from_counts({})


counts = st.tuples(*[st.integers(0, 20)] * 3).filter(lambda c: sum(c) > 0)


@settings(max_examples=15, deadline=None)
@given(
    st.fixed_dictionaries(dict.fromkeys(INFOSETS, counts)),
    st.sampled_from([CHIPS, KuhnRules(0, 3, "win_loss")]),
)
def test_the_interval_is_ordered_and_within_the_payoffs(observed, rules):
    low, high = exploitability_interval(observed, rules, draws=30)
    estimate = exploitability(policy_from_counts(observed), rules)
    assert 0.0 <= low <= estimate <= high <= rules.max_payoff


def test_kuhn_policy_players_play_legal_moves_and_follow_their_policy():
    arena = raw_env(game="KuhnPoker-v0")
    for seed in range(10):
        seats = {"agent_0": kuhn_player("nash", seed), "agent_1": kuhn_player("always_bet", seed)}

        def act(agent: str, obs: Any, info: Any, seats: dict = seats) -> str:
            return seats[agent](obs, info)

        play_aec(arena, act, seed=seed)
        assert arena.record()["summary"]["invalid_moves"] == {"agent_0": 0, "agent_1": 0}
    nash = {name: moves.bet for name, moves in nash_policy(1 / 6).items()}
    assert kuhn_player("nash").bets == nash
    assert isinstance(kuhn_player("uniform"), KuhnPolicyPlayer)
    with pytest.raises(ValueError, match="no Kuhn Poker policy 'gto'"):
        kuhn_player("gto")


def test_the_family_measures_kuhn_poker_and_nothing_else():
    family = TextArenaFamily(ONE_ROUND_CHIPS)
    assert family.reward_range == (-2.0, 2.0)
    assert sorted(family.scripted_players(0)) == ["always_bet", "random", "reference"]
    found = family.measure(agent_sampler(kuhn_player("always_bet")), samples=4, seed=0)
    assert found["exploitability"] == pytest.approx(1 / 3)
    assert set(found) >= {"exploitability_low", "exploitability_high", "exploitability_chips"}
    assert family.measure(agent_sampler(kuhn_player("always_bet")), samples=0, seed=0) == {}
    other = TextArenaFamily({"game": "IteratedPrisonersDilemma-v0"})  # Tic Tac Toe has its own
    assert other.measure(lambda t: [], samples=4, seed=0) == {}
    assert TextArenaFamily({"game": "KuhnPoker-v0"}).reward_range == (-1.0, 1.0)
