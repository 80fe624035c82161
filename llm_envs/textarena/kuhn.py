"""Kuhn Poker's exploitability, exact: how much a best response wins against a policy.

Pure formulas (no TextArena, no sampling): :mod:`llm_envs.textarena.kuhn_meter`
measures a policy that writes text and hands its behaviour to these functions.

The game
    A three-card deck (J < Q < K); each player antes 1 chip and gets one card.
    The *first mover* checks or bets; after a check the *second mover* checks
    (showdown) or bets; facing a bet a player calls (showdown) or folds (the
    bettor takes the pot). A bet or call adds ``bet_cost`` chips: 1 in Kuhn
    Poker as the literature plays it; 0 in TextArena's ``KuhnPoker-v0``, whose
    pot stays at the two antes (its ``[bet]`` and ``[call]`` add nothing), so
    each of its rounds is won or lost by one chip.

Information sets
    A player knows its card and the actions so far: 12 information sets,
    named card then history (:data:`INFOSETS`): ``"K"`` (first mover, nothing
    played), ``"Kc"`` (second mover after a check), ``"Kb"`` (second mover
    facing a bet), ``"Kcb"`` (first mover facing a bet after its check).

Behaviour
    At each information set, one attempt's distribution over the *aggressive*
    move (bet or call), the *passive* move (check or fold) and an *invalid*
    move (text the game refuses): :class:`Moves`. A refused move is answered
    as TextArena answers it: ``retries`` more attempts (TextArena allows one),
    assumed to be drawn like the first, then the mover forfeits, losing what
    a fold would (``chips``: its stake of 1) and the game (``win_loss``).

Seats and rounds
    TextArena's game plays ``rounds`` rounds; the first mover is seat 1
    (``agent_1``, TextArena's Player 1) in round 1 and alternates. The
    policy is assumed to act by information set alone, the same in every
    round. The payoff is the chips a seat wins over the game (``chips``), or
    the sign of its chip lead at the end (``win_loss``: +1, 0, -1, what
    TextArena's ``set_winner`` pays). A best responder knows the score: its
    value is computed by backward induction over (round, score).

Exploitability
    ``(BR_0 + BR_1) / 2``, where ``BR_s`` is the best response's expected
    payoff in seat ``s`` against the policy in the other seat: NashConv / 2,
    OpenSpiel's convention. It is >= 0, and 0 exactly at a Nash equilibrium.
    With :data:`CHIPS` (one round, a bet costs a chip): the uniform policy
    11/24, always bet-or-call 1/3, the Nash family :func:`nash_policy` 0.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Final, Literal

__all__ = [
    "CARDS",
    "CHIPS",
    "HISTORIES",
    "INFOSETS",
    "ChipLedger",
    "KuhnRules",
    "Moves",
    "Payoff",
    "Policy",
    "always_bet_policy",
    "attempts",
    "best_response_values",
    "exploitability",
    "infoset",
    "nash_policy",
    "policy_from_bets",
    "round_chips",
    "uniform_policy",
]

CARDS: Final = ("J", "Q", "K")
"""The deck, lowest first."""

HISTORIES: Final = ("", "c", "b", "cb")
"""Where a player acts: first move, after a check, facing a bet, facing a bet after checking."""

INFOSETS: Final = tuple(card + history for history in HISTORIES for card in CARDS)
"""The 12 information sets: card then history (``"Qcb"``)."""

# Per history: the aggressive move, the passive move, and who acts (0: the first mover).
_AGGRESSIVE: Final = {"": "b", "c": "b", "b": "c", "cb": "c"}
_PASSIVE: Final = {"": "c", "c": "c", "b": "f", "cb": "f"}
_ACTOR: Final = {"": 0, "c": 1, "b": 1, "cb": 0}
_TERMINAL: Final = frozenset({"cc", "bc", "bf", "cbc", "cbf"})

Payoff = Literal["chips", "win_loss"]


@dataclass(frozen=True)
class Moves:
    """One attempt's behaviour at an information set: probabilities summing to 1.

    Attributes:
        bet: bet (nothing to call) or call (facing a bet).
        passive: check or fold.
        invalid: a move the game refuses.
    """

    bet: float
    passive: float
    invalid: float = 0.0

    def __post_init__(self) -> None:
        values = (self.bet, self.passive, self.invalid)
        if any(not math.isfinite(p) or p < 0 for p in values) or abs(sum(values) - 1) > 1e-9:
            raise ValueError(
                f"Moves are probabilities summing to 1, got bet={self.bet}, "
                f"passive={self.passive}, invalid={self.invalid}; e.g. Moves(0.5, 0.5)"
            )


Policy = Mapping[str, Moves]
"""A behaviour policy: every information set of :data:`INFOSETS` to its :class:`Moves`."""


@dataclass(frozen=True)
class KuhnRules:
    """What a game of Kuhn Poker pays, and how it treats refused moves.

    Attributes:
        bet_cost: chips a bet or a call adds to the pot: 1 (Kuhn Poker), or 0
            (TextArena's ``KuhnPoker-v0``, whose pot is the antes alone).
        rounds: rounds in a game (TextArena's ``max_rounds``; 3 in ``KuhnPoker-v0``).
        payoff: ``chips`` (the chips won over the game) or ``win_loss``
            (+1 ahead at the end, -1 behind, 0 level).
        retries: refused moves answered by another attempt before the next
            one forfeits the game (TextArena's ``error_allowance``: 1).
    """

    bet_cost: int = 1
    rounds: int = 1
    payoff: Payoff = "chips"
    retries: int = 1

    def __post_init__(self) -> None:
        if self.bet_cost not in (0, 1):
            raise ValueError(f"bet_cost is 1 (Kuhn Poker) or 0 (TextArena), got {self.bet_cost}")
        if not 1 <= self.rounds <= 100:
            raise ValueError(f"rounds must be in 1..100, got {self.rounds}")
        if self.payoff not in ("chips", "win_loss"):
            raise ValueError(f"payoff is 'chips' or 'win_loss', got {self.payoff!r}")
        if not 0 <= self.retries <= 10:
            raise ValueError(f"retries must be in 0..10, got {self.retries}")

    @property
    def max_payoff(self) -> float:
        """The most a seat can win in one game: exploitability's upper bound."""
        return float((1 + self.bet_cost) * self.rounds) if self.payoff == "chips" else 1.0


CHIPS: Final = KuhnRules()
"""Kuhn Poker as the literature scores it: one round, a bet costs a chip, chips paid."""


def infoset(card: str, history: str) -> str:
    """The information set's name; checks both parts.

    Example:
        >>> infoset("Q", "cb")
        'Qcb'
    """
    if card not in CARDS or history not in HISTORIES:
        raise ValueError(
            f"an information set is a card of {CARDS} and a history of {HISTORIES}, "
            f"got {card!r} and {history!r}"
        )
    return card + history


def policy_from_bets(bets: Mapping[str, float]) -> dict[str, Moves]:
    """A policy from each information set's probability of betting or calling (no invalid move).

    Raises:
        ValueError: a missing or unknown information set, or a probability outside [0, 1].

    Example:
        >>> policy_from_bets(dict.fromkeys(INFOSETS, 1.0))["Jb"]
        Moves(bet=1.0, passive=0.0, invalid=0.0)
    """
    if set(bets) != set(INFOSETS):
        raise ValueError(
            f"a policy names every information set of {INFOSETS}; missing "
            f"{sorted(set(INFOSETS) - set(bets))}, unknown {sorted(set(bets) - set(INFOSETS))}"
        )
    return {name: Moves(float(p), 1.0 - float(p)) for name, p in bets.items()}


def uniform_policy() -> dict[str, Moves]:
    """Each legal move with probability 1/2."""
    return policy_from_bets(dict.fromkeys(INFOSETS, 0.5))


def always_bet_policy() -> dict[str, Moves]:
    """Always bet, always call."""
    return policy_from_bets(dict.fromkeys(INFOSETS, 1.0))


def nash_policy(alpha: float = 0.0) -> dict[str, Moves]:
    """A Nash equilibrium of Kuhn Poker (chips, a bet costing a chip), for ``alpha`` in [0, 1/3].

    Kuhn (1950): the first mover bets a J with ``alpha``, a K with ``3 alpha``,
    checks a Q, and calls a bet after checking with a Q with ``alpha + 1/3``;
    the second mover bets after a check with a K always and a J with 1/3, and
    calls a bet with a K always and a Q with 1/3.

    Raises:
        ValueError: ``alpha`` outside [0, 1/3].
    """
    if not 0 <= alpha <= 1 / 3 + 1e-12:
        raise ValueError(f"Kuhn Poker's equilibria have alpha in [0, 1/3], got {alpha}")
    alpha = min(alpha, 1 / 3)
    bets = {
        "J": alpha,
        "Q": 0.0,
        "K": 3 * alpha,
        "Jcb": 0.0,
        "Qcb": alpha + 1 / 3,
        "Kcb": 1.0,
        "Jc": 1 / 3,
        "Qc": 0.0,
        "Kc": 1.0,
        "Jb": 0.0,
        "Qb": 1 / 3,
        "Kb": 1.0,
    }
    return policy_from_bets(bets)


def attempts(moves: Moves, retries: int) -> tuple[float, float, float]:
    """What a mover ends up doing when a refused move gets ``retries`` more attempts.

    Each attempt is drawn from ``moves``; with ``q`` the chance of a refused
    attempt, a legal move is made with ``(1 + q + ... + q^retries)`` times its
    one-attempt chance, and the mover forfeits with ``q^(retries + 1)``.

    Returns:
        ``(bet, passive, forfeit)``, summing to 1.

    Example:
        >>> attempts(Moves(0.25, 0.25, 0.5), retries=1)
        (0.375, 0.375, 0.25)
    """
    q = moves.invalid
    forfeit = q ** (retries + 1)
    made = sum(q**i for i in range(retries + 1))
    return moves.bet * made, moves.passive * made, forfeit


def round_chips(history: str, first_card: str, second_card: str, bet_cost: int = 1) -> int:
    """The first mover's chips won in a finished round (the second mover's are the opposite).

    Example:
        >>> round_chips("bc", "J", "K"), round_chips("cbf", "K", "J")
        (-2, -1)
        >>> round_chips("bc", "J", "K", bet_cost=0)  # TextArena: the bet added nothing
        -1
    """
    if history not in _TERMINAL:
        raise ValueError(
            f"a finished round's history is one of {sorted(_TERMINAL)}, got {history!r}"
        )
    if history == "bf":
        return 1
    if history == "cbf":
        return -1
    stake = 1 + (bet_cost if history in ("bc", "cbc") else 0)
    return stake if CARDS.index(first_card) > CARDS.index(second_card) else -stake


_LETTERS: Final = {"check": "c", "bet": "b", "call": "c", "fold": "f"}


class ChipLedger:
    """The chips of a game of Kuhn Poker as the literature counts them, kept move by move.

    TextArena's ``KuhnPoker`` pays the pot of the two antes whatever was bet;
    this ledger charges a bet and a call ``bet_cost`` chips, so an environment
    can pay Kuhn Poker's chips beside TextArena's game.

    Example:
        >>> ledger = ChipLedger()
        >>> ledger.move("bet", first_mover=1, cards=("J", "K"))
        >>> ledger.move("call", first_mover=1, cards=("J", "K"))
        >>> ledger.totals
        [-2, 2]
    """

    def __init__(self, bet_cost: int = 1) -> None:
        self.bet_cost = bet_cost
        self.totals = [0, 0]
        self.history = ""

    def move(self, move: str, first_mover: int, cards: tuple[str, str]) -> None:
        """Record a legal move (``check``, ``bet``, ``call``, ``fold``) of the current round.

        Args:
            move: the move the game took.
            first_mover: the player (0 or 1) who opened this round.
            cards: player 0's card and player 1's.
        """
        self.history += _LETTERS[move]
        if self.history in _TERMINAL:
            second = 1 - first_mover
            chips = round_chips(self.history, cards[first_mover], cards[second], self.bet_cost)
            self.totals[first_mover] += chips
            self.totals[second] -= chips
            self.history = ""

    def forfeit(self, player: int) -> None:
        """``player``'s refused moves ended the game: it loses its stake of the round, 1 chip."""
        self.totals[player] -= 1
        self.totals[1 - player] += 1
        self.history = ""


def _first_mover(seat: int, round_index: int) -> bool:
    """Whether ``seat`` moves first in round ``round_index`` (0-based): seat 1 opens round 1."""
    return (seat + round_index) % 2 == 1


def best_response_values(policy: Policy, rules: KuhnRules = CHIPS) -> tuple[float, float]:
    """The best response's expected payoff in seat 0 and in seat 1 against ``policy``.

    Raises:
        ValueError: a policy that misses an information set.
    """
    _check_policy(policy)
    return (_best_response(policy, rules, 0), _best_response(policy, rules, 1))


def exploitability(policy: Policy, rules: KuhnRules = CHIPS) -> float:
    """``(BR_0 + BR_1) / 2``: see the module docstring.

    Example:
        >>> round(exploitability(uniform_policy()), 4), round(exploitability(nash_policy(0.2)), 12)
        (0.4583, 0.0)
    """
    seat0, seat1 = best_response_values(policy, rules)
    return (seat0 + seat1) / 2


def _check_policy(policy: Policy) -> None:
    missing = [name for name in INFOSETS if name not in policy]
    if missing:
        raise ValueError(f"the policy has no Moves for {missing}; it needs all of {INFOSETS}")


def _best_response(policy: Policy, rules: KuhnRules, seat: int) -> float:
    effective = {name: attempts(policy[name], rules.retries) for name in INFOSETS}

    def final(score: int) -> float:
        return float(score) if rules.payoff == "chips" else float((score > 0) - (score < 0))

    @functools.cache
    def value(round_index: int, score: int) -> float:
        if round_index == rules.rounds:
            return final(score)
        first = _first_mover(seat, round_index)

        def leaf(chips: int) -> float:
            return value(round_index + 1, score + chips)

        # The opponent's forfeit ends the game: it loses its stake of 1 (chips) or the game.
        forfeit = final(score + 1) if rules.payoff == "chips" else 1.0
        return _round_best_response(effective, rules.bet_cost, first, leaf, forfeit)

    return value(0, 0)


def _round_best_response(
    effective: Mapping[str, tuple[float, float, float]],
    bet_cost: int,
    first: bool,
    leaf: Callable[[int], float],
    forfeit: float,
) -> float:
    """One round's value for a best responder (first mover or not) whose chips lead to ``leaf``.

    For the responder's card, ``reach`` holds each opponent card's chance
    (the deal's, times the opponent's moves so far); a decision of the
    responder depends on its card and the history alone, so it is the max
    over its moves of the reach-weighted values.
    """
    me = 0 if first else 1

    def walk(history: str, card: str, reach: dict[str, float]) -> float:
        if history in _TERMINAL:
            total = 0.0
            for other, weight in reach.items():
                cards = (card, other) if first else (other, card)
                chips = round_chips(history, *cards, bet_cost=bet_cost)
                total += weight * leaf(chips if first else -chips)
            return total
        moves = (_AGGRESSIVE[history], _PASSIVE[history])
        if _ACTOR[history] == me:
            return max(walk(history + move, card, reach) for move in moves)
        total = 0.0
        for index, move in enumerate(moves):
            child = {o: w * effective[o + history][index] for o, w in reach.items()}
            total += walk(history + move, card, child)
        total += sum(w * effective[o + history][2] for o, w in reach.items()) * forfeit
        return total

    return sum(walk("", card, {other: 1 / 6 for other in CARDS if other != card}) for card in CARDS)
