"""Rollout functions for TRL without a trainer: prompt layout, refusals, the reward function."""

from __future__ import annotations

import pytest

from baselines.grpo.adapters import DebateRollout, env_reward, expert_iteration_rollout
from llm_envs.debate import DebateQuestion
from llm_envs.tasks import ArithmeticTask, MathProblem


def test_env_reward_returns_the_returns_and_logs_mean_metrics():
    logged = {}
    rewards = env_reward(
        ["a", "b", "c"],
        env_reward=[1, 0.5, -1],
        env_metrics=[{"correct": 1.0, "num_turns": 2.0}, {"correct": 0.0}, {"num_turns": 1.0}],
        log_metric=logged.__setitem__,
    )
    assert rewards == [1.0, 0.5, -1.0]
    assert logged == {"env/correct": 0.5, "env/num_turns": 1.5}


def test_env_reward_wants_one_return_per_completion():
    with pytest.raises(ValueError, match="one per prompt entry"):
        env_reward(["a", "b"], env_reward=[1.0])


def test_debate_plays_one_debate_per_block_of_num_agents_prompts():
    rollout = DebateRollout(["What is 1 + 1?", DebateQuestion("2 + 2?", "4")], num_agents=2)
    assert rollout.num_generations == 2
    assert rollout.dataset_prompts() == ["What is 1 + 1?", "2 + 2?"]
    plan = rollout._plan(["2 + 2?", "2 + 2?", "A new question?", "A new question?"])
    assert plan.rows == [(0, "agent_0"), (0, "agent_1"), (1, "agent_0"), (1, "agent_1")]
    assert plan.options[0]["question"].answer == "4"  # the reference answer travels along
    assert plan.options[1]["question"].text == "A new question?"
    assert len(plan.envs) == 2
    with pytest.raises(ValueError, match=r"num_generations=2"):
        rollout._plan(["2 + 2?", "What is 1 + 1?"])
    with pytest.raises(ValueError, match="not a multiple of 2"):
        rollout._plan(["2 + 2?"] * 3)


def test_debate_config_is_checked_when_built():
    with pytest.raises(ValueError, match="num_agents"):
        DebateRollout(num_agents=1)
    with pytest.raises(ValueError, match="reward"):
        DebateRollout(reward="majority")


def test_expert_iteration_plays_one_episode_per_prompt_entry():
    problems = ArithmeticTask(num_problems=3, seed=0)
    rollout = expert_iteration_rollout("iid", problems, num_generations=2)
    prompts = [p for p in rollout.dataset_prompts() for _ in range(2)]
    plan = rollout._plan(prompts)
    assert plan.rows == [(i, "solver") for i in range(6)]
    assert [o["problem"] for o in plan.options] == [p for p in problems for _ in range(2)]
    with pytest.raises(KeyError, match="not one of this rollout's items"):
        rollout._plan(["What is the meaning of life?"])


@pytest.mark.parametrize("strategy", ["answer_hint", "prompt_augmentation"])
def test_strategies_that_need_the_context_swap_point_to_the_importance_sampling_trainer(strategy):
    with pytest.raises(ValueError, match=r"context swap.*baselines\.is_trainer"):
        expert_iteration_rollout(strategy)


def test_two_problems_with_one_prompt_and_different_answers_are_refused():
    twins = [MathProblem("a", "What is x?", "1"), MathProblem("b", "What is x?", "2")]
    with pytest.raises(ValueError, match="read the same"):
        expert_iteration_rollout("iid", twins)


def test_a_group_needs_two_generations():
    with pytest.raises(ValueError, match="num_generations must be >= 2"):
        expert_iteration_rollout("iid", num_generations=1)


def test_any_family_plays_one_training_group_per_block_of_prompts():
    from baselines.grpo.family_rollout import FamilyRollout
    from llm_envs.family import derive_seed
    from llm_envs.registration import make_family

    family = make_family("expert_iteration", {}, task="arithmetic", strategy_mix={"iid": 3})
    rollout = FamilyRollout(family, num_groups=5, seed=7)
    assert rollout.num_generations == 3  # three episodes, the solver's trajectory each
    assert rollout.dataset_prompts() == [f"expert_iteration group {g}" for g in range(5)]
    plan = rollout._plan(["expert_iteration group 4"] * 3 + ["expert_iteration group 1"] * 3)
    assert plan.rows == [(i, "solver") for i in range(6)]
    # The family's own plan for each group, seeds included: the same group plays the same.
    expected = family.training([4], derive_seed(7, 4))
    assert plan.seeds[:3] == expected.seeds
    assert [o["problem"] for o in plan.options[:3]] == [o["problem"] for o in expected.options]
    assert len({o["problem"] for o in plan.options[:3]}) == 1  # one problem per group
    with pytest.raises(KeyError, match="not a group of this rollout"):
        rollout._plan(["What is 1 + 1?"] * 3)
    with pytest.raises(ValueError, match=r"num_generations=3"):
        rollout._plan(["expert_iteration group 1"] * 2 + ["expert_iteration group 2"])


def test_a_family_rollout_rows_are_every_seat_of_a_self_play_episode():
    from baselines.grpo.family_rollout import FamilyRollout
    from llm_envs.registration import make_family

    rollout = FamilyRollout(make_family("debate", {"num_agents": 3}), num_groups=2)
    assert rollout.num_generations == 3
    plan = rollout._plan(["debate group 0"] * 3)
    assert plan.rows == [(0, "agent_0"), (0, "agent_1"), (0, "agent_2")]


def test_a_family_whose_group_holds_one_trajectory_is_refused():
    from baselines.grpo.family_rollout import FamilyRollout
    from llm_envs.registration import make_family

    family = make_family("expert_iteration", {}, strategy_mix={"iid": 1})
    with pytest.raises(ValueError, match="needs at least two"):
        FamilyRollout(family)


def test_grpo_takes_any_registered_env_and_names_them_when_unknown():
    from baselines.grpo.config import GRPORunConfig

    with pytest.raises(ValueError, match="unknown env 'chess'; the registered ones are: debate"):
        GRPORunConfig(env="chess")
