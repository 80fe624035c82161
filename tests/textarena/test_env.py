"""The TextArena environment: conformance, hand-checked games, seeding, forks, garbage, errors."""

from __future__ import annotations

import json
import random
import subprocess
import sys

import numpy as np
import pettingzoo
import pytest

import llm_envs  # noqa: F401  (registers the environments)
from llm_envs.contract import STOP, TURN
from llm_envs.family import recorded_rewards
from llm_envs.testing.conformance import check_aec_env, play_aec
from llm_envs.textarena import TextArenaConfig, TextArenaEnv, env, known_games, outcomes, raw_env
from llm_envs.textarena.players import random_player

GAMES = ["TicTacToe-v0", "KuhnPoker-v0", "SimpleNegotiation-v0", "IteratedPrisonersDilemma-v0"]


def game_text(arena, agent):
    """Everything the game has sent ``agent`` (its user messages), one line each."""
    return "\n".join(m["content"] for m in arena.observe(agent)["messages"] if m["role"] == "user")


def play(game, texts, seed=0, **kwargs):
    """Play ``texts`` in turn order (one per live turn); return the env and every last()."""
    arena = raw_env(game=game, **kwargs)
    moves = iter(texts)
    seen = play_aec(arena, lambda agent, obs, info: next(moves), seed=seed)
    assert next(moves, None) is None, "the game ended before every text was played"
    return arena, seen


def acting(seen):
    """The agents that acted, in order (dead steps left out)."""
    return [agent for agent, _, _, term, trunc, _ in seen if not (term or trunc)]


def final(seen):
    """Each agent's ``(reward, info)`` at its dead step."""
    return {agent: (reward, info) for agent, _, reward, term, trunc, info in seen if term or trunc}


# --------------------------------------------------------------------- conformance


@pytest.mark.parametrize("game", GAMES)
def test_pettingzoo_and_llm_envs_conformance(game):
    check_aec_env(lambda: env(game=game), num_cycles=50)


def test_conformance_of_a_raw_id_and_a_short_turn_limit():
    check_aec_env(lambda: raw_env(game="TicTacToe-v0-raw", max_turns=3), num_cycles=20)


def test_registered_with_pettingzoo_and_the_default_is_tictactoe():
    arena = pettingzoo.make("aec", "llm_envs/TextArena-v0", game="KuhnPoker-v0")
    arena.reset(seed=0)
    assert arena.unwrapped.config.game == "KuhnPoker-v0"
    assert pettingzoo.make("aec", "llm_envs/TextArena-v0").unwrapped.config.game == "TicTacToe-v0"
    assert "TicTacToe-v0" in known_games()


# ----------------------------------------------------------- hand-checked outcomes

# TextArena's Tic Tac Toe: Player 0 moves first with 'O'; cells 0-8, row by row.
WIN = ["[0]", "[3]", "[1]", "[4]", "[2]"]  # agent_0 completes the top row
DRAW = ["[4]", "[0]", "[2]", "[6]", "[3]", "[5]", "[1]", "[7]", "[8]"]


@pytest.mark.parametrize(
    ("texts", "rewards", "metrics"),
    [
        (WIN, {"agent_0": 1.0, "agent_1": -1.0}, {"agent_0": "win", "agent_1": "loss"}),
        (DRAW, {"agent_0": 0.0, "agent_1": 0.0}, {"agent_0": "draw", "agent_1": "draw"}),
        # A bare cell is bracketed by the id's ActionFormattingWrapper.
        (["0", "3", "1", "4", "2"], {"agent_0": 1.0, "agent_1": -1.0}, None),
        # Two invalid moves in a row lose: a bad format, then an occupied cell.
        (["[4]", "hello", "[4]"], {"agent_0": 1.0, "agent_1": -1.0}, None),
        # One invalid move earns a retry; the game goes on.
        (["[9]", "[0]", "[3]", "[1]", "[4]", "[2]"], {"agent_0": 1.0, "agent_1": -1.0}, None),
    ],
)
def test_tictactoe_outcomes(texts, rewards, metrics):
    arena, seen = play("TicTacToe-v0", texts)
    ends = final(seen)
    assert {a: r for a, (r, _) in ends.items()} == rewards
    assert arena.terminations == {} and arena.agents == []  # every agent took its dead step
    for agent, (_, info) in ends.items():
        outcome = metrics[agent] if metrics else ("win" if rewards[agent] > 0 else "loss")
        assert {k: info[k] for k in ("win", "draw", "loss")} == {
            k: float(k == outcome) for k in ("win", "draw", "loss")
        }
        assert info["game_reward"] == rewards[agent]
    # Only the last step pays: every earlier last() saw 0.
    assert all(r == 0 for _, _, r, term, trunc, _ in seen if not (term or trunc))


def test_an_invalid_move_is_a_retry_then_a_loss():
    arena, seen = play("TicTacToe-v0", ["[4]", "hello", "[4]"])
    assert acting(seen) == ["agent_0", "agent_1", "agent_1"]  # the same agent retries
    infos = [info for agent, _, _, term, _, info in seen if agent == "agent_1" and not term]
    assert infos[1]["invalid_move"] is True  # its last() after the first invalid move
    ends = final(seen)
    assert ends["agent_1"][1]["invalid_moves"] == 2 and ends["agent_0"][1]["invalid_moves"] == 0
    assert ends["agent_1"][1]["invalid_move"] is True
    assert "attempted an invalid move" in game_text(arena, "agent_1")
    record = arena.record()
    assert [t["details"]["invalid_move"] for t in record["turns"]] == [False, True, True]
    assert record["summary"]["invalid_moves"] == {"agent_0": 0, "agent_1": 2}


def test_a_raw_id_sends_the_text_verbatim():
    arena, _ = play("TicTacToe-v0-raw", ["4", "4"])  # not bracketed: two invalid moves
    assert arena.outcome() == {"agent_0": "loss", "agent_1": "win"}


def test_kuhn_poker_fold_and_private_cards():
    # Player 1 opens round 1; it bets and Player 0 folds: Player 1 takes the pot (+1 chip).
    arena, seen = play("KuhnPoker-v0", ["[bet]", "[fold]"], game_kwargs={"max_rounds": 1})
    assert acting(seen) == ["agent_1", "agent_0"]
    assert {a: r for a, (r, _) in final(seen).items()} == {"agent_0": -1.0, "agent_1": 1.0}
    assert "Player 0 has folded" in arena.transcript()
    cards = {}
    for agent in arena.possible_agents:
        text = game_text(arena, agent)
        cards[agent] = [line for line in text.splitlines() if "Your card is" in line]
    # Each agent sees its own card of each dealt round, never the other's.
    assert cards["agent_0"] and cards["agent_1"] and cards["agent_0"] != cards["agent_1"]


def test_kuhn_poker_illegal_action_is_an_invalid_move():
    arena, seen = play(
        "KuhnPoker-v0", ["[call]", "[check]", "[check]"], game_kwargs={"max_rounds": 1}
    )
    assert [info.get("invalid_move") for _, _, _, t, _, info in seen if not t][1] is True
    assert arena.record()["summary"]["invalid_moves"] == {"agent_0": 0, "agent_1": 1}
    assert arena.outcome()["agent_0"] in ("win", "loss")  # a showdown settles it


def test_simple_negotiation_without_trades_is_a_draw_and_a_bad_offer_is_invalid():
    # TextArena checks its limit of 10 turns before counting the current one: 11 actions.
    _, seen = play("SimpleNegotiation-v0", ["[Deny]"] * 11)
    assert {a: (r, i["draw"]) for a, (r, i) in final(seen).items()} == {
        "agent_0": (0.0, 1.0),
        "agent_1": (0.0, 1.0),
    }
    arena, _ = play("SimpleNegotiation-v0", ["[Offer: 1000 Ore -> 1 Wheat]"] + ["x"] * 11)
    assert arena.record()["turns"][0]["details"]["invalid_move"] is True


def test_prisoners_dilemma_defector_wins():
    texts = ["hi", "hello", "[Defect]", "[Cooperate]"]
    kwargs = {"num_rounds": 1, "communication_turns": 1}
    arena, seen = play("IteratedPrisonersDilemma-v0", texts, game_kwargs=kwargs)
    assert {a: r for a, (r, _) in final(seen).items()} == {"agent_0": 1.0, "agent_1": -1.0}
    # The decision is private until the round resolves: agent_1 never saw "[Defect]" typed.
    assert "[Player 0] [Defect]" not in game_text(arena, "agent_1")


def test_max_turns_cuts_the_game_off_with_zero_rewards():
    arena, seen = play("TicTacToe-v0", ["[0]", "[1]", "[2]"], max_turns=3)
    ends = final(seen)
    assert all(trunc for _, _, _, _, trunc, _ in seen[-2:])
    assert {a: r for a, (r, _) in ends.items()} == {"agent_0": 0.0, "agent_1": 0.0}
    assert all(i["win"] == i["draw"] == i["loss"] == 0.0 for _, i in ends.values())
    assert arena.record()["summary"]["outcome"] == {"agent_0": "cut off", "agent_1": "cut off"}


def test_infos_hold_stop_turn_and_numeric_end_metrics():
    arena = raw_env()
    arena.reset(seed=0)
    assert arena.infos == {"agent_0": {STOP: [], TURN: 0}, "agent_1": {STOP: [], TURN: 0}}
    _, seen = play("TicTacToe-v0", WIN)
    for _, (_, info) in final(seen).items():
        assert info[TURN] == len(WIN)
        for key in ("win", "draw", "loss", "invalid_moves", "game_reward"):
            assert isinstance(info[key], int | float) and not isinstance(info[key], bool)


def test_outcomes_of_rewards():
    assert outcomes({"a": 1, "b": 1, "c": -1}) == {"a": "win", "b": "win", "c": "loss"}
    assert outcomes({"a": 0.5, "b": 0, "c": -1}) == {"a": "win", "b": "loss", "c": "loss"}
    assert outcomes({}) == {}


# ------------------------------------------------------------- records and render


def test_record_is_json_ready_and_states_rewards_game_and_outcome():
    arena, _ = play("TicTacToe-v0", WIN)
    record = arena.record()
    assert json.loads(json.dumps(record)) == record
    summary = record["summary"]
    assert summary["game"] == "TicTacToe-v0" and record["title"] == "TicTacToe-v0"
    assert summary["outcome"] == {"agent_0": "win", "agent_1": "loss"}
    assert summary["reason"] == "Player 0 has won!"
    assert recorded_rewards(record, {}).total == {"agent_0": 1.0, "agent_1": -1.0}
    assert [t["agent"] for t in record["turns"]] == ["agent_0", "agent_1"] * 2 + ["agent_0"]
    assert [t["round"] for t in record["turns"]] == [1, 2, 3, 4, 5]
    assert record["turns"][0]["prompt"][0]["content"].startswith("[GAME] You are Player 0")


def test_render_ansi_returns_the_transcript():
    arena = raw_env(render_mode="ansi")
    assert "no episode yet" in arena.render()
    moves = iter(WIN)
    play_aec(arena, lambda agent, obs, info: next(moves), seed=0)
    text = arena.render()
    assert text.startswith("TextArena TicTacToe-v0 (2 players)")
    assert "[Player 0] [2]" in text and "Player 0 has won!" in text
    assert text.splitlines()[-1] == "=== Player 0 has won! === agent_0: win (1), agent_1: loss (-1)"


# ------------------------------------------------------------------------- seeding


def kuhn_episode(seed, arena=None):
    arena = arena or raw_env(game="KuhnPoker-v0")
    players = {
        a: random_player("KuhnPoker-v0", seed=i) for i, a in enumerate(arena.possible_agents)
    }
    seen = play_aec(arena, lambda agent, obs, info: players[agent](obs, info), seed=seed)
    return seen, arena.record()


def test_a_seed_fixes_the_episode_and_seeds_differ():
    first, record = kuhn_episode(5)
    again, record_again = kuhn_episode(5)
    assert first == again and record == record_again
    deals = {kuhn_episode(s)[1]["turns"][0]["prompt"][0]["content"] for s in range(8)}
    assert len(deals) > 1  # the cards depend on the seed


def test_an_episode_does_not_depend_on_earlier_episodes_or_the_global_random_state():
    used = raw_env(game="KuhnPoker-v0")
    for seed in range(3):
        kuhn_episode(seed, used)
    # The games draw from the legacy global generators: the caller's state stays as it was.
    random.seed(123)
    np.random.seed(123)  # noqa: NPY002
    before = random.getstate(), np.random.get_state()[1].copy()  # noqa: NPY002
    assert kuhn_episode(5, used) == kuhn_episode(5)
    assert random.getstate() == before[0]
    assert (np.random.get_state()[1] == before[1]).all()  # noqa: NPY002


def test_interleaved_envs_do_not_share_a_random_stream():
    alone = [kuhn_episode(s)[1] for s in (1, 2)]
    arenas = [raw_env(game="KuhnPoker-v0") for _ in range(2)]
    players = [
        {a: random_player("KuhnPoker-v0", seed=i) for i, a in enumerate(arenas[0].possible_agents)}
        for _ in arenas
    ]
    for arena, seed in zip(arenas, (1, 2), strict=True):
        arena.reset(seed=seed)
    while any(arena.agents for arena in arenas):  # one step of each in turn
        for arena, seats in zip(arenas, players, strict=True):
            if arena.agents:
                agent = arena.agent_selection
                obs, _, term, trunc, info = arena.last()
                arena.step(None if term or trunc else seats[agent](obs, info))
                random.random()  # someone else drawing from the global stream
    assert [arena.record() for arena in arenas] == alone


def test_reset_without_a_seed_continues_the_seeded_stream():
    a, b = raw_env(game="KuhnPoker-v0"), raw_env(game="KuhnPoker-v0")
    a.reset(seed=9)
    b.reset(seed=9)
    a.reset()
    b.reset()
    assert a.game_seed == b.game_seed
    assert a.observe("agent_0") == b.observe("agent_0")


# --------------------------------------------------------------------------- forks


def test_fork_is_independent_and_replays_identically():
    arena = raw_env(game="KuhnPoker-v0")
    arena.reset(seed=3)
    arena.step("[check]")
    fork = arena.fork()
    before = fork.observe("agent_0")
    arena.step("[bet]")
    assert fork.observe("agent_0") == before and len(fork.turns) == 1
    fork.step("[bet]")
    # The same actions give the same continuation, next round's deal included.
    for text in ["[call]", "[check]", "[check]"]:
        arena.step(text)
        fork.step(text)
    assert [fork.observe(a) for a in fork.agents] == [arena.observe(a) for a in arena.agents]


# ------------------------------------------------------------------ garbage actions

GARBAGE = [
    "",
    "   ",
    "[",
    "]]][[[",
    "ü 😀 \x00 <tag>",
    "[Offer: -> ]",
    "[Offer: 1 Sheep -> 1 Sheep]",
    "[Offer: 99999999999999999999999 Ore -> 1 Wheat]",
    "[Accept] [Offer: 1 Wheat -> 2 Ore]",
    "[-1]",
    "[99999999999999999999]",
    "[check] [bet] [fold]",
    "[Cooperate][Defect]",
    "x" * 5000,
]


@pytest.mark.parametrize("game", GAMES)
def test_any_text_is_accepted(game):
    for seed in range(3):
        arena = raw_env(game=game, max_turns=60)
        texts = iter(GARBAGE * 5)
        seen = play_aec(arena, lambda agent, obs, info, t=texts: next(t, "[Deny]"), seed=seed)
        assert all(isinstance(i.get("invalid_move", False), bool) for *_, i in seen)
        assert json.loads(json.dumps(arena.record()))


# -------------------------------------------------------------------------- errors


def test_an_unknown_game_names_close_and_known_ids():
    with pytest.raises(ValueError, match=r"did you mean 'TicTacToe-v0'.*known ids include"):
        TextArenaEnv(game="TicTacToe")
    with pytest.raises(ValueError, match="known ids include 'TicTacToe-v0'"):
        TextArenaEnv(game="NoSuchGame-v9")


def test_a_game_refusing_the_players_or_kwargs_fails_at_construction():
    with pytest.raises(ValueError, match=r"num_players=3.*AssertionError"):
        TextArenaEnv(game="TicTacToe-v0", num_players=3)
    with pytest.raises(ValueError, match=r"game_kwargs=\{'bogus': 1\}.*TypeError"):
        TextArenaEnv(game="KuhnPoker-v0", game_kwargs={"bogus": 1})


def test_a_game_bug_is_named_as_such():
    # TextArena 0.7.4's ThreeCardMonte swaps set_invalid_move's arguments: its reward is text.
    arena = raw_env(game="ThreeCardMonte-v0", num_players=1)
    arena.reset(seed=0)
    arena.step("no cup")
    with pytest.raises(RuntimeError, match=r"ended with the reward 'Bad action.*not a number"):
        arena.step("no cup again")


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"game": 5}, TypeError, "game must be a TextArena environment id"),
        ({"game": " "}, TypeError, "game must be a TextArena environment id"),
        ({"num_players": 0}, ValueError, "num_players must be an int >= 1"),
        ({"max_turns": True}, TypeError, r"max_turns must be an int >= 1, got True \(a bool\)"),
        ({"game_kwargs": "max_rounds=5"}, TypeError, "game_kwargs must be a dict"),
        ({"game_kwargs": {1: 2}}, TypeError, "game_kwargs must be a dict"),
    ],
)
def test_config_checks(kwargs, error, match):
    with pytest.raises(error, match=match):
        TextArenaConfig(**kwargs)


def test_config_copies_game_kwargs_and_merges_overrides():
    kwargs = {"max_rounds": 1}
    config = TextArenaConfig(game="KuhnPoker-v0", game_kwargs=kwargs)
    kwargs["max_rounds"] = 9
    assert config.game_kwargs == {"max_rounds": 1}
    merged = TextArenaEnv(config, max_turns=7).config
    assert (merged.game, merged.max_turns, merged.game_kwargs) == (
        "KuhnPoker-v0",
        7,
        {"max_rounds": 1},
    )
    with pytest.raises(TypeError, match="unknown keyword argument"):
        TextArenaEnv(games="TicTacToe-v0")


def test_importing_the_package_does_not_import_textarena():
    code = (
        "import sys, llm_envs, llm_envs.textarena, llm_envs.textarena.family\n"
        "import llm_envs.textarena.players\n"
        "print('textarena' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_each_observation_extends_the_last_by_the_move_and_what_followed():
    from llm_envs.textarena import env

    arena = env(game="TicTacToe-v0")
    arena.reset(seed=3)
    before: dict[str, list] = {}
    for move in ["[4]", "[0]", "[8]", "nonsense", "[2]"]:
        agent = arena.agent_selection
        messages = arena.observe(agent)["messages"]
        if agent in before:
            old = before[agent]
            assert messages[: len(old)] == old  # the previous observation, unchanged
            assert messages[len(old)]["role"] == "assistant"  # then the agent's own move
        assert messages[-1]["role"] == "user"
        before[agent] = messages
        arena.step(move)
