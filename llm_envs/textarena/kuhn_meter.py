"""Kuhn Poker's exploitability of a policy that writes text: its moves sampled where it acts.

:func:`measure` puts the policy at each of the 12 information sets of a
round (:data:`~llm_envs.textarena.kuhn.INFOSETS`), through the real
environment: a game reset with a seed that deals the mover the card, the
history played (round 1, where seat 1 moves first). The policy is asked
``samples`` times at each; each text is read as the environment reads it (a
copy of the game at that point takes the text: a bet or call, a check or
fold, or a move the game refuses). The counts give the behaviour, and
:func:`~llm_envs.textarena.kuhn.exploitability` its value.

The interval
    At each information set the counts are a multinomial draw of the three
    outcomes. Exploitability is a maximum of functions of those
    probabilities: not smooth where the best response changes its move, so
    a delta-method interval is wrong there. Instead the probabilities are
    drawn from their posterior (Dirichlet, Jeffreys' prior: the counts plus
    1/2 each), and each draw's exploitability is computed exactly. Their
    central ``level`` quantiles ``[q_lo, q_hi]`` (the percentile interval)
    cover the truth away from an equilibrium, but never near one: every
    error in a probability is exploitable, so the estimate and every draw
    sit above a true 0. Reflected about the estimate ``e``, ``[2e - q_hi,
    2e - q_lo]`` (the basic bootstrap interval) corrects that bias. The
    interval is the union of the two, clipped to ``[0, most a game pays]``.
    Coverage of 95% intervals in 100 simulated measurements each (one
    round, chips; N texts per information set): uniform play 0.95 (N=16,
    mean width 0.31) and 0.95 (N=64, 0.16); a Nash equilibrium 0.87 and
    0.92 (the percentile interval alone: 0.00); a uniform mix with 20%
    invalid texts 0.92 and 0.98. It reflects the
    sampling of moves only: an infoset's behaviour is assumed the same in
    later rounds and retries.

Cost: ``12 * samples`` completions per measurement, and ``draws``
exploitabilities (about 1 ms each for one round, 3 ms for three) for the interval.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

import numpy as np

from llm_envs.seeding import derive_seed
from llm_envs.textarena.env import INVALID_MOVE, TextArenaEnv, raw_env
from llm_envs.textarena.kuhn import (
    CARDS,
    CHIPS,
    INFOSETS,
    KuhnRules,
    Moves,
    exploitability,
)

__all__ = [
    "KuhnMeasurement",
    "Move",
    "Sampler",
    "agent_sampler",
    "exploitability_interval",
    "infoset_positions",
    "measure",
    "policy_from_counts",
    "read_move",
]

Move = Literal["bet", "passive", "invalid"]
"""How the game read a text: bet or call, check or fold, or refused."""

Sampler = Callable[[Sequence[tuple[str, Any, Mapping[str, Any]]]], list[str]]
"""A policy asked many turns at once: ``(agent, observation, info)`` triples -> one text each."""

Counts = Mapping[str, tuple[int, int, int]]
"""Per information set, how many texts were read as (bet or call, check or fold, invalid)."""

MAX_SAMPLES: Final = 4096
"""The most samples per information set one measurement takes (12 times as many completions)."""

_CARD = re.compile(r"Your card is: '([JQK])'")
_SEED_SEARCH: Final = 1000  # a three-card deal: each card comes up in a few seeds
_PLAYED: Final = {"": (), "c": ("[check]",), "b": ("[bet]",), "cb": ("[check]", "[bet]")}
_BET_WORDS: Final = {"": "bet", "c": "bet", "b": "call", "cb": "call"}
_PASSIVE_WORDS: Final = {"": "check", "c": "check", "b": "fold", "cb": "fold"}


def _history(name: str) -> str:
    return name[1:]


def _mover(history: str) -> str:
    # Round 1: TextArena's Player 1 (agent_1) opens; it acts at "" and "cb".
    return "agent_1" if history in ("", "cb") else "agent_0"


def _card_of(game: TextArenaEnv, agent: str) -> str:
    text = "\n".join(m["content"] for m in game.observe(agent)["messages"])
    found = _CARD.findall(text)
    if not found:
        raise RuntimeError(f"{agent}'s chat shows no card; is this TextArena's Kuhn Poker?")
    return found[-1]


@functools.cache
def _deal_seeds(game: str, game_kwargs: str) -> dict[tuple[str, str], int]:
    """Per (agent, card) of round 1, the first reset seed that deals that agent that card."""
    arena = raw_env(game=game, game_kwargs=json.loads(game_kwargs))
    seeds: dict[tuple[str, str], int] = {}
    for seed in range(_SEED_SEARCH):
        arena.reset(seed=seed)
        for agent in arena.possible_agents:
            seeds.setdefault((agent, _card_of(arena, agent)), seed)
        if len(seeds) == 2 * len(CARDS):
            return seeds
    raise RuntimeError(f"no seed below {_SEED_SEARCH} deals every card to both seats of {game!r}")


def infoset_positions(env_kwargs: Mapping[str, Any]) -> dict[str, TextArenaEnv]:
    """A Kuhn Poker game at each information set: its mover is to act, holding the card.

    Raises:
        ValueError: the game is not Kuhn Poker, or the environment's arguments are refused.
    """
    probe = raw_env(**env_kwargs)
    probe.kuhn_rules()  # refuses another game
    config = probe.config
    seeds = _deal_seeds(config.game, json.dumps(config.game_kwargs, sort_keys=True))
    positions: dict[str, TextArenaEnv] = {}
    for name in INFOSETS:
        card, history = name[0], _history(name)
        mover = _mover(history)
        game = raw_env(**env_kwargs)
        game.reset(seed=seeds[(mover, card)])
        for move in _PLAYED[history]:
            game.step(move)
        if game.agent_selection != mover or _card_of(game, mover) != card:
            raise RuntimeError(f"could not reach {name}: {game.transcript()[-300:]}")
        positions[name] = game
    return positions


def read_move(position: TextArenaEnv, text: str) -> Move:
    """How the game reads ``text`` at ``position`` (left as it is: a copy takes the move).

    Example:
        >>> at = infoset_positions({"game": "KuhnPoker-v0"})["Qb"]
        >>> read_move(at, "I call. [call]"), read_move(at, "[Fold]"), read_move(at, "[bet]")
        ('bet', 'passive', 'invalid')
    """
    history = _history(_name_of(position))
    game = position.fork()
    agent = game.agent_selection
    before = game.transcript()
    game.step(text)
    if game.infos[agent].get(INVALID_MOVE, False):
        return "invalid"
    added = game.transcript()[len(before) :]
    if f"submitted move: '[{_BET_WORDS[history]}]'" in added:
        return "bet"
    if f"submitted move: '[{_PASSIVE_WORDS[history]}]'" in added:
        return "passive"
    raise RuntimeError(f"the game took {text!r} but recorded no move of {history!r}: {added!r}")


def _name_of(position: TextArenaEnv) -> str:
    """The information set a position is at, from its chat: the mover's card and the moves."""
    agent = position.agent_selection
    card = _card_of(position, agent)
    moves = re.findall(r"submitted move: '\[(\w+)\]'", position.transcript())
    history = "".join("b" if m == "bet" else "c" for m in moves)
    return card + history


def agent_sampler(agent: Callable[[Any, Mapping[str, Any]], str]) -> Sampler:
    """A :data:`Sampler` that asks a scripted player (``(observation, info) -> text``) each turn."""

    def sample(turns: Sequence[tuple[str, Any, Mapping[str, Any]]]) -> list[str]:
        return [agent(observation, info) for _, observation, info in turns]

    return sample


def policy_from_counts(counts: Counts) -> dict[str, Moves]:
    """The behaviour the counts estimate: each outcome's share at each information set.

    Raises:
        ValueError: an information set without counts.
    """
    policy = {}
    for name in INFOSETS:
        bet, passive, invalid = counts.get(name, (0, 0, 0))
        total = bet + passive + invalid
        if total <= 0:
            raise ValueError(f"no sampled moves at {name}; every information set needs some")
        policy[name] = Moves(bet / total, passive / total, invalid / total)
    return policy


def exploitability_interval(
    counts: Counts,
    rules: KuhnRules = CHIPS,
    *,
    level: float = 0.95,
    draws: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A ``level`` interval of exploitability from the counts (see the module docstring).

    Each information set's probabilities are drawn from Dirichlet(counts + 1/2);
    the interval joins the draws' percentile interval and its reflection
    about the counts' own exploitability.

    Raises:
        ValueError: ``level`` outside (0, 1), ``draws`` outside 1..100000.
    """
    if not 0 < level < 1 or not 1 <= draws <= 100_000:
        raise ValueError(f"level in (0, 1) and draws in 1..100000, got {level} and {draws}")
    rng = np.random.default_rng(seed)
    alphas = {name: np.asarray(counts.get(name, (0, 0, 0)), dtype=float) + 0.5 for name in INFOSETS}
    samples = {name: rng.dirichlet(alpha, size=draws) for name, alpha in alphas.items()}
    values = []
    for i in range(draws):
        policy = {}
        for name in INFOSETS:
            bet, passive, invalid = (float(p) for p in samples[name][i])
            total = bet + passive + invalid  # 1 up to rounding; Moves checks the sum
            policy[name] = Moves(bet / total, passive / total, invalid / total)
        values.append(exploitability(policy, rules))
    tail = (1 - level) / 2
    q_low, q_high = (float(q) for q in np.quantile(values, [tail, 1 - tail]))
    estimate = exploitability(policy_from_counts(counts), rules)
    low = max(0.0, min(q_low, 2 * estimate - q_high))
    high = min(rules.max_payoff, max(q_high, 2 * estimate - q_low))
    return low, high


@dataclass(frozen=True)
class KuhnMeasurement:
    """What :func:`measure` found.

    Attributes:
        counts: per information set, texts read as (bet or call, check or fold, invalid).
        rules: the payoff the environment pays (:meth:`TextArenaEnv.kuhn_rules`).
        exploitability: of the counts' shares, under ``rules``.
        low, high: its interval (see the module docstring).
        chips, chips_low, chips_high: the same under :data:`~llm_envs.textarena.kuhn.CHIPS`
            (one round, a bet costing a chip: the literature's number; uniform 11/24).
        samples: texts per information set.
    """

    counts: dict[str, tuple[int, int, int]]
    rules: KuhnRules
    exploitability: float
    low: float
    high: float
    chips: float
    chips_low: float
    chips_high: float
    samples: int

    def metrics(self) -> dict[str, float]:
        """Flat numbers for a metrics line.

        ``exploitability`` and its bounds, the same in chips, and the share of
        invalid texts (``exploitability_invalid``).
        """
        total = sum(sum(c) for c in self.counts.values())
        return {
            "exploitability": self.exploitability,
            "exploitability_low": self.low,
            "exploitability_high": self.high,
            "exploitability_chips": self.chips,
            "exploitability_chips_low": self.chips_low,
            "exploitability_chips_high": self.chips_high,
            "exploitability_invalid": sum(c[2] for c in self.counts.values()) / max(1, total),
        }


def measure(
    sample: Sampler,
    env_kwargs: Mapping[str, Any],
    *,
    samples: int = 16,
    seed: int = 0,
    level: float = 0.95,
    draws: int = 1000,
) -> KuhnMeasurement:
    """Sample a policy ``samples`` times at each information set; its exploitability.

    Args:
        sample: the policy (:func:`agent_sampler` wraps a scripted player); it
            gets all ``12 * samples`` turns in one call.
        env_kwargs: the Kuhn Poker environment's arguments (``game``,
            ``game_kwargs``, ``payoff``...), as the family plays it.
        samples: texts per information set, 1 to :data:`MAX_SAMPLES`.
        seed: seeds the interval's draws.
        level: the interval's level.
        draws: the interval's posterior draws.

    Raises:
        ValueError: not Kuhn Poker, ``samples`` out of bounds, or a sampler
            that returns another number of texts than it was asked for.
    """
    if not 1 <= samples <= MAX_SAMPLES:
        raise ValueError(f"samples per information set must be in 1..{MAX_SAMPLES}, got {samples}")
    positions = infoset_positions(env_kwargs)
    rules = next(iter(positions.values())).kuhn_rules()
    turns = []
    for name in INFOSETS:
        game = positions[name]
        agent = game.agent_selection
        turns += [(agent, game.observe(agent), dict(game.infos[agent]))] * samples
    texts = sample(turns)
    if len(texts) != len(turns):
        raise ValueError(f"the sampler returned {len(texts)} texts for {len(turns)} turns")
    counts: dict[str, tuple[int, int, int]] = {}
    for index, name in enumerate(INFOSETS):
        reads: dict[str, Move] = {}  # a policy repeats itself: each distinct text is read once
        for text in texts[index * samples : (index + 1) * samples]:
            if str(text) not in reads:
                reads[str(text)] = read_move(positions[name], str(text))
        moves = [reads[str(t)] for t in texts[index * samples : (index + 1) * samples]]
        counts[name] = (moves.count("bet"), moves.count("passive"), moves.count("invalid"))
    policy = policy_from_counts(counts)
    interval_seed = derive_seed(seed, 1)
    low, high = exploitability_interval(counts, rules, level=level, draws=draws, seed=interval_seed)
    chips_low, chips_high = exploitability_interval(
        counts, CHIPS, level=level, draws=draws, seed=interval_seed
    )
    return KuhnMeasurement(
        counts=counts,
        rules=rules,
        exploitability=exploitability(policy, rules),
        low=low,
        high=high,
        chips=exploitability(policy, CHIPS),
        chips_low=chips_low,
        chips_high=chips_high,
        samples=samples,
    )
