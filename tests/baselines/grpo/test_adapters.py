"""The TRL rollout of any family without a trainer: groups, rows, refusals, the reward function.

Every family goes through one rollout (:class:`FamilyRollout`); these tests
check what each family's plan makes of it.
"""

from __future__ import annotations

import pytest

from baselines.grpo.reward import env_reward
from baselines.grpo.rollout_func import FamilyRollout
from llm_envs.bridges.trl import refuse_context_swap


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


def test_a_debate_is_one_group_and_generation_g_is_agent_g():
    rollout = FamilyRollout.for_env("debate", {"max_rounds": 2}, task="arithmetic", num_groups=2)
    assert rollout.num_generations == 3 and rollout.max_turns == 2  # an answer per round
    rows = rollout.dataset_prompts()
    assert rows[0].startswith("debate group 0: What is")  # the row shows the question
    plan = rollout._plan([rows[1]] * 3 + [rows[0]] * 3)
    agents = ["agent_0", "agent_1", "agent_2"]
    assert plan.rows == [(0, a) for a in agents] + [(1, a) for a in agents]
    question = plan.options[0]["question"]
    assert rows[1].endswith(question.text) and question.answer is not None  # the answer travels
    assert len(plan.envs) == 2
    # One growing chat per agent: TRL trains an agent's debate as one sequence.
    assert all(env.unwrapped.config.observation_mode == "chat" for env in plan.envs)
    with pytest.raises(ValueError, match=r"num_generations=3"):
        rollout._plan([rows[0], rows[1], rows[1]])
    with pytest.raises(ValueError, match="not a multiple of 3"):
        rollout._plan([rows[0]] * 4)
    with pytest.raises(KeyError, match="not a group of this rollout"):
        rollout._plan(["A new question?"] * 3)


@pytest.mark.parametrize(
    ("env_kwargs", "match"),
    [
        ({"num_agents": 1}, "num_agents"),
        ({"reward": "majority"}, "reward"),
        ({"observation_mode": "prompt"}, "observation_mode='chat'"),
    ],
)
def test_a_debate_config_is_checked_when_built(env_kwargs, match):
    with pytest.raises(ValueError, match=match):
        FamilyRollout.for_env("debate", env_kwargs)


def test_expert_iteration_plays_one_episode_per_generation():
    rollout = FamilyRollout.for_env(
        "expert_iteration",
        task="arithmetic",
        num_groups=3,
        options={"strategy": "iid", "num_generations": 2},
    )
    assert (rollout.num_generations, rollout.max_turns) == (2, 1)
    rows = rollout.dataset_prompts()
    plan = rollout._plan([rows[0]] * 2 + [rows[2]] * 2)
    assert plan.rows == [(i, "solver") for i in range(4)]  # the solver of each episode
    problems = [o["problem"] for o in plan.options]
    assert problems[0] == problems[1] != problems[2] == problems[3]  # one problem per group
    assert {o["strategy"] for o in plan.options} == {"iid"}
    assert rows[2].endswith(problems[2].question)


def test_two_turn_feedback_holds_two_attempts_per_generation():
    rollout = FamilyRollout.for_env(
        "expert_iteration", options={"strategy": "two_turn_feedback", "num_generations": 3}
    )
    assert (rollout.num_generations, rollout.max_turns) == (3, 2)


@pytest.mark.parametrize("strategy", ["answer_hint", "prompt_augmentation"])
def test_strategies_that_need_the_context_swap_point_to_the_importance_sampling_trainer(strategy):
    with pytest.raises(ValueError, match=r"context swap.*baselines\.is_trainer"):
        FamilyRollout.for_env(
            "expert_iteration", options={"strategy": strategy, "num_generations": 2}
        )


def test_a_swap_at_the_first_turn_is_refused_when_played_too():
    info = {"training_messages": [{"role": "user", "content": "2 + 3?"}], "strategy": "hint"}
    with pytest.raises(ValueError, match=r"solver's first turn \(strategy 'hint'\)"):
        refuse_context_swap("solver", info)
    refuse_context_swap("solver", {"strategy": "iid"})  # no swap: nothing to refuse


def test_single_agent_code_collaboration_trains_the_main_agent_alone():
    rollout = FamilyRollout.for_env(
        "code_collab",
        {"num_agents": 1, "num_turns": 3},
        task="humaneval",
        num_groups=2,
        options={"num_generations": 3},
    )
    assert (rollout.num_generations, rollout.max_turns) == (3, 3)
    rows = rollout.dataset_prompts()
    assert rows[0].startswith("code_collab group 0: HumanEval/")
    plan = rollout._plan([rows[1]] * 3)
    assert plan.rows == [(0, "main"), (1, "main"), (2, "main")]
    assert len({o["problem"].task_id for o in plan.options}) == 1


def test_two_agent_code_collaboration_trains_both_seats_with_one_model():
    rollout = FamilyRollout.for_env("code_collab", num_groups=1, options={"num_generations": 2})
    assert rollout.num_generations == 4  # helper and main of two episodes
    plan = rollout._plan(rollout.dataset_prompts() * 4)
    assert plan.rows == [(0, "helper"), (0, "main"), (1, "helper"), (1, "main")]


def test_any_family_plays_one_training_group_per_block_of_prompts():
    from llm_envs.registration import make_family
    from llm_envs.seeding import derive_seed

    family = make_family("expert_iteration", {}, task="arithmetic", strategy_mix={"iid": 3})
    rollout = FamilyRollout(family, num_groups=5, seed=7)
    assert rollout.num_generations == 3  # three episodes, the solver's trajectory each
    rows = rollout.dataset_prompts()
    assert [row.split(":")[0] for row in rows] == [f"expert_iteration group {g}" for g in range(5)]
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
    from llm_envs.registration import make_family

    rollout = FamilyRollout(make_family("debate", {"num_agents": 3}), num_groups=2)
    assert rollout.num_generations == 3
    plan = rollout._plan(["debate group 0"] * 3)
    assert plan.rows == [(0, "agent_0"), (0, "agent_1"), (0, "agent_2")]


def test_a_family_whose_group_holds_one_trajectory_is_refused():
    from llm_envs.registration import make_family

    family = make_family("expert_iteration", {}, strategy_mix={"iid": 1})
    with pytest.raises(ValueError, match="needs at least two"):
        FamilyRollout(family)
    with pytest.raises(ValueError, match="needs at least two"):
        FamilyRollout.for_env("expert_iteration", options={"num_generations": 1})


def test_grpo_takes_any_registered_env_and_names_them_when_unknown():
    from baselines.grpo.config import GRPORunConfig

    with pytest.raises(ValueError, match="unknown env 'chess'; the registered ones are: debate"):
        GRPORunConfig(env="chess")
