"""The TextArena family: training and evaluation plans, reference players, rewards from records."""

from __future__ import annotations

import pytest

from llm_envs.registration import family_class, family_names, make_family
from llm_envs.seeding import derive_seed
from llm_envs.testing.conformance import play_aec
from llm_envs.textarena import METRICS, TextArenaEnv
from llm_envs.textarena.family import TextArenaFamily
from llm_envs.textarena.kuhn import nash_policy
from llm_envs.textarena.players import (
    KuhnPolicyPlayer,
    MinimaxTicTacToePlayer,
    RandomTicTacToePlayer,
)

AGENTS = ("agent_0", "agent_1")


def test_registered_as_textarena():
    assert "textarena" in family_names()
    assert family_class("textarena") is TextArenaFamily
    family = make_family("textarena", {"game": "KuhnPoker-v0"}, seed=3, strategy_mix={"iid": 2})
    assert isinstance(family, TextArenaFamily) and family.game == "KuhnPoker-v0"


def test_training_plan_one_self_play_game_per_group():
    family = TextArenaFamily({}, task="default", seed=0)
    plan = family.training([4, 7, 9], seed=11)
    assert len(plan) == 3
    assert plan.group_keys == [4, 7, 9]
    assert plan.seeds == [derive_seed(11, g) for g in (4, 7, 9)]
    assert plan.trained_agents == [frozenset(AGENTS)] * 3
    assert plan.options == [{}, {}, {}] and plan.grouped_agents is None
    assert len({id(e) for e in plan.envs}) == 3
    assert all(isinstance(e.unwrapped, TextArenaEnv) for e in plan.envs)


def test_evaluation_plays_each_group_once_per_seat_on_one_game():
    family = TextArenaFamily({"game": "KuhnPoker-v0"}, task="default", seed=0)
    plan = family.evaluation([2, 5], seed=1)
    assert len(plan) == 4
    assert plan.group_keys == [2, 2, 5, 5]
    assert plan.trained_agents == [frozenset({a}) for a in AGENTS] * 2
    assert plan.seeds == [derive_seed(1, 2)] * 2 + [derive_seed(1, 5)] * 2
    assert family.fixed_opponent is True and family.agents == AGENTS


def test_eval_episode_and_seating():
    family = TextArenaFamily({"max_turns": 50}, task="default", seed=0)
    arena, seed, options = family.eval_episode(3, seed=42)
    assert (seed, options) == (42, {}) and arena.unwrapped.config.max_turns == 50
    assert family.default_seating(1) == "self" and family.default_seating(3) == "rotations"
    assert family.num_eval_problems is None


def test_headline_metrics_are_end_infos_and_rewards_come_from_the_record():
    family = TextArenaFamily({}, task="default", seed=0)
    assert set(family.headline_metrics) <= set(METRICS)
    plan = family.training([0], seed=0)
    arena = plan.envs[0]
    seats = {"agent_0": MinimaxTicTacToePlayer(), "agent_1": RandomTicTacToePlayer(0)}
    seen = play_aec(arena, lambda agent, obs, info: seats[agent](obs, info), seed=plan.seeds[0])
    final = {agent: info for agent, _, _, term, _, info in seen if term}
    assert all(set(family.headline_metrics) <= set(info) for info in final.values())
    rewards = family.episode_rewards(arena.unwrapped.record(), family.env_kwargs)
    assert rewards.total == {a: final[a]["game_reward"] for a in AGENTS}


def test_reference_players_for_tictactoe_and_kuhn_poker_only():
    players = TextArenaFamily({}, task="default", seed=0).reference_players()
    assert set(players) == set(AGENTS)
    assert all(isinstance(p, MinimaxTicTacToePlayer) for p in players.values())
    kuhn = TextArenaFamily({"game": "KuhnPoker-v0"}, task="default", seed=0).reference_players()
    assert all(isinstance(p, KuhnPolicyPlayer) for p in kuhn.values())
    with pytest.raises(ValueError, match="reference players for TicTacToe and KuhnPoker only"):
        TextArenaFamily({"game": "SimpleNegotiation-v0"}, seed=0).reference_players()


def test_a_warm_start_teacher_for_kuhn_poker_only():
    with pytest.raises(ValueError, match="--warm-start-steps 0"):
        TextArenaFamily({}, task="default", seed=0).demonstrations([0], seed=0)
    family = TextArenaFamily({"game": "KuhnPoker-v0"}, task="default", seed=0)
    plan, teachers = family.demonstrations([0, 1, 2], seed=5, mistake_rate=0.0)
    assert len(plan) == 3 and set(teachers) == set(AGENTS)
    nash = {name: m.bet for name, m in nash_policy(1 / 6).items()}
    assert all(t.bets == nash for t in teachers.values())  # no mistakes: the Nash player
    for arena, seed in zip(plan.envs, plan.seeds, strict=True):
        play_aec(arena, lambda agent, obs, info: teachers[agent](obs, info), seed=seed)
        assert sum(arena.unwrapped.record()["summary"]["invalid_moves"].values()) == 0
    _, sloppy = family.demonstrations([0], seed=5, mistake_rate=1.0)
    assert set(sloppy["agent_0"].bets.values()) == {0.5}  # all mistakes: uniform play
    with pytest.raises(ValueError, match="mistake_rate must be in"):
        family.demonstrations([0], seed=5, mistake_rate=1.5)


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"env_kwargs": {"game": "Nope-v0"}}, "not a TextArena environment id"),
        ({"env_kwargs": {"num_players": 3}}, "num_players=3"),
        ({"env_kwargs": {}, "task": "gsm8k"}, "takes --task default"),
        ({"env_kwargs": {}, "task_kwargs": {"n": 1}}, "takes no task_kwargs"),
    ],
)
def test_bad_settings_fail_at_construction(kwargs, match):
    with pytest.raises(ValueError, match=match):
        TextArenaFamily(**{"task": "default", "seed": 0, **kwargs})
