"""TextArena seen from llm-envs: the lazy import, the game-id check and a game's private randomness.

:mod:`textarena` is imported here, on first use, and nowhere else: importing
it takes seconds and pulls ``openai`` and ``nltk``, so neither ``import
llm_envs`` nor ``import llm_envs.textarena`` pays for it; building an
environment does.

TextArena games draw from Python's *global* :mod:`random` (``State(seed=...)``
calls ``random.seed(seed)``; Kuhn Poker shuffles with ``random.shuffle``,
Simple Negotiation deals with ``random.randint``) and a few from numpy's global
``np.random``. Two environments stepped in turn would draw from one stream, and
a game would reseed the caller's random module. :class:`PrivateRandom` gives
each game a stream of its own: its state is swapped into the global generators
for the duration of a call into the game and swapped out after, leaving the
caller's state as it was.
"""

from __future__ import annotations

import contextlib
import difflib
import importlib
import random
from collections.abc import Iterator
from typing import Any

import numpy as np

__all__ = ["DOCUMENTED_GAMES", "PrivateRandom", "check_game", "known_games", "textarena"]

DOCUMENTED_GAMES = (
    "TicTacToe-v0",
    "KuhnPoker-v0",
    "SimpleNegotiation-v0",
    "IteratedPrisonersDilemma-v0",
    "ConnectFour-v0",
)
"""The local games the docs name (all but ConnectFour have scripted players)."""


def textarena() -> Any:
    """The :mod:`textarena` module, imported on first use.

    Raises:
        ImportError: TextArena is not installed; the message says how to install it.
    """
    try:
        return importlib.import_module("textarena")
    except ImportError as error:
        raise ImportError(
            "the TextArena environments need the textarena package: "
            "pip install 'llm-envs[textarena]' (or pip install textarena)"
        ) from error


def known_games() -> tuple[str, ...]:
    """Every environment id TextArena registers, sorted (``-raw`` and ``-train`` forms included)."""
    registry = textarena().envs.registration.ENV_REGISTRY
    return tuple(sorted(registry))


def check_game(game: str) -> None:
    """Refuse an id TextArena does not register, naming close ids and a few known ones.

    Raises:
        ValueError: an unknown id.
    """
    games = known_games()
    if game in games:
        return
    close = difflib.get_close_matches(game, games, n=5, cutoff=0.6)
    hint = f"did you mean {', '.join(map(repr, close))}? " if close else ""
    examples = ", ".join(repr(g) for g in DOCUMENTED_GAMES if g in games)
    raise ValueError(
        f"game={game!r} is not a TextArena environment id; {hint}known ids include {examples} "
        f"({len(games)} in all: llm_envs.textarena.known_games() lists them)"
    )


class PrivateRandom:
    """A game's own state of the global ``random`` and ``np.random`` generators.

    Args:
        seed: the seed both streams start from.

    Example:
        >>> import random
        >>> a, b = PrivateRandom(7), PrivateRandom(7)
        >>> with a.active():
        ...     first = random.random()
        >>> outside = random.getstate()
        >>> with b.active():
        ...     same = random.random()
        >>> first == same and random.getstate() == outside
        True
    """

    def __init__(self, seed: int) -> None:
        self.python_state: Any = random.Random(seed).getstate()
        self.numpy_state: Any = np.random.RandomState(seed).get_state()

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """Run the block with this stream in the global generators, then restore the caller's."""
        # The legacy global generators are the point: they are what the games draw from.
        outer_python, outer_numpy = random.getstate(), np.random.get_state()  # noqa: NPY002
        random.setstate(self.python_state)
        np.random.set_state(self.numpy_state)  # noqa: NPY002
        try:
            yield
        finally:
            self.python_state = random.getstate()
            self.numpy_state = np.random.get_state()  # noqa: NPY002
            random.setstate(outer_python)
            np.random.set_state(outer_numpy)  # noqa: NPY002
