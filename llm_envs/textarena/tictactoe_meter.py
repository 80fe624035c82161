"""Tic Tac Toe's exploitability of a policy that writes text: exact, by expectimax.

The game as the family plays it
    TextArena's ``TicTacToe-v0``: ``agent_0`` (TextArena's Player 0) plays
    ``O`` and moves first, ``agent_1`` plays ``X``. The game pays a win +1, a
    loss -1, a draw 0 (``set_winner``, ``set_draw``). A move it refuses (no
    ``[cell]``, a cell outside 0-8 or taken) earns a warning and a retry;
    after ``retries`` of them in a row (TextArena's ``error_allowance``: 1)
    the next one loses the game. :func:`measure` reads ``retries`` from the
    environment (it plays refused moves until the game ends).

Exploitability
    ``(BR_0 + BR_1) / 2``, where ``BR_s`` is the best response's expected
    payoff in seat ``s`` against the policy in the other, computed by
    expectimax: the best response maximises at its nodes, the policy plays
    its moves' shares at its own. A refused move is answered as the game
    answers it: ``retries`` more attempts, assumed to be drawn like the first,
    then a forfeit (+1 to the best response). It lies in ``[0, 1]``; the
    minimax player's is 0 (perfect play draws).

Positions
    The policy's behaviour is kept per board (a board says who moves). It is
    asked at the first game the search reaches a board by, through the real
    environment: a game reset and played along the search's path, the
    policy's earlier moves written as the first text of its that the game read
    as that move, the best response's as ``[cell]``. So the value is exact for
    a policy that acts by the board (as the scripted players do); a model
    reads its whole chat, and another order of the same moves may change what
    it plays: that is outside the measurement.

The search
    Lazy: a position is asked only when the search reaches it, i.e. reachable
    by moves the policy was seen to play and any move of the best response.
    The best response tries its moves best first under perfect play and stops
    at the first that wins *surely* (every continuation the policy was seen to
    play, refusals included, ends in its win): +1 is the most it can get. Which
    positions are visited depends on which moves were seen, not on their
    shares, so the interval's draws reuse the search. Past ``max_positions``
    positions there is no value, and the measurement says why.

The interval
    At each visited position the shares of its free cells and of a refused
    move are drawn from their posterior (Dirichlet, Jeffreys' prior: the
    counts plus 1/2), and each draw's value is computed over the same
    search. A move never seen at a position has mass but no explored
    subtree: its value is bounded, below by what perfect play guarantees the
    best response from there, above by a win. The interval joins the lower
    quantile of the draws at the low bound and the upper quantile at the high
    bound with their reflections about the estimate (the basic bootstrap
    interval, as in :mod:`~llm_envs.textarena.kuhn_meter`), clipped to
    ``[0, 1]``: conservative where moves went unseen. Coverage of 95%
    intervals in simulated measurements (N texts a position): minimax 1.00
    (N=16, mean width 0.63; N=64, 0.23); 85% minimax, 10% another cell, 5%
    refused (exploitability 0.279) 1.00 (N=16, 0.74; N=64, 0.34); uniform
    0.90 (N=16, 0.09: sampled shares look more predictable than they are, an
    upward bias of 0.018).

Cost (texts = positions x samples; seconds with ``samples=16`` on 2 shared cores)
    ======================  =========  ============  =======
    policy                  positions  texts (N=16)  seconds
    ======================  =========  ============  =======
    minimax player          507        8,112         6-22
    first free cell         5          80            0.1
    never a valid move      2          32            0.0
    uniform, exact shares   3,742
    uniform, 16 texts       2,293      36,688        242
    ======================  =========  ============  =======

    and two vectorised evaluations of the search for the interval
    (``80 * draws`` bytes per position).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

import numpy as np

from llm_envs.seeding import derive_seed
from llm_envs.textarena.env import INVALID_MOVE, TextArenaEnv, raw_env
from llm_envs.textarena.kuhn_meter import MAX_SAMPLES, Sampler
from llm_envs.textarena.players import game_name, tictactoe_board

__all__ = [
    "EMPTY",
    "INVALID",
    "MAX_POSITIONS",
    "Policy",
    "SearchTree",
    "TicTacToeMeasurement",
    "TooManyPositions",
    "best_response_values",
    "exploitability",
    "exploitability_interval",
    "measure",
    "play",
    "read_move",
    "search",
]

EMPTY: Final = "........."
"""The empty board: nine cells in TextArena's numbering (0-2 the top row), ``.`` empty."""

INVALID: Final = 9
"""The index of a refused move in a behaviour (cells are 0-8)."""

MAX_POSITIONS: Final = 1000
"""The default bound on positions a measurement asks the policy at: 16,000 texts at 16 samples
(the minimax player needs 507 positions, uniform play 3,742)."""

Policy = Callable[[str, tuple[int, ...]], Sequence[float]]
"""A policy asked at a board reached by a history of cells: 10 non-negative weights (counts or
shares) of cells 0-8 then a refused move (:data:`INVALID`)."""

_LINES: Final = (
    (0, 1, 2),
    (3, 4, 5),
    (6, 7, 8),
    (0, 3, 6),
    (1, 4, 7),
    (2, 5, 8),
    (0, 4, 8),
    (2, 4, 6),
)
_PLACED = re.compile(r"placed their symbol \([XO]\) in cell (\d)")
_NOT_A_MOVE = "(no move)"


def _mover(board: str) -> str:
    return "O" if board.count(".") % 2 == 1 else "X"  # O opens on nine empty cells


def _winner(board: str) -> str:
    for a, b, c in _LINES:
        if board[a] != "." and board[a] == board[b] == board[c]:
            return board[a]
    return ""


def play(board: str, cell: int) -> str:
    """The board after the mover marks ``cell``.

    Example:
        >>> play(play(EMPTY, 4), 0)
        'X...O....'
    """
    if board[cell] != ".":
        raise ValueError(f"cell {cell} of {board!r} is taken; play a free cell")
    return board[:cell] + _mover(board) + board[cell + 1 :]


@functools.cache
def _perfect(board: str) -> int:
    """The mover's value under perfect play: > 0 a win (sooner is more), 0 a draw, < 0 a loss."""
    if _winner(board):
        return -(board.count(".") + 1)
    free = [i for i, c in enumerate(board) if c == "."]
    return max((-_perfect(play(board, i)) for i in free), default=0)


class TooManyPositions(RuntimeError):
    """The search reached more positions than its bound."""


@dataclass
class SearchTree:
    """What the best response's search visited.

    Attributes:
        behaviour: per board the policy was asked at, its 10 weights.
        tried: per (seat of the policy, board of the best response), the cells it tried,
            in order; the last one wins surely where it stopped early.
        start: the board the search began at.
    """

    start: str = EMPTY
    behaviour: dict[str, tuple[float, ...]] = field(default_factory=dict)
    tried: dict[tuple[int, str], tuple[int, ...]] = field(default_factory=dict)


def search(policy: Policy, max_positions: int = MAX_POSITIONS, start: str = EMPTY) -> SearchTree:
    """Visit the positions the best response's search reaches in both seats (see the module).

    ``start`` is the board both seats' games begin at (:data:`EMPTY`: the game's own start);
    a history a policy is given runs from it.

    Raises:
        TooManyPositions: the policy would be asked at more than ``max_positions`` boards.
        ValueError: a ``start`` that no game reaches; a behaviour that is not 10 non-negative
            weights with a positive sum, or that plays a taken cell.
    """
    marks = (start.count("O"), start.count("X"))
    if len(start) != 9 or set(start) - set(".OX") or marks[0] - marks[1] not in (0, 1):
        raise ValueError(
            f"start is nine cells of '.', 'O', 'X', O opening (as many O as X, or one more), "
            f"got {start!r}; e.g. {EMPTY!r}"
        )
    tree = SearchTree(start=start)
    sure: dict[tuple[int, str], bool] = {}

    def ask(board: str, history: tuple[int, ...]) -> tuple[float, ...]:
        if board not in tree.behaviour:
            if len(tree.behaviour) >= max_positions:
                raise TooManyPositions(
                    f"the search reached more than max_positions={max_positions} positions"
                )
            weights = tuple(float(w) for w in policy(board, history))
            if len(weights) != 10 or min(weights) < 0 or not sum(weights) > 0:
                raise ValueError(f"a behaviour is 10 weights >= 0, not all 0; got {weights}")
            taken = [c for c in range(9) if weights[c] > 0 and board[c] != "."]
            if taken:
                raise ValueError(f"the policy plays taken cells {taken} of {board!r}")
            tree.behaviour[board] = weights
        return tree.behaviour[board]

    def explore(seat: int, board: str, history: tuple[int, ...]) -> bool:
        """Whether the best response wins surely from ``board``."""
        key = (seat, board)
        if key not in sure:
            responder = "X" if seat == 0 else "O"
            winner = _winner(board)
            if winner or "." not in board:
                sure[key] = winner == responder
            elif _mover(board) == responder:
                free = [c for c in range(9) if board[c] == "."]
                tried: list[int] = []
                for cell in sorted(free, key=lambda c: (_perfect(play(board, c)), c)):
                    tried.append(cell)
                    if explore(seat, play(board, cell), (*history, cell)):
                        break
                tree.tried[key] = tuple(tried)
                sure[key] = explore(seat, play(board, tried[-1]), (*history, tried[-1]))
            else:
                weights = ask(board, history)
                seen = [c for c in range(9) if weights[c] > 0]
                # Every seen move is explored: the expectation needs each child's value.
                sure[key] = all([explore(seat, play(board, c), (*history, c)) for c in seen])
        return sure[key]

    explore(0, start, ())
    explore(1, start, ())
    return tree


def best_response_values(
    tree: SearchTree,
    retries: int = 1,
    shares: Mapping[str, np.ndarray] | None = None,
    unseen: Literal["low", "high"] = "low",
) -> tuple[np.ndarray, np.ndarray]:
    """The best response's value in seat 0 and in seat 1 over a search.

    Args:
        tree: from :func:`search`.
        retries: refused moves answered by another attempt before the next one forfeits.
        shares: per board of ``tree.behaviour``, ``(D, 10)`` rows of probabilities (draws of
            the behaviour); None: the behaviour's own shares.
        unseen: what a move of ``shares`` the search never saw is worth to the best response,
            its subtree unexplored: ``low``, what perfect play guarantees it from there (-1, 0
            or 1), or ``high``, 1: the bounds of its true value.

    Returns:
        Two arrays of ``D`` values (one value without ``shares``).
    """
    rows = shares or {
        board: np.asarray(w, dtype=float)[None, :] / sum(w) for board, w in tree.behaviour.items()
    }

    def seat_value(seat: int) -> np.ndarray:
        responder = "X" if seat == 0 else "O"
        memo: dict[str, np.ndarray] = {}

        def value(board: str) -> np.ndarray:
            if board in memo:
                return memo[board]
            winner = _winner(board)
            if winner or "." not in board:
                result = np.full(1, 1.0 if winner == responder else -1.0 if winner else 0.0)
            elif _mover(board) == responder:
                children = [value(play(board, c)) for c in tree.tried[(seat, board)]]
                result = functools.reduce(np.maximum, children)
            else:
                p = rows[board]
                refused = p[:, INVALID]
                made = sum(refused**i for i in range(retries + 1))
                result = refused ** (retries + 1)  # the forfeit pays the best response 1
                for cell in (c for c in range(9) if board[c] == "."):
                    child = play(board, cell)
                    if tree.behaviour[board][cell] > 0:
                        worth = value(child)
                    else:  # an unseen move: bounded (the best response moves next, or it ended)
                        worth = np.full(1, 1.0 if unseen == "high" else np.sign(_perfect(child)))
                    result = result + p[:, cell] * made * worth
            memo[board] = result
            return result

        return value(tree.start)

    return seat_value(0), seat_value(1)


def exploitability(
    policy: Callable[[str], Sequence[float]],
    retries: int = 1,
    max_positions: int = MAX_POSITIONS,
) -> float:
    """``(BR_0 + BR_1) / 2`` of a policy that acts by the board (see the module).

    Example:
        >>> first_free = lambda board: [float(i == board.index(".")) for i in range(10)]
        >>> exploitability(first_free)
        1.0
    """
    tree = search(lambda board, _: policy(board), max_positions)
    seat0, seat1 = best_response_values(tree, retries)
    return float(seat0[0] + seat1[0]) / 2


def read_move(position: TextArenaEnv, text: str) -> int:
    """The cell the game reads ``text`` as at ``position`` (a copy takes it), or :data:`INVALID`.

    Example:
        >>> at = raw_env(game="TicTacToe-v0"); at.reset(seed=0)
        >>> read_move(at, "The centre: [4]"), read_move(at, "4"), read_move(at, "[9]")
        (4, 4, 9)
    """
    game = position.fork()
    agent = game.agent_selection
    before = len(game.transcript())
    game.step(text)
    if game.infos[agent].get(INVALID_MOVE, False):
        return INVALID
    found = _PLACED.findall(game.transcript()[before:])
    if not found:
        raise RuntimeError(f"the game took {text!r} but placed no mark: {game.transcript()[-300:]}")
    return int(found[0])


@dataclass(frozen=True)
class TicTacToeMeasurement:
    """What :func:`measure` found.

    Attributes:
        exploitability: ``(BR_0 + BR_1) / 2``; None when there is no value (``reason``).
        low, high: its interval (see the module docstring); None with it.
        seats: ``BR_0`` and ``BR_1``; None with it.
        positions: boards the policy was asked at.
        texts: texts asked for (``positions * samples``).
        invalid: the share of those texts the game refused.
        retries: refused moves the game answers with another attempt.
        samples: texts per position.
        reason: why there is no value; ``""`` with one.
    """

    exploitability: float | None
    low: float | None
    high: float | None
    seats: tuple[float, float] | None
    positions: int
    texts: int
    invalid: float
    retries: int
    samples: int
    reason: str = ""

    def metrics(self) -> dict[str, float]:
        """``exploitability``, its bounds, invalid share and positions; ``{}`` without a value."""
        if self.exploitability is None or self.low is None or self.high is None:
            return {}
        return {
            "exploitability": self.exploitability,
            "exploitability_low": self.low,
            "exploitability_high": self.high,
            "exploitability_invalid": self.invalid,
            "exploitability_positions": float(self.positions),
        }


def _retries(game: TextArenaEnv) -> int:
    """Refused moves the game answers with another attempt: played until the game ends."""
    probe = game.fork()
    refused = 0
    while not probe.done and refused <= 10:
        probe.step(_NOT_A_MOVE)
        refused += 1
    return refused - 1


def measure(
    sample: Sampler,
    env_kwargs: Mapping[str, Any],
    *,
    samples: int = 16,
    seed: int = 0,
    level: float = 0.95,
    draws: int = 1000,
    max_positions: int = MAX_POSITIONS,
) -> TicTacToeMeasurement:
    """Ask a policy ``samples`` times at each position the search reaches; its exploitability.

    Args:
        sample: the policy (:func:`~llm_envs.textarena.kuhn_meter.agent_sampler` wraps a
            scripted player); one call per position, of ``samples`` turns.
        env_kwargs: the Tic Tac Toe environment's arguments, as the family plays it.
        samples: texts per position, 1 to :data:`~llm_envs.textarena.kuhn_meter.MAX_SAMPLES`.
        seed: the games' reset seed and the interval's draws.
        level: the interval's level, in (0, 1).
        draws: the interval's posterior draws, 1 to 100000.
        max_positions: past this many positions, no value (``reason`` says so).

    Raises:
        ValueError: not Tic Tac Toe, an argument out of bounds, or a sampler that returns
            another number of texts than it was asked for.
    """
    if not 1 <= samples <= MAX_SAMPLES or not 0 < level < 1 or not 1 <= draws <= 100_000:
        raise ValueError(
            f"samples in 1..{MAX_SAMPLES}, level in (0, 1) and draws in 1..100000, got "
            f"{samples}, {level} and {draws}"
        )
    root = raw_env(**env_kwargs)
    if game_name(root.config.game) != "TicTacToe":
        raise ValueError(f"this meter is Tic Tac Toe's, and the game is {root.config.game!r}")
    root.reset(seed=seed)
    retries = _retries(root)
    games: dict[str, TextArenaEnv] = {}
    texts_of: dict[tuple[str, int], str] = {}  # (board, cell): the first text read as that move
    refused = 0

    def ask(board: str, history: tuple[int, ...]) -> tuple[int, ...]:
        nonlocal refused
        # From the nearest position the policy was asked at on the path (this seat's: the same
        # mover), its own moves as it wrote them, the best response's as "[cell]".
        mine = _mover(board)
        asked = (k for k in range(len(history) - 2, -1, -2) if _board(history[:k]) in games)
        start = next(asked, 0)
        at = _board(history[:start])
        game = games[at].fork() if at in games and _mover(at) == mine else root.fork()
        for cell in history[start:]:
            game.step(texts_of[(at, cell)] if _mover(at) == mine else f"[{cell}]")
            at = play(at, cell)
        agent = game.agent_selection
        observation = game.observe(agent)
        cells, _ = tictactoe_board(observation)
        if "".join(c or "." for c in cells) != board:
            raise RuntimeError(f"the game's board is not {board!r}: {game.transcript()[-300:]}")
        texts = sample([(agent, observation, dict(game.infos[agent]))] * samples)
        if len(texts) != samples:
            raise ValueError(f"the sampler returned {len(texts)} texts for {samples} turns")
        reads: dict[str, int] = {}  # a policy repeats itself: each distinct text is read once
        counts = [0] * 10
        for text in map(str, texts):
            if text not in reads:
                reads[text] = read_move(game, text)
                texts_of.setdefault((board, reads[text]), text)
            counts[reads[text]] += 1
        refused += counts[INVALID]
        games[board] = game
        return tuple(counts)

    def result(**found: Any) -> TicTacToeMeasurement:
        positions = len(games)
        texts = positions * samples
        share = refused / max(1, texts)
        return TicTacToeMeasurement(
            positions=positions,
            texts=texts,
            invalid=share,
            retries=retries,
            samples=samples,
            **found,
        )

    nothing = {"exploitability": None, "low": None, "high": None, "seats": None}
    longest = 5 * (retries + 1) + 4  # the policy's five moves with their retries, the others'
    if root.config.max_turns < longest:
        reason = f"max_turns={root.config.max_turns} may cut a game off; the meter needs {longest}"
        return result(**nothing, reason=reason)
    try:
        tree = search(ask, max_positions)
    except TooManyPositions as error:
        reason = f"{error} (each costs {samples} texts); pass a larger max_positions"
        return result(**nothing, reason=reason)
    seat0, seat1 = (float(v[0]) for v in best_response_values(tree, retries))
    interval_seed = derive_seed(seed, 1)
    low, high = exploitability_interval(tree, retries, level=level, draws=draws, seed=interval_seed)
    return result(exploitability=(seat0 + seat1) / 2, low=low, high=high, seats=(seat0, seat1))


def exploitability_interval(
    tree: SearchTree,
    retries: int = 1,
    *,
    level: float = 0.95,
    draws: int = 1000,
    seed: int = 0,
) -> tuple[float, float]:
    """A ``level`` interval of exploitability from the counts of a search (see the module).

    Each visited position's shares of its free cells and a refused move are drawn from
    Dirichlet(counts + 1/2); an unseen move's value is bounded (``unseen`` of
    :func:`best_response_values`): the low end is the draws' lower quantile with unseen moves
    at their low bound, the high end the upper quantile at their high bound, each joined with
    its reflection about the counts' own exploitability. Cost: two vectorised evaluations of
    the search, ``draws`` at once, and ``draws * 80`` bytes of memory per position.
    """
    rng = np.random.default_rng(seed)
    drawn = {}
    for board, weights in tree.behaviour.items():
        support = [i for i in range(10) if i == INVALID or board[i] == "."]
        rows = np.zeros((draws, 10))
        rows[:, support] = rng.dirichlet([weights[i] + 0.5 for i in support], size=draws)
        drawn[board] = rows
    tail = (1 - level) / 2
    low_draws, high_draws = (
        sum(best_response_values(tree, retries, drawn, bound)) / 2 for bound in ("low", "high")
    )
    q_low, q_high = float(np.quantile(low_draws, tail)), float(np.quantile(high_draws, 1 - tail))
    estimate = float(sum(v[0] for v in best_response_values(tree, retries))) / 2
    return max(0.0, min(q_low, 2 * estimate - q_high)), min(1.0, max(q_high, 2 * estimate - q_low))


def _board(history: Sequence[int]) -> str:
    return functools.reduce(play, history, EMPTY)
