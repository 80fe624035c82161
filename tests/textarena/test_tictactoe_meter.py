"""Tic Tac Toe's exploitability: the expectimax by hand and by brute force, the sampled meter.

The pure search against values computed here independently (a plain
expectimax over every board, no pruning, in exact fractions), hand cases near
the end of a game, the meter through the real environment with the scripted
players, its bounds and the family's wiring.
"""

from __future__ import annotations

import functools
import itertools
import zlib
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from llm_envs.textarena import raw_env
from llm_envs.textarena.family import TextArenaFamily
from llm_envs.textarena.kuhn_meter import agent_sampler
from llm_envs.textarena.players import (
    MinimaxTicTacToePlayer,
    RandomTicTacToePlayer,
    tictactoe_board,
)
from llm_envs.textarena.tictactoe_meter import (
    EMPTY,
    best_response_values,
    exploitability,
    exploitability_interval,
    measure,
    read_move,
    search,
)

TTT = {"game": "TicTacToe-v0"}
LINES = [(0, 1, 2), (3, 4, 5), (6, 7, 8), (0, 3, 6), (1, 4, 7), (2, 5, 8), (0, 4, 8), (2, 4, 6)]


# ------------------------------------------------- an independent reference


def winner(board):
    lines = [board[a] for a, b, c in LINES if board[a] != "." and board[a] == board[b] == board[c]]
    return lines[0] if lines else ""


def mover(board):
    return "O" if board.count("O") == board.count("X") else "X"


def after(board, cell):
    return board[:cell] + mover(board) + board[cell + 1 :]


def free(board):
    return [i for i, c in enumerate(board) if c == "."]


@functools.cache
def perfect(board):
    """The mover's value under perfect play, +1, 0 or -1 (no preference for speed)."""
    if winner(board):
        return -1
    return max((-perfect(after(board, c)) for c in free(board)), default=0)


def minimax_cell(board):
    return min(free(board), key=lambda c: (perfect(after(board, c)), c))


def brute_force(policy, seat, board=EMPTY):
    """The best response's value in ``seat``: every board, every move, exact fractions.

    ``policy(board)`` gives the policy's shares of each cell (no refused moves).
    """
    responder = "X" if seat == 0 else "O"

    @functools.cache
    def value(board):
        won = winner(board)
        if won or "." not in board:
            return Fraction(1 if won == responder else -1 if won else 0)
        if mover(board) == responder:
            return max(value(after(board, c)) for c in free(board))
        shares = policy(board)
        return sum(shares[c] * value(after(board, c)) for c in free(board) if shares[c])

    return value(board)


def uniform(board):
    cells = free(board)
    return [Fraction(1, len(cells)) if c in cells else Fraction(0) for c in range(9)]


def as_weights(shares, invalid=0):
    return [float(p) for p in shares] + [float(invalid)]


def first_free(board):
    return [float(i == board.index(".")) for i in range(10)]


def minimax(board):
    return [float(i == minimax_cell(board)) for i in range(10)]


# ---------------------------------------------------------- the pure search

# Player O to move first; "XX.OOXOO.": X wins at 2; at 8 it lets O win at 2 (2-4-6).
NEAR_END = "XX.OOXOO."


def test_the_uniform_policy_matches_the_brute_force():
    seat0, seat1 = (brute_force(uniform, seat) for seat in (0, 1))
    assert (seat0, seat1) == (Fraction(874, 945), Fraction(191, 192))
    tree = search(lambda board, _: as_weights(uniform(board)), max_positions=10_000)
    found = best_response_values(tree)
    assert [float(v[0]) for v in found] == pytest.approx([float(seat0), float(seat1)], abs=1e-12)
    assert len(tree.behaviour) == 3742  # the cost the docs quote


@pytest.mark.parametrize(
    ("name", "policy", "seats", "positions"),
    [
        ("minimax (no haste to win)", minimax, (0.0, 0.0), 546),
        ("first free cell", first_free, (1.0, 1.0), 5),
        ("never a valid move", lambda board: [0.0] * 9 + [1.0], (1.0, 1.0), 2),
        (
            "half its texts refused, else minimax",
            lambda b: [x / 2 for x in minimax(b)[:9]] + [0.5],
            None,
            None,
        ),
    ],
)
def test_values_by_hand(name, policy, seats, positions):
    tree = search(lambda board, _: policy(board), max_positions=10_000)
    found = tuple(float(v[0]) for v in best_response_values(tree))
    if seats is None:
        # Each of the policy's moves forfeits with 1/4; the first, at the start, already does.
        assert found[0] >= 0.25 and found[1] > 0
    else:
        assert found == pytest.approx(seats, abs=1e-12)
        assert len(tree.behaviour) == positions
    assert exploitability(policy) == pytest.approx(sum(found) / 2)


@pytest.mark.parametrize(
    ("shares", "retries", "seat1"),
    [
        # X (the policy in seat 1) wins at 2 (-1 for the responder) or plays 8 (O wins: +1).
        ((0.5, 0.5, 0.0), 1, 0.0),
        # A refused share q = 1/4 and one retry: the moves count (1 + q) times, forfeit q^2:
        # -5/8 + 5/16 + 1/16 = -1/4.
        ((0.5, 0.25, 0.25), 1, -0.25),
        # Without a retry the refusal forfeits at once: -1/2 + 1/4 + 1/4.
        ((0.5, 0.25, 0.25), 0, 0.0),
        ((0.0, 0.0, 1.0), 1, 1.0),
    ],
)
def test_one_move_from_the_end(shares, retries, seat1):
    win, lose, refused = shares
    weights = [0.0] * 10
    weights[2], weights[8], weights[9] = win, lose, refused
    tree = search(lambda board, _: weights, start=NEAR_END)
    seat0, found = (float(v[0]) for v in best_response_values(tree, retries))
    assert seat0 == 1.0  # in seat 0 the responder is X, to move: it wins at 2
    assert found == pytest.approx(seat1)
    assert list(tree.behaviour) == [NEAR_END]  # after X's 8, O's 2 ends the game


@pytest.mark.parametrize(("count", "width_below"), [(8, 0.6), (80, 0.2)])
def test_the_interval_holds_the_estimate_and_narrows_with_counts(count, width_below):
    # Seat 0's responder wins at once (1); seat 1's gets -1 or +1 half the time (0): 1/2.
    counts = [0.0] * 10
    counts[2] = counts[8] = count
    tree = search(lambda board, _: counts, start=NEAR_END)
    low, high = exploitability_interval(tree, draws=2000)
    assert low <= 0.5 <= high and high - low < width_below
    assert (low, high) == exploitability_interval(tree, draws=2000)  # seeded


def test_the_best_response_stops_at_a_sure_win():
    # X to move wins at 2 at once: cell 8 (and the policy's reply there) is never tried.
    tree = search(lambda board, _: first_free(board), start=NEAR_END)
    assert tree.tried[(0, NEAR_END)] == (2,)


def test_bad_input_is_refused():
    with pytest.raises(ValueError, match="start is nine cells"):
        search(lambda board, _: first_free(board), start="XX.......")
    with pytest.raises(ValueError, match="taken cells"):
        search(lambda board, _: [1.0] + [0.0] * 9)
    with pytest.raises(ValueError, match="10 weights"):
        search(lambda board, _: [0.0] * 10)


def scrambled(seed, mix):
    """A policy by board: ``mix`` on the minimax move, the rest on one cell picked by a hash."""

    def policy(board):
        cells = free(board)
        pick = cells[zlib.crc32(f"{seed}{board}".encode()) % len(cells)]
        weights = [0.0] * 10
        weights[pick] += 1 - mix
        weights[minimax_cell(board)] += mix
        return weights

    return policy


@settings(max_examples=10, deadline=None)
@given(seed=st.integers(0, 10_000), mixes=st.lists(st.floats(0, 1), min_size=2, max_size=3))
def test_exploitability_is_bounded_and_falls_as_minimax_is_mixed_in(seed, mixes):
    values = [exploitability(scrambled(seed, mix), max_positions=5000) for mix in sorted(mixes)]
    assert all(0 <= v <= 1 for v in values)
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(values))
    assert exploitability(scrambled(seed, 1.0)) == 0.0


# ------------------------------------------------- through the environment


def test_the_game_pays_what_the_meter_assumes():
    def played(moves):
        game = raw_env(**TTT)
        game.reset(seed=0)
        for move in moves:
            game.step(move)
        return game

    assert played(["[0]", "[3]", "[1]", "[4]", "[2]"]).rewards == {"agent_0": 1.0, "agent_1": -1.0}
    draw = ["[0]", "[1]", "[2]", "[4]", "[3]", "[5]", "[7]", "[6]", "[8]"]
    assert played(draw).rewards == {"agent_0": 0.0, "agent_1": 0.0}
    # A refused move earns a retry, the second in a row loses.
    assert not played(["[0]", "nonsense"]).done
    assert played(["[0]", "nonsense", "[0]"]).rewards == {"agent_0": 1.0, "agent_1": -1.0}
    assert played(["[4]", "?"]).agent_selection == "agent_1"


def test_read_move_reads_as_the_game_does():
    game = raw_env(**TTT)
    game.reset(seed=0)
    game.step("[4]")
    assert [read_move(game, t) for t in ("[4]", "4", " I take [ 8 ] ", "[12]", "")] == [
        9,
        9,
        8,
        9,
        9,
    ]
    assert not game.turns[1:]  # the position itself took nothing


def minimax_player(observation, info):
    return MinimaxTicTacToePlayer()(observation, info)


def first_free_player(observation, info):
    cells, _ = tictactoe_board(observation)
    return f"[{cells.index('')}]"


@pytest.mark.parametrize(
    ("name", "player", "value", "positions", "invalid"),
    [
        ("minimax", minimax_player, 0.0, 507, 0.0),
        ("first free cell", first_free_player, 1.0, 5, 0.0),
        ("never a valid move", lambda observation, info: "I would rather not.", 1.0, 2, 1.0),
    ],
)
def test_the_meter_plays_the_scripted_players(name, player, value, positions, invalid):
    found = measure(agent_sampler(player), TTT, samples=2, draws=200)
    assert found.exploitability == pytest.approx(value, abs=1e-12)
    assert (found.positions, found.texts, found.invalid, found.retries) == (
        positions,
        2 * positions,
        invalid,
        1,
    )
    assert found.low is not None and found.high is not None
    assert found.low - 1e-12 <= found.exploitability <= found.high + 1e-12
    if name == "minimax":
        # Two texts a position cannot rule out a rare blunder: the interval reaches above 0.
        assert found.low == 0.0 and 0 < found.high < 1
    assert found.metrics()["exploitability"] == found.exploitability


def test_the_sampled_random_player_matches_the_brute_force_on_its_counts():
    counts = {}

    def record(turns):
        texts = agent_sampler(RandomTicTacToePlayer(seed=5))(turns)
        cells, _ = tictactoe_board(turns[0][1])
        counts["".join(c or "." for c in cells)] = [int(t.strip("[]")) for t in texts]
        return texts

    found = measure(record, TTT, samples=1, draws=10)

    def sampled(board):
        # Boards the search did not reach are in pruned branches: any policy serves there.
        if board not in counts:
            return uniform(board)
        return [Fraction(counts[board].count(c), len(counts[board])) for c in range(9)]

    expected = tuple(float(brute_force(sampled, seat)) for seat in (0, 1))
    assert found.seats == pytest.approx(expected, abs=1e-12)
    assert found.positions == len(counts)


def test_the_policy_reads_its_own_earlier_texts_in_its_chat():
    chats = []

    def chatty(turns):
        chats.extend(observation["messages"] for _, observation, _ in turns)
        return [f"My move: [{first_free_player(o, i).strip('[]')}]" for _, o, i in turns]

    measure(chatty, TTT, samples=1, draws=10)
    mine = [m["content"] for chat in chats for m in chat if m["role"] == "assistant"]
    assert mine and all(text.startswith("My move: [") for text in mine)


def test_past_its_bound_the_meter_gives_no_value_and_says_why():
    sample = agent_sampler(RandomTicTacToePlayer(seed=0))
    found = measure(sample, TTT, samples=4, max_positions=3)
    assert found.exploitability is None and found.metrics() == {}
    assert found.positions == 3 and "max_positions=3" in found.reason
    cut = measure(sample, {**TTT, "max_turns": 10}, samples=1)
    assert cut.exploitability is None and "max_turns=10" in cut.reason


def test_bad_arguments_are_refused():
    sample = agent_sampler(minimax_player)
    with pytest.raises(ValueError, match="Tic Tac Toe's"):
        measure(sample, {"game": "KuhnPoker-v0"})
    with pytest.raises(ValueError, match="samples in 1"):
        measure(sample, TTT, samples=0)
    with pytest.raises(ValueError, match="returned 1 texts for 2"):
        measure(lambda turns: ["[4]"], TTT, samples=2)


def test_the_family_measures_tic_tac_toe():
    family = TextArenaFamily(TTT)
    found = family.measure(agent_sampler(first_free_player), samples=1, seed=0)
    assert found["exploitability"] == 1.0 and found["exploitability_positions"] == 5
    assert family.measure(agent_sampler(minimax_player), samples=0, seed=0) == {}
    assert (
        TextArenaFamily({"game": "IteratedPrisonersDilemma-v0"}).measure(
            agent_sampler(minimax_player), samples=1, seed=0
        )
        == {}
    )


def test_the_family_warns_when_the_meter_gives_no_value():
    family = TextArenaFamily({**TTT, "max_turns": 10})
    with pytest.warns(UserWarning, match="max_turns=10"):
        assert family.measure(agent_sampler(minimax_player), samples=1, seed=0) == {}
