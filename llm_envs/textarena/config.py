"""The configuration of the TextArena environment: every setting, validated at construction.

:class:`TextArenaConfig` is what ``TextArenaEnv(config)`` takes; its fields are
also the environment's keyword arguments (``TextArenaEnv(game="KuhnPoker-v0")``).

This module never imports :mod:`textarena` (it imports in seconds and pulls
``openai`` and ``nltk``): whether ``game`` names a registered TextArena game,
and whether the game takes ``num_players`` players and ``game_kwargs``, is
checked when an environment is built (:mod:`llm_envs.textarena.game`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from llm_envs.arguments import check_int, check_number, describe

__all__ = ["DEFAULT_GAME", "PAYOFFS", "Payoff", "TextArenaConfig"]

Payoff = Literal["game", "chips"]
"""What an episode pays: TextArena's own reward, or (Kuhn Poker) the chips won."""

PAYOFFS: tuple[Payoff, ...] = ("game", "chips")

DEFAULT_GAME = "TicTacToe-v0"
"""The game of ``TextArenaEnv()`` without arguments."""


@dataclass(frozen=True)
class TextArenaConfig:
    """Configuration of a TextArena game as a PettingZoo environment; validated at construction.

    Attributes:
        game: a TextArena environment id, e.g. ``"TicTacToe-v0"``,
            ``"KuhnPoker-v0"``, ``"SimpleNegotiation-v0"``. The id picks the
            game's arguments and its *action* wrappers as TextArena registers
            them (``"TicTacToe-v0"`` brackets a bare move, ``4`` -> ``[4]``);
            the ``-raw`` form of an id (``"TicTacToe-v0-raw"``) sends the text
            verbatim. An id TextArena does not know is refused when the
            environment is built, with a list of close ids.
        num_players: the game's players, at least 1; they are the agents
            ``agent_0 ... agent_{N-1}`` (TextArena's player ``i`` is ``agent_i``).
            A game that does not take this many players is refused when the
            environment is built.
        game_kwargs: keyword arguments of ``textarena.make(game, **game_kwargs)``,
            on top of those the id registers (``{"max_rounds": 5}`` for Kuhn
            Poker). Copied at construction.
        max_turns: the most actions (invalid ones included) an episode takes:
            a game still running after ``max_turns`` actions is cut off
            (``truncations``) with reward 0 for every agent, so an episode
            always ends. At least 1.
        payoff: ``"game"``: the game's own reward (TextArena's ``set_winner``:
            win +1, draw 0, loss -1); ``"chips"`` (Kuhn Poker only): the chips
            each player won over the game as Kuhn Poker counts them, a bet
            and a call adding a chip to the pot (TextArena's own count leaves
            them out, so its ``[bet]`` risks nothing); a player whose invalid
            moves end the game loses its stake of the round, 1 chip, as a
            fold would. Checked against the game when the environment is built.
        invalid_move_penalty: a training signal, not part of the payoff: this
            much is taken from an agent's reward at each of its invalid moves,
            retried ones included. TextArena forgives a first invalid move
            with a retry, so without it an invalid text costs nothing unless
            a second follows, and reinforcement learning can drift away from
            the move format (Kuhn Poker, docs/results.md). ``game_reward``, the
            outcome and the meter stay the game's. At least 0 (0: off).
    """

    game: str = DEFAULT_GAME
    num_players: int = 2
    game_kwargs: dict[str, Any] = field(default_factory=dict)
    max_turns: int = 200
    payoff: Payoff = "game"
    invalid_move_penalty: float = 0.0

    def __post_init__(self) -> None:
        if not isinstance(self.game, str) or not self.game.strip():
            raise TypeError(
                f"game must be a TextArena environment id (a non-empty str), got "
                f"{describe(self.game)}; e.g. game={DEFAULT_GAME!r}"
            )
        check_int("num_players", self.num_players, minimum=1)
        check_int("max_turns", self.max_turns, minimum=1)
        penalty = check_number("invalid_move_penalty", self.invalid_move_penalty, minimum=0.0)
        object.__setattr__(self, "invalid_move_penalty", penalty)
        if self.payoff not in PAYOFFS:
            raise ValueError(
                f"payoff must be one of {PAYOFFS}, got {describe(self.payoff)}; "
                "'chips' pays Kuhn Poker's chips, 'game' the game's own reward"
            )
        kwargs = {} if self.game_kwargs is None else self.game_kwargs
        if not isinstance(kwargs, Mapping) or not all(isinstance(k, str) for k in kwargs):
            raise TypeError(
                "game_kwargs must be a dict of keyword arguments of textarena.make (str keys), "
                f"got {describe(self.game_kwargs)}; e.g. game_kwargs={{'max_rounds': 5}}"
            )
        object.__setattr__(self, "game_kwargs", dict(kwargs))
