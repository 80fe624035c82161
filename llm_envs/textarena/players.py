"""Scripted players of TextArena games: no model, deterministic for a seed.

Each player is an ``(observation, info) -> text`` callable (an
:data:`~llm_envs.family.Agent`, like every family's scripted agents) that
reads only the chat a model would get from
:class:`~llm_envs.textarena.env.TextArenaEnv`: the board, its cards, the
actions it may take. They drive the environment in tests, demos and
tournaments:

* :class:`RandomTicTacToePlayer`, :class:`RandomKuhnPokerPlayer`,
  :class:`RandomNegotiationPlayer` (Simple Negotiation) and
  :class:`RandomPrisonersDilemmaPlayer`: a legal move drawn uniformly from a
  seeded stream (the n-th call of a player made with seed ``s`` is always the
  same given the same observations).
* :class:`MinimaxTicTacToePlayer`: perfect Tic Tac Toe (full game-tree search,
  memoized): it never loses, and it wins as soon as it can.
* :class:`KuhnPolicyPlayer`: Kuhn Poker by a behaviour policy, one probability
  of betting or calling per information set (:func:`kuhn_player`: a Nash
  equilibrium, always bet-or-call, uniform).

:func:`random_player` and :func:`strong_player` pick the player of a game id.

Any chat is taken, whatever the other player wrote: a player answers every
observation with a move and never raises. The chat holds the other player's
text, which may imitate a board, a card or a prompt: the Tic Tac Toe players
read the last well-formed board (the game's own comes after the other
player's text), and in a chat with none (not Tic Tac Toe's) answer ``[0]``,
which the game scores as it scores any text (a move where cell 0 is free,
else an invalid move); the Kuhn Poker players read the latest card and moves
and fall back to checking; the others choose among fixed moves.
"""

from __future__ import annotations

import functools
import random
import re
from collections.abc import Callable, Mapping
from typing import Any

__all__ = [
    "KuhnPolicyPlayer",
    "MinimaxTicTacToePlayer",
    "RandomKuhnPokerPlayer",
    "RandomNegotiationPlayer",
    "RandomPrisonersDilemmaPlayer",
    "RandomTicTacToePlayer",
    "game_name",
    "kuhn_history",
    "kuhn_player",
    "random_player",
    "strong_player",
    "tictactoe_board",
]

_LINES = ((0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6))
_BOARD_START = "Current Board:\n\n"
_BOARD_END = "\n\nAvailable Moves"
_ROW_SEPARATOR = "\n---+---+---\n"
_NO_BOARD = "[0]"
"""The Tic Tac Toe players' move in a chat without a readable board (see the module)."""
_MARK = re.compile(r"you will be '([XO])'")
_KUHN_ACTIONS = re.compile(r"Your available actions are: ([^\n]*)")
_KUHN_CARD = re.compile(r"Your card is: '([JQK])'")
_KUHN_MOVES = re.compile(r"submitted move: '\[(check|bet|call|fold)\]'")
_RESOURCE = re.compile(r"\[(\w+)\]\s+Qty:\s*(\d+)")


def game_name(game: str) -> str:
    """The game of a TextArena id, without version and variant.

    Example:
        >>> game_name("TicTacToe-v0-raw"), game_name("KuhnPoker-v0-short")
        ('TicTacToe', 'KuhnPoker')
    """
    return game.split("-v", 1)[0]


def _text(observation: Any) -> str:
    messages = observation["messages"] if isinstance(observation, Mapping) else observation
    return "\n".join(str(m["content"]) for m in messages)


def tictactoe_board(observation: Any) -> tuple[tuple[str, ...], str]:
    r"""The latest board of a Tic Tac Toe observation and the reader's mark.

    Returns:
        ``(cells, mark)``: nine cells, each ``"X"``, ``"O"`` or ``""`` (empty),
        in TextArena's numbering (0-2 the top row), and ``"X"`` or ``"O"``.

    The board is the last one that is well-formed: three rows of three
    cells, each ``X``, ``O`` or its number; the other player's text, which may
    imitate a board or stop in the middle of one, is passed over.

    Raises:
        ValueError: the observation holds no well-formed board, or no mark.

    Example:
        >>> text = ("As Player 0, you will be 'O', while your opponent is 'X'.\n"
        ...         "Current Board:\n\n X | 1 | 2 \n---+---+---\n 3 | O | 5 \n---+---+---\n"
        ...         " 6 | 7 | 8 \n\nAvailable Moves: '[1]'")
        >>> tictactoe_board({"messages": [{"role": "user", "content": text}]})
        (('X', '', '', '', 'O', '', '', '', ''), 'O')
    """
    text = _text(observation)
    cells, mark = _last_board(text), _MARK.search(text)
    if cells is None or mark is None:
        raise ValueError(
            "no Tic Tac Toe board in the observation: this player reads the chat of "
            "TextArenaEnv(game='TicTacToe-v0')"
        )
    return cells, mark.group(1)


def _last_board(text: str) -> tuple[str, ...] | None:
    """The cells of the last well-formed board of a transcript (None: there is none).

    The chat holds the other player's text, which may imitate a board, or echo
    the prompt and stop mid-board; the game's own board comes after it. A board
    is read between a moves line and the nearest heading before it (after the
    previous moves line), so that a heading the other player left open does not
    swallow the game's board, and one pass reads every board: linear (a search
    for heading-anything-moves reads to the end from every open heading). A
    board that is not :func:`_cells` is the other player's text, passed over.
    """
    board = None
    position = 0
    while (end := text.find(_BOARD_END, position)) >= 0:
        start = text.rfind(_BOARD_START, position, end)
        if start >= 0:
            board = _cells(text[start + len(_BOARD_START) : end]) or board
        position = end + len(_BOARD_END)
    return board


def _cells(board: str) -> tuple[str, ...] | None:
    """Three rows of three cells, each ``X``, ``O`` or its own number (empty); else None."""
    rows = board.split(_ROW_SEPARATOR)
    cells = [cell.strip() for row in rows for cell in row.split("|")]
    if len(rows) != 3 or len(cells) != 9:
        return None
    if any(cell not in ("X", "O", str(i)) for i, cell in enumerate(cells)):
        return None
    return tuple(cell if cell in ("X", "O") else "" for cell in cells)


def _winner(board: tuple[str, ...]) -> str:
    for a, b, c in _LINES:
        if board[a] and board[a] == board[b] == board[c]:
            return board[a]
    return ""


@functools.cache
def _value(board: tuple[str, ...], to_move: str) -> int:
    """The game's value for ``to_move`` under perfect play: > 0 a win (sooner is more), 0 a draw."""
    empty = [i for i, c in enumerate(board) if not c]
    if _winner(board):  # the previous mover completed a line
        return -(len(empty) + 1)
    if not empty:
        return 0
    other = "O" if to_move == "X" else "X"
    return max(-_value(_play(board, i, to_move), other) for i in empty)


def _play(board: tuple[str, ...], cell: int, mark: str) -> tuple[str, ...]:
    return (*board[:cell], mark, *board[cell + 1 :])


class MinimaxTicTacToePlayer:
    r"""Perfect Tic Tac Toe: the move of best value under full search, the lowest cell on ties.

    Never loses; among winning moves it takes the fastest. Deterministic (no seed).

    Example:
        >>> text = ("As Player 0, you will be 'O', while your opponent is 'X'.\n"
        ...         "Current Board:\n\n O | O | 2 \n---+---+---\n X | X | 5 \n---+---+---\n"
        ...         " 6 | 7 | 8 \n\nAvailable Moves: '[2]'")
        >>> MinimaxTicTacToePlayer()({"messages": [{"role": "user", "content": text}]}, {})
        '[2]'
    """

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        """Return the best move as ``[cell]`` (``[0]`` without a board: see the module)."""
        try:
            board, mark = tictactoe_board(observation)
        except ValueError:
            return _NO_BOARD
        other = "O" if mark == "X" else "X"
        empty = [i for i, c in enumerate(board) if not c]
        if not empty or _winner(board):
            return "[0]"  # nothing to play: the game is over
        best = max(empty, key=lambda i: (-_value(_play(board, i, mark), other), -i))
        return f"[{best}]"


class _RandomPlayer:
    """A seeded stream of uniform choices; subclasses list the legal moves."""

    def __init__(self, seed: int = 0) -> None:
        self.seed = seed
        self.rng = random.Random(seed)

    def moves(self, text: str) -> list[str]:
        """The legal moves the observation text offers."""
        raise NotImplementedError

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        """Return one legal move, drawn uniformly."""
        return self.rng.choice(self.moves(_text(observation)))

    def __repr__(self) -> str:
        return f"{type(self).__name__}(seed={self.seed})"


class RandomTicTacToePlayer(_RandomPlayer):
    r"""A uniformly random free cell of the latest board.

    Example:
        >>> text = ("As Player 1, you will be 'X', while your opponent is 'O'.\n"
        ...         "Current Board:\n\n X | O | X \n---+---+---\n O | O | X \n---+---+---\n"
        ...         " 6 | X | O \n\nAvailable Moves: '[6]'")
        >>> RandomTicTacToePlayer(seed=3)({"messages": [{"role": "user", "content": text}]}, {})
        '[6]'
    """

    def moves(self, text: str) -> list[str]:
        """``[cell]`` for every empty cell (``[0]`` in a chat without a board: see the module)."""
        try:
            board, _ = tictactoe_board({"messages": [{"role": "user", "content": text}]})
        except ValueError:
            return [_NO_BOARD]
        return [f"[{i}]" for i, c in enumerate(board) if not c] or ["[0]"]


class RandomKuhnPokerPlayer(_RandomPlayer):
    """A uniformly random action of those the game last offered (``[check]``, ``[bet]``...).

    Example:
        >>> text = "[GAME] Your available actions are: '[fold]', '[call]'"
        >>> RandomKuhnPokerPlayer(seed=0)({"messages": [{"role": "user", "content": text}]}, {})
        '[call]'
    """

    def moves(self, text: str) -> list[str]:
        """The actions of the latest "Your available actions are" line."""
        offers = _KUHN_ACTIONS.findall(text)
        actions = re.findall(r"\[(\w+)\]", offers[-1]) if offers else []
        return [f"[{a}]" for a in actions] or ["[check]"]


class KuhnPolicyPlayer(_RandomPlayer):
    """Kuhn Poker by a behaviour policy: bets or calls with its probability at the information set.

    The information set is read from the chat: the card of the latest
    "Your card is" line, and the moves submitted since the latest round began
    (:data:`llm_envs.textarena.kuhn.INFOSETS`). :func:`kuhn_player` names the
    usual policies.

    Args:
        bets: each information set's probability of betting or calling
            (:func:`llm_envs.textarena.kuhn.nash_policy` and the like give them).
        seed: the stream of its draws.

    Example:
        >>> from llm_envs.textarena.kuhn import always_bet_policy
        >>> bets = {name: moves.bet for name, moves in always_bet_policy().items()}
        >>> text = "### Starting round 1 out of 3 rounds. Your card is: 'J'"
        >>> KuhnPolicyPlayer(bets)({"messages": [{"role": "user", "content": text}]}, {})
        '[bet]'
    """

    def __init__(self, bets: Mapping[str, float], seed: int = 0) -> None:
        super().__init__(seed)
        self.bets = dict(bets)

    def moves(self, text: str) -> list[str]:
        """The aggressive move then the passive move of the information set."""
        history = kuhn_history(text)
        return ["[bet]", "[check]"] if history in ("", "c") else ["[call]", "[fold]"]

    def __call__(self, observation: Any, info: Mapping[str, Any]) -> str:
        """Bet or call with the information set's probability; check or fold otherwise."""
        text = _text(observation)
        cards = _KUHN_CARD.findall(text)
        history = kuhn_history(text)
        aggressive, passive = self.moves(text)
        chance = self.bets.get((cards[-1] if cards else "J") + history, 0.5)
        return aggressive if self.rng.random() < chance else passive


def kuhn_history(text: str) -> str:
    """The moves of the current Kuhn Poker round in a chat: ``c`` check or call, ``b`` bet, ``f``.

    Example:
        >>> kuhn_history("### Starting round 2 ... Player 1, submitted move: '[check]'.")
        'c'
    """
    start = text.rfind("### Starting round")
    moves = _KUHN_MOVES.findall(text[max(start, 0) :])
    return "".join({"bet": "b", "fold": "f"}.get(m, "c") for m in moves)


def kuhn_player(policy: str, seed: int = 0) -> KuhnPolicyPlayer:
    """A Kuhn Poker player by name: ``nash`` (alpha 1/6), ``always_bet`` or ``uniform``.

    Raises:
        ValueError: another name.
    """
    from llm_envs.textarena.kuhn import always_bet_policy, nash_policy, uniform_policy

    policies = {
        "nash": lambda: nash_policy(1 / 6),
        "always_bet": always_bet_policy,
        "uniform": uniform_policy,
    }
    if policy not in policies:
        raise ValueError(f"no Kuhn Poker policy {policy!r}; choose one of {sorted(policies)}")
    return KuhnPolicyPlayer({k: m.bet for k, m in policies[policy]().items()}, seed)


class RandomNegotiationPlayer(_RandomPlayer):
    r"""Simple Negotiation: ``[Accept]``, ``[Deny]`` or an offer of one unit for one, uniformly.

    The offer gives one unit of a resource the player's prompt lists and asks
    for one unit of another (each player starts with at least 5 of each, so
    the offer and its acceptance are almost always affordable).

    Example:
        >>> text = "[Wheat]   Qty: 5    Value: 5\n[Wood]    Qty: 7    Value: 10"
        >>> player = RandomNegotiationPlayer(seed=0)
        >>> sorted(set(player.moves(text)))
        ['[Accept]', '[Deny]', '[Offer: 1 Wheat -> 1 Wood]', '[Offer: 1 Wood -> 1 Wheat]']
    """

    def moves(self, text: str) -> list[str]:
        """Accept, deny, and every one-for-one offer of the listed resources."""
        resources = list(dict.fromkeys(name for name, _ in _RESOURCE.findall(text)))
        offers = [
            f"[Offer: 1 {give} -> 1 {want}]"
            for give in resources
            for want in resources
            if give != want
        ]
        return ["[Accept]", "[Deny]", *offers]


class RandomPrisonersDilemmaPlayer(_RandomPlayer):
    """Iterated Prisoner's Dilemma: ``[Cooperate]`` or ``[Defect]`` (talk in the conversation)."""

    def moves(self, text: str) -> list[str]:
        """Cooperate or defect."""
        return ["[Cooperate]", "[Defect]"]


_RANDOM: dict[str, Callable[[int], _RandomPlayer]] = {
    "TicTacToe": RandomTicTacToePlayer,
    "KuhnPoker": RandomKuhnPokerPlayer,
    "SimpleNegotiation": RandomNegotiationPlayer,
    "IteratedPrisonersDilemma": RandomPrisonersDilemmaPlayer,
}


def random_player(game: str, seed: int = 0) -> Callable[[Any, Mapping[str, Any]], str]:
    """The seeded random legal-move player of a TextArena id.

    Raises:
        ValueError: a game without one; the message lists those with one.

    Example:
        >>> random_player("KuhnPoker-v0", seed=1)
        RandomKuhnPokerPlayer(seed=1)
    """
    maker = _RANDOM.get(game_name(game))
    if maker is None:
        raise ValueError(
            f"no scripted random player for {game!r}; there are players for "
            f"{', '.join(f'{name}-v0' for name in _RANDOM)}"
        )
    return maker(seed)


def strong_player(game: str, seed: int = 0) -> Callable[[Any, Mapping[str, Any]], str]:
    """The strong scripted player of a TextArena id: Tic Tac Toe's minimax, Kuhn Poker's Nash.

    Raises:
        ValueError: a game without one.
    """
    if game_name(game) == "KuhnPoker":
        return kuhn_player("nash", seed)
    if game_name(game) != "TicTacToe":
        raise ValueError(
            f"no strong scripted player for {game!r}: only TicTacToe-v0 (MinimaxTicTacToePlayer) "
            "and KuhnPoker-v0 (a Nash equilibrium) have one"
        )
    return MinimaxTicTacToePlayer()
