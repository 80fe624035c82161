"""Shuffled labels: the numbers under which each debater knows the others (``shuffle_labels``).

Pure functions. A reader's labels are ``labels[seat]``, a permutation of the
seats that keeps the reader's own number, and :func:`seats_by_label` its
inverse. What an author wrote names agents by the author's labels;
:class:`Renaming` turns those into a reader's, and :func:`seats_of` turns an
author's votes into seats before they count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Protocol

import numpy as np

from llm_envs.debate.protocol import Comparison

__all__ = [
    "Lookup",
    "Renaming",
    "relabel_mentions",
    "seats_by_label",
    "seats_of",
    "shown_labels",
]


def shown_labels(reader: int, num_agents: int, rng: np.random.Generator) -> tuple[int, ...]:
    """The labels under which ``reader`` knows the agents: ``labels[seat]``.

    The reader keeps its own number; the other seats get the other numbers in
    a random order, so "Agent 0" in its prompt is any other seat with equal
    chance and a judge that votes for a number votes for no seat in particular.

    Example:
        >>> labels = shown_labels(2, 4, np.random.default_rng(0))
        >>> labels[2], sorted(labels)
        (2, [0, 1, 2, 3])
    """
    others = [seat for seat in range(num_agents) if seat != reader]
    labels = list(range(num_agents))
    for seat, label in zip(others, rng.permutation(others), strict=True):
        labels[seat] = int(label)
    return tuple(labels)


_MENTION = re.compile(r"(?<![A-Za-z0-9])(agent[ \t]*+_?[ \t]*+)([0-9]{1,18})(?![0-9])", re.I)
"""An agent named in free text, in every spelling the comparison parser reads.

Linear on any text: it starts with a fixed word and never gives back what a
quantifier took. Emphasis before the word (``**Agent 1**``) is left where it
is, as the number alone is rewritten; matching it would make every start of a
long run of ``*`` read the rest of the run (quadratic).
"""


class Lookup(Protocol):
    """A number's new number, for the numbers below ``len()`` (a list is one)."""

    def __len__(self) -> int: ...
    def __getitem__(self, k: int, /) -> int: ...


def relabel_mentions(text: str, rename: Lookup) -> str:
    """``text`` with every "Agent k" (k in range) written "Agent rename[k]", spelling kept.

    Example:
        >>> relabel_mentions("Agent 0 > agent_1; Agent 7 is out of range", [1, 0])
        'Agent 1 > agent_0; Agent 7 is out of range'
    """

    def swap(match: re.Match[str]) -> str:
        k = int(match.group(2))
        return match.group(1) + str(rename[k]) if k < len(rename) else match.group(0)

    return _MENTION.sub(swap, text)


def seats_by_label(labels: Sequence[int]) -> tuple[int, ...]:
    """The inverse of ``labels``: the seat each number names.

    Example:
        >>> seats_by_label([1, 2, 0])
        (2, 0, 1)
    """
    seats = [0] * len(labels)
    for seat, label in enumerate(labels):
        seats[label] = seat
    return tuple(seats)


class Renaming:
    """``rename[k]``: the reader's number for the agent an author calls "Agent k".

    A view, built in O(1) from the author's :func:`seats_by_label` and the
    reader's labels, so a prompt that shows N answers costs O(N), not O(N^2).

    Example:
        >>> rename = Renaming(seats_by_label([0, 2, 1]), [1, 0, 2])
        >>> [rename[k] for k in range(len(rename))]  # the author's "Agent 2" is seat 1
        [1, 2, 0]
    """

    def __init__(self, author_seats: Sequence[int], reader_labels: Sequence[int]) -> None:
        self._author_seats = author_seats
        self._reader_labels = reader_labels

    def __len__(self) -> int:
        return len(self._author_seats)

    def __getitem__(self, k: int) -> int:
        return self._reader_labels[self._author_seats[k]]


def seats_of(
    comparisons: Sequence[Comparison], author_seats: Sequence[int]
) -> tuple[Comparison, ...]:
    """An author's comparisons, written in its labels, as comparisons of seats.

    ``author_seats`` is the author's :func:`seats_by_label`. A number out of range
    names nobody under any labels: it stays, an invalid vote.

    Example:
        >>> seats_of([(0, ">", 1), (0, "=", 7)], seats_by_label([1, 0, 2]))
        ((1, '>', 0), (1, '=', 7))
    """

    def seat(label: int) -> int:
        return author_seats[label] if 0 <= label < len(author_seats) else label

    return tuple((seat(a), op, seat(b)) for a, op, b in comparisons)
