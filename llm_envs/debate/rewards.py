"""Pairwise-vote rewards of the debate: leave-one-out win rate and win minus loss.

Agents judge each other with comparisons such as ``Agent 0 > Agent 2``; each
comparison, with the agent that wrote it, is a :class:`Vote`. This module turns
every vote of an episode into one final reward per agent, exactly as the debate recipe
defines it ("Pairwise Comparisons as Votes", "Reward Function 1: Win Rate" and
"Reward Function 2: Win Minus Loss").

The functions here are pure: no environment, no parsing, no randomness, and
they never raise on bad votes (an invalid vote is counted in
:attr:`PairwiseResult.malformed` and otherwise ignored). They must never import
torch or numpy: they run inside the environment step.

:func:`once_per_voter_and_pair` is an opt-in counting rule that the seed does
not have (the debate's ``vote_counting="once_per_pair"``): it keeps one
comparison per voter and pair of agents in one round's votes, so that one
agent repeating a comparison hundreds of times cannot decide the others'
rewards.

Example:
    >>> votes = [Vote(author=0, a=1, op=">", b=2), Vote(author=1, a=0, op="=", b=2)]
    >>> win_rate(votes, num_agents=3).rewards
    (0.5, 1.0, 0.25)
    >>> win_minus_loss(votes, num_agents=3).rewards
    (0.0, 1.0, -0.5)
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal, NamedTuple, TypeAlias, get_args

from llm_envs.judgements import VALID_OPS, Vote, agent_ids, check_num_agents

__all__ = [
    "PAIRWISE_REWARDS",
    "PairwiseResult",
    "PairwiseRewardFn",
    "RewardMode",
    "VoteCounting",
    "get_pairwise_reward",
    "once_per_voter_and_pair",
    "win_minus_loss",
    "win_rate",
]


@dataclass(frozen=True, slots=True)
class PairwiseResult:
    """The final rewards computed from an episode's votes.

    Attributes:
        rewards: One reward per agent, indexed by agent id.
        total_votes: How many votes were valid (and so took part in the rewards).
        malformed: How many votes were invalid and were ignored.
        any_votes: Whether at least one vote was valid (``total_votes > 0``);
            when it is ``False`` every reward is ``0.0``.
    """

    rewards: tuple[float, ...]
    total_votes: int
    malformed: int
    any_votes: bool


RewardMode: TypeAlias = Literal["win_rate", "win_minus_loss"]
"""A pairwise reward function's name, as configs spell it (the recipe's ``reward_mode``)."""

VoteCounting: TypeAlias = Literal["as_written", "once_per_pair"]
"""How an environment counts the comparisons its agents write (the debate's ``vote_counting``).

``"as_written"`` (the debate recipe): every comparison is a vote, repeats included.
``"once_per_pair"`` (opt-in, not in the seed): one round's votes go through
:func:`once_per_voter_and_pair` first.
"""

PairwiseRewardFn: TypeAlias = Callable[[Iterable[Vote], int], PairwiseResult]
"""The signature shared by :func:`win_rate` and :func:`win_minus_loss`."""


def once_per_voter_and_pair(votes: Iterable[Vote], num_agents: int) -> list[Vote]:
    """One round's votes with each voter's comparisons of one pair of agents counted once.

    Not in the debate recipe, which counts every comparison as written: there, one agent
    that writes ``Agent 0 > Agent 1`` a hundred times outweighs every other
    voter, and decides the others' win rates (a reward hack under RL). Here, of
    the valid votes by one author about one *unordered* pair ``{a, b}``, only
    the first in order is kept. A later vote about the same pair is dropped
    whatever it says: a repeat (``0 > 1`` again), the same comparison mirrored
    (``1 < 0``, read as ``0 > 1``), or a contradiction (``1 > 0``, ``0 = 1``).
    Keeping the first is deterministic and never lets a voter take back or
    outweigh what it wrote first.

    Invalid votes (see :func:`is_valid_vote`) are kept as they are: the reward
    functions count them in ``malformed`` and ignore them, so they never move a
    reward, and dropping them would hide them from that count. Pass the votes
    of one round (an agent's answer in a debate, or all the answers of a round):
    a voter may compare the same pair again in a later round, where it counts.

    The function is pure: the result is the input with some votes left out, in
    the input's order. It is idempotent, and the identity on votes in which no
    voter compares a pair twice.

    Args:
        votes: One round's votes, in the order they were written.
        num_agents: How many agents take part (ids ``0 .. num_agents - 1``);
            it decides which votes are valid.

    Returns:
        The votes kept, in their order.

    Raises:
        ValueError: If ``num_agents < 2``.

    Example:
        >>> spam = [Vote(2, 0, ">", 1)] * 100 + [Vote(2, 1, ">", 0), Vote(2, 0, ">", 3)]
        >>> once_per_voter_and_pair(spam, num_agents=3)
        [Vote(author=2, a=0, op='>', b=1), Vote(author=2, a=0, op='>', b=3)]
    """
    check_num_agents(num_agents)
    ids = agent_ids(num_agents)
    seen: set[tuple[object, int, int]] = set()
    kept: list[Vote] = []
    for vote in votes:
        try:
            author, raw_a, op, raw_b = vote
            a = ids.get(raw_a)
            b = ids.get(raw_b)
            if a is not None and b is not None and a != b and op in VALID_OPS:
                key = (author, min(a, b), max(a, b))
                if key in seen:
                    continue
                seen.add(key)
        except (TypeError, ValueError):  # not a 4-tuple, or unhashable parts: kept as is
            pass
        kept.append(vote)
    return kept


def win_rate(votes: Iterable[Vote], num_agents: int) -> PairwiseResult:
    """Each agent's leave-one-out win rate over the votes that involve it.

    The debate recipe, "Reward Function 1: Win Rate": for every valid vote
    ``(u, a, op, b)`` and every target agent ``i in {a, b}`` with ``u != i``,
    ``V_i += 1``; ``W_a += 1`` when ``op`` is ``">"``, and ``W_a += 1/2``,
    ``W_b += 1/2`` when it is ``"="``. Then ``r_i = W_i / V_i`` (``0`` when
    ``V_i = 0``), so ``r_i`` is in ``[0, 1]``: the fraction of peer votes that
    agent ``i`` wins, a tie counting one half.

    Args:
        votes: Every vote of the episode, from all authors and rounds. Any
            iterable of hashable 4-tuples ``(author, a, op, b)`` works;
            invalid votes are counted in ``malformed`` and otherwise ignored.
        num_agents: How many agents took part (ids ``0 .. num_agents - 1``).

    Returns:
        The rewards (all ``0.0`` when no vote is valid) and vote counters.

    Raises:
        ValueError: If ``num_agents < 2``.

    Example:
        >>> win_rate([Vote(2, 0, ">", 1), Vote(2, 0, "=", 1)], 3).rewards
        (0.75, 0.25, 0.0)
    """
    t = _tally(votes, num_agents)
    # W_i = wins + ties / 2 and V_i = wins + ties + losses; kept as integers so
    # that the division is the only rounding.
    rewards = tuple(
        (2 * w + d) / (2 * (w + d + lo)) if w + d + lo else 0.0
        for w, d, lo in zip(t.wins, t.ties, t.losses, strict=True)
    )
    return PairwiseResult(rewards, t.total, t.malformed, t.total > 0)


def win_minus_loss(votes: Iterable[Vote], num_agents: int) -> PairwiseResult:
    """Each agent's leave-one-out average signed outcome per matchup.

    The debate recipe, "Reward Function 2: Win Minus Loss": for every valid vote
    ``(u, a, op, b)`` and every target agent ``i in {a, b}`` with ``u != i``,
    ``M_i += 1``; when ``op`` is ``">"``, ``S_a += 1`` and ``S_b -= 1``; a tie
    changes no score. Then ``r_i = S_i / M_i`` (``0`` when ``M_i = 0``), in
    ``[-1, 1]``. Without ties, ``r_i = 2 * win_rate_i - 1`` for every agent
    with at least one vote. Arguments, result and errors as :func:`win_rate`.

    Example:
        >>> win_minus_loss([Vote(2, 0, ">", 1), Vote(2, 0, "=", 1)], 3).rewards
        (0.5, -0.5, 0.0)
    """
    t = _tally(votes, num_agents)
    # S_i = wins - losses and M_i = wins + ties + losses.
    rewards = tuple(
        (w - lo) / (w + d + lo) if w + d + lo else 0.0
        for w, d, lo in zip(t.wins, t.ties, t.losses, strict=True)
    )
    return PairwiseResult(rewards, t.total, t.malformed, t.total > 0)


PAIRWISE_REWARDS: Mapping[RewardMode, PairwiseRewardFn] = MappingProxyType(
    {"win_rate": win_rate, "win_minus_loss": win_minus_loss}
)
"""Every pairwise reward function by its :data:`RewardMode` name (read-only)."""


def get_pairwise_reward(mode: str) -> PairwiseRewardFn:
    """The pairwise reward function named ``mode``, with a clear error for a typo.

    Example:
        >>> get_pairwise_reward("win_rate") is win_rate
        True
    """
    try:
        return PAIRWISE_REWARDS[mode]  # type: ignore[index]  # a str is checked here
    except KeyError:
        raise ValueError(
            f"unknown pairwise reward mode {mode!r}: use one of {list(get_args(RewardMode))}"
        ) from None


class _Tally(NamedTuple):
    """Per-agent leave-one-out outcome counts that both rewards are made of.

    For agent ``i``, over the valid votes involving ``i`` not written by ``i``:
    ``wins[i]`` it won, ``ties[i]`` it tied, ``losses[i]`` it lost.
    """

    wins: list[int]
    ties: list[int]
    losses: list[int]
    total: int
    malformed: int


def _tally(votes: Iterable[Vote], num_agents: int) -> _Tally:
    check_num_agents(num_agents)
    # Counting identical votes first makes the Python-level loop run once per
    # distinct vote (at most about 2 * N**3 of them) rather than once per vote:
    # about 3x faster on 100k-vote lists, and exact since all counters are ints.
    try:
        counts = Counter(votes)
    except TypeError as exc:
        raise TypeError(
            f"votes must be hashable (author, a, op, b) tuples such as Vote ({exc}): "
            "convert each item with Vote(*item)"
        ) from None
    ids = agent_ids(num_agents)
    wins = [0] * num_agents
    ties = [0] * num_agents
    losses = [0] * num_agents
    total = 0
    malformed = 0
    for vote, k in counts.items():
        try:
            author, raw_a, op, raw_b = vote
        except (TypeError, ValueError):
            malformed += k  # not a 4-tuple at all
            continue
        a = ids.get(raw_a)
        b = ids.get(raw_b)
        # Validity (the debate recipe, "Pairwise Comparisons as Votes"):
        # a, b in range(N), a != b, op in {>, =}.
        if a is None or b is None or a == b or op not in VALID_OPS:
            malformed += k
            continue
        total += k
        # Leave-one-out (the debate recipe): a vote never counts for the side its author is on.
        if op == ">":
            if author != a:
                wins[a] += k
            if author != b:
                losses[b] += k
        else:
            if author != a:
                ties[a] += k
            if author != b:
                ties[b] += k
    return _Tally(wins, ties, losses, total, malformed)
