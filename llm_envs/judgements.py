"""Pairwise judgements: one agent's comparison of two others, and when it counts.

Families whose agents judge each other (the debate's ``<comparison>``) record
each comparison as a :class:`Vote`; the debate's rewards, the evaluator's
ratings and its vote matrix read them back through :func:`is_valid_vote`, so
every reader agrees on which votes count. Pure Python, no numpy.

Example:
    >>> is_valid_vote(Vote(author=0, a=1, op=">", b=2), num_agents=3)
    True
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import NamedTuple

__all__ = [
    "VALID_OPS",
    "Vote",
    "agent_ids",
    "check_num_agents",
    "is_valid_vote",
    "lower_seat_wins",
]

VALID_OPS: frozenset[str] = frozenset({">", "="})
"""The comparison operators a valid vote may carry: ``a > b`` (a beats b) and ``a = b`` (a tie)."""


class Vote(NamedTuple):
    """One comparison ``a op b`` written by agent ``author``.

    ``op`` is ``">"`` (a beats b) or ``"="`` (a ties b). Votes are not
    validated on construction: an environment records what agents wrote, and
    the reward functions count invalid votes as malformed (see
    :func:`is_valid_vote`).
    """

    author: int
    a: int
    op: str
    b: int


def is_valid_vote(vote: Vote, num_agents: int) -> bool:
    """Whether a vote counts, by the validity checks of the debate recipe.

    A vote is valid iff ``a`` and ``b`` are agent ids in ``range(num_agents)``,
    ``a != b`` and ``op`` is ``">"`` or ``"="``. The author is not checked: a
    vote whose author is one of its sides is valid but, by the leave-one-out
    rule, never counts for that side.

    Example:
        >>> is_valid_vote(Vote(0, 1, ">", 2), 3), is_valid_vote(Vote(0, 1, ">", 3), 3)
        (True, False)
    """
    check_num_agents(num_agents)
    ids = agent_ids(num_agents)
    try:
        _, raw_a, op, raw_b = vote
        a = ids.get(raw_a)
        b = ids.get(raw_b)
        return a is not None and b is not None and a != b and op in VALID_OPS
    except (TypeError, ValueError):  # not a 4-tuple, or unhashable parts
        return False


def check_num_agents(num_agents: int) -> None:
    """Refuse a ``num_agents`` that is not an int >= 2 (a comparison needs two agents)."""
    if isinstance(num_agents, bool) or not isinstance(num_agents, int) or num_agents < 2:
        raise ValueError(
            f"num_agents must be an int >= 2, got {num_agents!r}: "
            "a pairwise reward needs at least two agents to compare"
        )


def agent_ids(num_agents: int) -> dict[object, int]:
    """A lookup from anything equal to an agent id (``1``, ``1.0``, ``numpy.int64(1)``) to the id.

    Lookups use hashing and equality, the very rules by which :class:`Counter`
    merges votes, so that merging never changes which votes are valid; this is
    also what ``a in range(num_agents)`` means in Python.
    """
    return {i: i for i in range(num_agents)}


def lower_seat_wins(votes: Iterable[Vote], num_agents: int) -> tuple[int, int]:
    """How many valid strict votes put the lower-numbered seat first, of how many.

    A judge that votes by position (``Agent 0 > Agent 1`` whatever was written)
    shows as a share far from one half once the models rotate through the seats.
    Ties and invalid votes are left out.

    Example:
        >>> votes = [Vote(2, 0, ">", 1), Vote(2, 1, ">", 0), Vote(0, 1, "=", 2), Vote(1, 0, ">", 0)]
        >>> lower_seat_wins(votes, 3)
        (1, 2)
    """
    strict = [v for v in votes if v.op == ">" and is_valid_vote(v, num_agents)]
    return sum(int(v.a) < int(v.b) for v in strict), len(strict)
