r"""What a TextArena game reads of an action: at most a few thousand characters, in linear time.

TextArena's games parse actions with regular expressions written for honest
players, and some are not linear on hostile text: Simple Negotiation's offer
pattern (``\[Offer:?\s*(...)?([^\[\]]+?)\s*\.*\]``) backtracks cubically
on ``[Offer:`` followed by spaces (1,000 characters: 6.9 s per step, 4,000:
254 s), and its offer parser, like other games' move patterns, is quadratic on
long runs of digits or punctuation. Connect Four's move pattern
(``.*\[(?:col\s*)?(\d+)\].*``, searched) is quadratic on brackets: 4,096 ``[``
took 2.4-4 s per step. A regex holds the interpreter's lock, so no deadline
on a thread stops it.

So the environment (:class:`~llm_envs.textarena.env.TextArenaEnv`) gives a
game the first :data:`MAX_GAME_ACTION_CHARS` characters of an action (the
record keeps the whole text), and :func:`harden` replaces the patterns known
to be worse than quadratic, or quadratic at a cost of seconds within the cap,
with linear equivalents (:class:`OfferPattern`, :func:`connect_four_column`).
This module never imports textarena.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = [
    "MAX_GAME_ACTION_CHARS",
    "OfferMatch",
    "OfferPattern",
    "connect_four_column",
    "game_text",
    "harden",
]

MAX_GAME_ACTION_CHARS: Final = 4096
"""The most characters of an action a game reads: far above any move of the games the docs
name (a Tic Tac Toe move is ``[4]``, an offer a line), small enough that a quadratic pattern
costs a fraction of a second."""

_OFFER = re.compile(r"\[offer", re.IGNORECASE)
_I_GIVE = re.compile(r"I\s+(?:give|offer)\s+", re.IGNORECASE)
_COLUMN = re.compile(r"\[(?:col\s*)?(\d+)\]", re.IGNORECASE)


def game_text(text: str) -> str:
    """The part of an action a game reads: its first :data:`MAX_GAME_ACTION_CHARS` characters."""
    return text[:MAX_GAME_ACTION_CHARS]


class OfferMatch:
    """What Simple Negotiation reads of a match: ``group(1)``, the offer's text."""

    def __init__(self, offer: str) -> None:
        self._offer = offer

    def group(self, index: int = 0) -> str:
        """The offer's text (``group(1)``); the game reads nothing else."""
        if index != 1:
            raise IndexError(f"an offer match has group 1 only, got {index}")
        return self._offer


class OfferPattern:
    r"""Simple Negotiation's offer pattern, searched in linear time.

    The game's pattern, ``\[Offer:?\s*(?:I\s+(?:give|offer)\s+)?([^\[\]]+?)\s*\.*\]``
    (any case), matches at an ``[Offer`` whose text up to the next ``]`` holds
    no ``[``: the offer is that text without the optional colon, the leading
    whitespace, an ``I give`` or ``I offer`` and the trailing whitespace and
    dots. The game strips the offer it reads, so where the pattern would
    backtrack to a one-character offer of whitespace, a dot or a colon (an offer
    of nothing but those), this one gives the empty offer: both parse to none.
    Each ``[Offer`` looks only up to its ``]``, and those spans never overlap
    past a ``[``, so the search reads each character a bounded number of times.

    Example:
        >>> OfferPattern().search("Deal? [Offer: I give 3 Wood -> 2 Ore.] thanks").group(1)
        '3 Wood -> 2 Ore'
        >>> OfferPattern().search("[Offer: " + " " * 100_000) is None
        True
    """

    def search(self, text: str) -> OfferMatch | None:
        """The first offer in ``text``, as the game's pattern finds it, or None."""
        end = -1
        for start in _OFFER.finditer(text):
            begin = start.end()
            if end < begin:  # the ] of an earlier [Offer serves every [Offer before it
                end = text.find("]", begin)
                if end < 0:
                    return None  # no later [Offer has a ] either
            bracket = text.find("[", begin, end)  # reads up to the next [Offer at most
            if bracket >= 0 or begin == end:
                continue
            return OfferMatch(_offer_of(text[begin:end]))
        return None


def _offer_of(inner: str) -> str:
    """The offer in the text between ``[Offer`` and ``]`` (``inner`` holds no bracket)."""
    rest = inner[1:] if inner.startswith(":") else inner
    rest = rest.lstrip()
    giving = _I_GIVE.match(rest)
    if giving is not None and giving.end() < len(rest):
        rest = rest[giving.end() :]
    # The pattern's tail, whitespace then dots, taken from the end.
    return rest.rstrip(".").rstrip()


def connect_four_column(text: str) -> str | None:
    r"""The column Connect Four's pattern reads in ``text`` (its ``group(1)``), in linear time.

    The game searches ``.*\[(?:col\s*)?(\d+)\].*``: ``.`` stops at a newline,
    so the match is in the first line holding a ``[N]`` or ``[col N]``, and the
    greedy ``.*`` makes it that line's last. A move holds no ``[`` past its
    first character, so moves never overlap and ``findall`` meets every one.

    Example:
        >>> connect_four_column("[col 2] or rather [3]\n[5]")
        '3'
        >>> connect_four_column("[" * 100_000) is None
        True
    """
    for line in text.split("\n"):
        moves = _COLUMN.findall(line)
        if moves:
            return str(moves[-1])
    return None


def harden(game: Any) -> None:
    """Give ``game`` (an unwrapped TextArena game) linear patterns where its own are worse."""
    name = type(game).__name__
    if name == "SimpleNegotiationEnv" and hasattr(game, "offer_pattern"):
        game.offer_pattern = OfferPattern()
    if name == "ConnectFourEnv" and hasattr(game, "_validate_action"):
        # The pattern is inline in the game's check; the check is given the move alone
        # (or nothing), so its messages and rules stay the game's own.
        validate = game._validate_action
        game._validate_action = lambda action: validate(_column_move(action))


def _column_move(action: str) -> str:
    column = connect_four_column(action)
    return "" if column is None else f"[{column}]"
