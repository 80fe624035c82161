"""``invalid_move_penalty``: each invalid move costs its agent the penalty; the payoff stays."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

pytest.importorskip("textarena")

from llm_envs.textarena.env import env as make_env
from llm_envs.textarena.family import TextArenaFamily

KUHN = {"game": "KuhnPoker-v0", "game_kwargs": {"max_rounds": 1}, "payoff": "chips"}
MOVES = ("[check]", "[bet]", "[call]", "[fold]", "hello", "[raise]", "")


def play(texts: list[str], **kwargs) -> tuple[dict[str, float], dict[str, dict], int]:
    """Returns, final infos and the invalid moves of each agent for one game played by ``texts``."""
    game = make_env(**{**KUHN, **kwargs})
    game.reset(seed=3)
    returns = dict.fromkeys(game.possible_agents, 0.0)
    infos: dict[str, dict] = {}
    moves = iter(texts)
    for agent in game.agent_iter(max_iter=50):
        _, reward, terminated, truncated, info = game.last()
        returns[agent] += reward
        if terminated or truncated:
            infos[agent] = info
            game.step(None)
            continue
        game.step(next(moves, "[fold]"))
    return returns, infos, game


def test_two_invalid_moves_cost_twice_the_penalty_on_top_of_the_lost_chip():
    returns, infos, _ = play(["hello", "hello"], invalid_move_penalty=0.25)
    # agent_1 moves first in round 1: two invalid moves in a row lose its stake (1 chip)
    # and cost 2 x 0.25.
    assert returns == {"agent_0": 1.0, "agent_1": -1.5}
    assert infos["agent_1"]["game_reward"] == -1.0  # the payoff stays the game's
    assert infos["agent_1"]["invalid_moves"] == 2


def test_a_forgiven_invalid_move_costs_the_penalty_alone():
    # An invalid move, then a check each: a showdown of one chip each way.
    free, _, _ = play(["hello", "[check]", "[check]"])
    paid, _, _ = play(["hello", "[check]", "[check]"], invalid_move_penalty=0.5)
    assert paid == {"agent_0": free["agent_0"], "agent_1": free["agent_1"] - 0.5}


@settings(max_examples=30, deadline=None)
@given(st.lists(st.sampled_from(MOVES), max_size=8), st.sampled_from([0.0, 0.1, 1.0]))
def test_the_penalty_is_the_only_difference_and_counts_every_invalid_move(texts, penalty):
    free, _, _ = play(texts)
    paid, infos, _ = play(texts, invalid_move_penalty=penalty)
    for agent in free:
        invalid = infos[agent]["invalid_moves"]
        assert paid[agent] == pytest.approx(free[agent] - penalty * invalid)


@pytest.mark.parametrize(
    ("value", "error"), [(-0.1, ValueError), (float("nan"), ValueError), ("1", TypeError)]
)
def test_a_bad_penalty_is_refused_by_name(value, error):
    with pytest.raises(error, match="invalid_move_penalty must be a finite number"):
        make_env(**KUHN, invalid_move_penalty=value)


def test_the_family_declares_the_penalty_in_its_reward_range_and_bounds_what_clients_ask():
    family = TextArenaFamily({**KUHN, "invalid_move_penalty": 0.5, "max_turns": 4})
    assert family.reward_range == (-2.0 - 0.5 * 4, 2.0)
    assert TextArenaFamily(KUHN).reward_range == (-2.0, 2.0)
    settings_ = TextArenaFamily.client_settings
    assert "invalid_move_penalty" in settings_.env_kwargs
    assert 2.0 not in settings_.env_kwargs["invalid_move_penalty"]
