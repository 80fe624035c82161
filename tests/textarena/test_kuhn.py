"""Kuhn Poker's exact exploitability: hand-computed values, properties, and CFR as the reference."""

from __future__ import annotations

import itertools
import time
from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from llm_envs.textarena.kuhn import (
    CARDS,
    CHIPS,
    INFOSETS,
    KuhnRules,
    Moves,
    always_bet_policy,
    attempts,
    best_response_values,
    exploitability,
    nash_policy,
    policy_from_bets,
    round_chips,
    uniform_policy,
)

FREE_ONE = KuhnRules(bet_cost=0, rounds=1, payoff="win_loss")
"""One round of TextArena's game: a bet is free, the round is won or lost."""
KUHN_POKER_V0 = KuhnRules(bet_cost=0, rounds=3, payoff="win_loss")
"""TextArena's KuhnPoker-v0 as the family pays it: three free-bet rounds, win or loss."""


def bet_or_invalid(q: float) -> dict[str, Moves]:
    return {name: Moves(1 - q, 0.0, q) for name in INFOSETS}


def always_invalid() -> dict[str, Moves]:
    return {name: Moves(0.0, 0.0, 1.0) for name in INFOSETS}


# (rules, policy, BR in seat 0, BR in seat 1). Derivations in docs/envs/textarena.md:
# chips, one round: the literature's 11/24, 1/3 and 0 (seat 1 moves first; the game is worth
# -1/18 to the first mover). A free bet: calling never costs, so only folding a Q or K to a
# bet loses. Three rounds: the best responder wins each round with p = (1 + v) / 2 (v its
# round value in that seat), and the game with P = p1 p2 + p1 p3 + p2 p3 - 2 p1 p2 p3.
F = Fraction
TABLE = [
    ("chips", CHIPS, uniform_policy(), F(5, 12), F(1, 2)),
    ("chips", CHIPS, always_bet_policy(), F(1, 3), F(1, 3)),
    ("chips", CHIPS, nash_policy(0), F(1, 18), F(-1, 18)),
    ("chips", CHIPS, nash_policy(1 / 3), F(1, 18), F(-1, 18)),
    ("chips", CHIPS, always_invalid(), F(1), F(1)),
    ("free one", FREE_ONE, uniform_policy(), F(1, 4), F(1, 2)),
    ("free one", FREE_ONE, always_bet_policy(), F(0), F(0)),
    ("free one", FREE_ONE, nash_policy(0), F(2, 9), F(2, 9)),
    ("free one", FREE_ONE, nash_policy(1 / 3), F(1, 9), F(2, 9)),
    ("free one", FREE_ONE, bet_or_invalid(0.5), F(1, 4), F(1, 4)),  # forfeits q^2
    ("KuhnPoker-v0", KUHN_POKER_V0, uniform_policy(), F(31, 64), F(19, 32)),
    ("KuhnPoker-v0", KUHN_POKER_V0, always_bet_policy(), F(0), F(0)),
    ("KuhnPoker-v0", KUHN_POKER_V0, nash_policy(0), F(239, 729), F(239, 729)),
    ("KuhnPoker-v0", KUHN_POKER_V0, nash_policy(1 / 3), F(161, 729), F(401, 1458)),
    ("KuhnPoker-v0", KUHN_POKER_V0, always_invalid(), F(1), F(1)),
]


@pytest.mark.parametrize(
    ("name", "rules", "policy", "seat0", "seat1"),
    TABLE,
    ids=[f"{row[0]}-{i}" for i, row in enumerate(TABLE)],
)
def test_best_response_values_match_the_hand_computed_table(name, rules, policy, seat0, seat1):
    values = best_response_values(policy, rules)
    assert values == pytest.approx((float(seat0), float(seat1)), abs=1e-12)
    assert exploitability(policy, rules) == pytest.approx(float(seat0 + seat1) / 2, abs=1e-12)


def test_the_headline_numbers():
    assert exploitability(uniform_policy()) == pytest.approx(11 / 24)
    assert exploitability(always_bet_policy()) == pytest.approx(1 / 3)
    assert exploitability(nash_policy(0.1)) == pytest.approx(0, abs=1e-12)
    assert exploitability(uniform_policy(), KUHN_POKER_V0) == pytest.approx(69 / 128)


@pytest.mark.parametrize(
    ("history", "first", "second", "bet_cost", "chips"),
    [
        ("cc", "K", "J", 1, 1),
        ("cc", "J", "Q", 1, -1),
        ("bc", "Q", "K", 1, -2),
        ("bc", "Q", "K", 0, -1),
        ("bf", "J", "K", 1, 1),
        ("cbc", "K", "Q", 1, 2),
        ("cbf", "K", "Q", 1, -1),
    ],
)
def test_round_chips(history, first, second, bet_cost, chips):
    assert round_chips(history, first, second, bet_cost) == chips


def test_attempts_fold_the_retry_into_the_moves():
    assert attempts(Moves(0.5, 0.5), 1) == (0.5, 0.5, 0.0)
    assert attempts(Moves(0.25, 0.25, 0.5), 0) == (0.25, 0.25, 0.5)
    assert attempts(Moves(0.0, 0.0, 1.0), 3) == (0.0, 0.0, 1.0)


@pytest.mark.parametrize(
    ("make", "message"),
    [
        (lambda: Moves(0.7, 0.7), "summing to 1"),
        (lambda: Moves(-0.1, 1.1), "summing to 1"),
        (lambda: KuhnRules(bet_cost=2), "bet_cost"),
        (lambda: KuhnRules(rounds=0), "rounds"),
        (lambda: nash_policy(0.5), "alpha"),
        (lambda: policy_from_bets({"J": 0.5}), "missing"),
        (lambda: round_chips("b", "J", "Q"), "finished round"),
        (lambda: exploitability({"J": Moves(1, 0)}), "needs all"),
    ],
)
def test_bad_input_is_refused_by_name(make, message):
    with pytest.raises(ValueError, match=message):
        make()


# ------------------------------------------------------------------ properties

probability = st.floats(0, 1, allow_nan=False)


@st.composite
def policies(draw):
    out = {}
    for name in INFOSETS:
        invalid = draw(st.sampled_from([0.0, draw(probability)]))
        bet = draw(probability) * (1 - invalid)
        out[name] = Moves(bet, max(0.0, 1 - invalid - bet), invalid)
    return out


RULES = [CHIPS, FREE_ONE, KUHN_POKER_V0, KuhnRules(bet_cost=1, rounds=3, payoff="chips")]


@given(policies(), st.sampled_from(RULES))
def test_exploitability_is_between_zero_and_the_most_a_game_pays(policy, rules):
    value = exploitability(policy, rules)
    assert -1e-12 <= value <= rules.max_payoff + 1e-12


@given(st.floats(0, 1 / 3))
def test_every_nash_family_member_is_unexploitable(alpha):
    assert abs(exploitability(nash_policy(alpha))) < 1e-12


@given(policies())
def test_a_best_responder_does_at_least_as_well_as_the_policy_itself(policy):
    # The policy is a strategy of either seat, and the game is zero-sum: BR_0 >= -BR_1.
    seat0, seat1 = best_response_values(policy, CHIPS)
    assert seat0 + seat1 >= -1e-12


# ------------------------------------------------------------------------- CFR


def cfr(iterations: int, checkpoints: tuple[int, ...]) -> dict[int, float]:
    """Vanilla CFR (Zinkevich et al., 2007) on Kuhn Poker (chips): the average's exploitability."""
    regrets = {name: [0.0, 0.0] for name in INFOSETS}
    strategy_sums = {name: [0.0, 0.0] for name in INFOSETS}
    actions = {"": "bc", "c": "bc", "b": "cf", "cb": "cf"}  # aggressive move first
    terminal = {"cc", "bc", "bf", "cbc", "cbf"}

    def current(name):
        positive = [max(r, 0.0) for r in regrets[name]]
        total = sum(positive)
        return [p / total for p in positive] if total > 0 else [0.5, 0.5]

    def walk(cards, history, reach0, reach1, strategies):
        """The first mover's expected chips; updates regrets and strategy sums."""
        if history in terminal:
            return round_chips(history, cards[0], cards[1])
        actor = 0 if history in ("", "cb") else 1
        name = cards[actor] + history
        strategy = strategies[name]
        values = []
        for index, move in enumerate(actions[history]):
            p = strategy[index]
            if actor == 0:
                values.append(walk(cards, history + move, reach0 * p, reach1, strategies))
            else:
                values.append(walk(cards, history + move, reach0, reach1 * p, strategies))
        node = sum(p * v for p, v in zip(strategy, values, strict=True))
        sign, own, other = (1, reach0, reach1) if actor == 0 else (-1, reach1, reach0)
        for index in range(2):
            regrets[name][index] += other * sign * (values[index] - node)
            strategy_sums[name][index] += own * strategy[index]
        return node

    deals = [(a, b) for a in CARDS for b in CARDS if a != b]
    curve = {}
    for t in range(1, iterations + 1):
        strategies = {name: current(name) for name in INFOSETS}  # fixed for the iteration
        for deal in deals:
            walk(deal, "", 1.0, 1.0, strategies)
        if t in checkpoints:
            average = {n: s[0] / sum(s) if sum(s) > 0 else 0.5 for n, s in strategy_sums.items()}
            curve[t] = exploitability(policy_from_bets(average))
    return curve


def test_cfr_average_policy_falls_toward_zero():
    start = time.perf_counter()
    checkpoints = (1, 10, 100, 1000)
    curve = cfr(1000, checkpoints)
    elapsed = time.perf_counter() - start
    values = [curve[t] for t in checkpoints]
    # Measured (2 cores): 1: 0.4583, 10: 0.0962, 100: 0.0257, 1000: 0.0073; in about 0.25 s.
    assert values[0] == pytest.approx(11 / 24)  # the first average is the uniform policy
    assert all(later < earlier for earlier, later in itertools.pairwise(values))
    assert values[-1] < 0.01
    assert elapsed < 2.0
