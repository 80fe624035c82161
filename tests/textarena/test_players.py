"""The scripted TextArena players: legal moves, and the strength of the Tic Tac Toe minimax."""

from __future__ import annotations

from collections import Counter

import pytest

from llm_envs.testing.conformance import play_aec
from llm_envs.textarena import raw_env
from llm_envs.textarena.players import (
    MinimaxTicTacToePlayer,
    RandomTicTacToePlayer,
    random_player,
    strong_player,
    tictactoe_board,
)

GAMES = ["TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0", "IteratedPrisonersDilemma-v0"]
SEEDS = range(100)


def duel(arena, seats, seed):
    """Play one game with ``seats`` (agent -> player); return each agent's outcome."""
    play_aec(arena, lambda agent, obs, info: seats[agent](obs, info), seed=seed)
    assert all(n == 0 for n in arena.record()["summary"]["invalid_moves"].values())
    return arena.outcome()


def tally(first, second, seeds=SEEDS):
    """``first``'s results against ``second`` over ``seeds``, once in each seat per seed."""
    arena = raw_env(game="TicTacToe-v0")
    results: Counter[str] = Counter()
    for seed in seeds:
        a, b = first(seed), second(seed + 10_000)
        results[duel(arena, {"agent_0": a, "agent_1": b}, seed)["agent_0"]] += 1
        results[duel(arena, {"agent_0": b, "agent_1": a}, seed)["agent_1"]] += 1
    return results


@pytest.mark.parametrize("game", GAMES)
def test_random_players_play_legal_moves_to_the_end(game):
    arena = raw_env(game=game)
    for seed in range(5):
        seats = {
            a: random_player(game, seed=10 * seed + i) for i, a in enumerate(arena.possible_agents)
        }
        outcome = duel(arena, seats, seed)  # asserts no invalid move
        assert set(outcome.values()) <= {"win", "draw", "loss"}


def test_minimax_never_loses_to_random_and_mostly_wins():
    results = tally(lambda s: MinimaxTicTacToePlayer(), RandomTicTacToePlayer)
    games = 2 * len(SEEDS)
    assert results["loss"] == 0
    assert results["win"] >= 0.75 * games, results  # measured: 182 wins, 18 draws of 200


def test_minimax_against_itself_always_draws():
    assert tally(
        lambda s: MinimaxTicTacToePlayer(), lambda s: MinimaxTicTacToePlayer(), range(2)
    ) == {"draw": 4}


def test_random_against_random_is_balanced_over_seats():
    results = tally(RandomTicTacToePlayer, RandomTicTacToePlayer)
    games = 2 * len(SEEDS)
    # Measured: 92 wins, 76 losses, 32 draws of 200 (the first mover wins more often).
    assert abs(results["win"] - results["loss"]) <= 0.1 * games, results
    assert results["draw"] < results["win"]


def test_minimax_takes_a_win_and_blocks_a_loss():
    def observation(cells, mark="X"):
        rows = [
            " | ".join(c or str(3 * r + i) for i, c in enumerate(cells[3 * r : 3 * r + 3]))
            for r in range(3)
        ]
        board = "\n---+---+---\n".join(f" {row} " for row in rows)
        text = f"you will be '{mark}'\nCurrent Board:\n\n{board}\n\nAvailable Moves: ..."
        return {"messages": [{"role": "user", "content": text}]}

    player = MinimaxTicTacToePlayer()
    # X to move: X wins at 2 (the top row) rather than block O's threat at 5.
    assert player(observation(["X", "X", "", "O", "O", "", "", "", ""]), {}) == "[2]"
    # X to move, no win: block O's row at 5.
    assert player(observation(["X", "", "", "O", "O", "", "X", "", ""]), {}) == "[5]"
    assert tictactoe_board(observation(["X", "", "", "O", "O", "", "X", "", ""]))[1] == "X"


def test_players_refuse_what_they_cannot_read():
    # The parser refuses a chat without a board; the players answer it all the same
    # (tests/test_players_take_any_text.py).
    with pytest.raises(ValueError, match="no Tic Tac Toe board"):
        tictactoe_board({"messages": [{"role": "user", "content": "Kuhn Poker"}]})
    with pytest.raises(ValueError, match="and KuhnPoker-v0"):
        strong_player("SimpleNegotiation-v0")
    with pytest.raises(ValueError, match="there are players for TicTacToe-v0"):
        random_player("Chess-v0")


def test_random_players_are_deterministic_for_a_seed():
    arena = raw_env(game="KuhnPoker-v0")
    records = []
    for _ in range(2):
        seats = {
            a: random_player("KuhnPoker-v0", seed=i) for i, a in enumerate(arena.possible_agents)
        }
        duel(arena, seats, seed=4)
        records.append(arena.record())
    assert records[0] == records[1]
