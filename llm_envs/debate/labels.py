"""Shuffled labels: the numbers under which each debater knows the others (``shuffle_labels``).

Pure functions. A reader's labels are ``labels[seat]``, a permutation of the
seats that keeps the reader's own number. What an author wrote names agents by
the author's labels; :func:`rename_for` turns those into a reader's, and
:func:`seats_of` turns an author's votes into seats before they count.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import numpy as np

from llm_envs.debate.protocol import Comparison

__all__ = ["relabel_mentions", "rename_for", "seats_of", "shown_labels"]


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


_MENTION = re.compile(r"(?<![A-Za-z0-9])([*_`]*agent[ \t]*_?[ \t]*)([0-9]{1,18})(?![0-9])", re.I)
"""An agent named in free text, in every spelling the comparison parser reads."""


def relabel_mentions(text: str, rename: Sequence[int]) -> str:
    """``text`` with every "Agent k" (k in range) written "Agent rename[k]", spelling kept.

    Example:
        >>> relabel_mentions("Agent 0 > agent_1; Agent 7 is out of range", [1, 0])
        'Agent 1 > agent_0; Agent 7 is out of range'
    """

    def swap(match: re.Match[str]) -> str:
        k = int(match.group(2))
        return match.group(1) + str(rename[k]) if k < len(rename) else match.group(0)

    return _MENTION.sub(swap, text)


def rename_for(author_labels: Sequence[int], reader_labels: Sequence[int]) -> list[int]:
    """``rename[k]``: the reader's number for the agent the author calls "Agent k".

    Example:
        >>> rename_for([0, 2, 1], [1, 0, 2])  # the author's "Agent 2" is seat 1: reader's 0
        [1, 2, 0]
    """
    rename = [0] * len(author_labels)
    for seat, label in enumerate(author_labels):
        rename[label] = reader_labels[seat]
    return rename


def seats_of(comparisons: Sequence[Comparison], labels: Sequence[int]) -> tuple[Comparison, ...]:
    """An author's comparisons, written in its ``labels``, as comparisons of seats.

    A number out of range names nobody under any labels: it stays, an invalid vote.

    Example:
        >>> seats_of([(0, ">", 1), (0, "=", 7)], [1, 0, 2])
        ((1, '>', 0), (1, '=', 7))
    """
    seat_of = {label: seat for seat, label in enumerate(labels)}
    return tuple((seat_of.get(a, a), op, seat_of.get(b, b)) for a, op, b in comparisons)
