"""What a trainer asks of every family: its run options, the turns an agent takes, plan titles.

The trainers never name a family (``baselines`` is family-blind): each of
these answers comes from the family object, so a table per question covers
every registered family.
"""

from __future__ import annotations

import numpy as np
import pytest

from llm_envs.family import EpisodePlan
from llm_envs.registration import family_names, make_family
from llm_envs.seeding import ordered


@pytest.mark.parametrize("name", family_names())
def test_every_family_titles_its_training_episodes(name):
    family = make_family(name, {})
    plan = family.training([0, 1], seed=0)
    assert plan.titles is not None and len(plan.titles) == len(plan)
    assert all(isinstance(title, str) and title for title in plan.titles)
    assert isinstance(family.max_agent_turns, int) and family.max_agent_turns >= 1


@pytest.mark.parametrize(
    ("name", "env_kwargs", "options", "turns"),
    [
        ("debate", {}, {}, 3),  # one answer per round, max_rounds 3
        ("debate", {"max_rounds": 2}, {}, 2),
        ("expert_iteration", {}, {}, 1),
        ("expert_iteration", {}, {"strategy": "iid", "num_generations": 2}, 1),
        ("expert_iteration", {}, {"strategy": "two_turn_feedback"}, 2),  # attempt 1, attempt 2
        ("expert_iteration", {}, {"strategy_mix": {"iid": 2, "two_turn_feedback": 1}}, 2),
        ("expert_iteration", {}, {"strategy_mix": {"iid": 2, "two_turn_feedback": 0}}, 1),
        ("code_collab", {}, {}, 2),  # every agent acts in every one of num_turns turns
        ("code_collab", {"num_agents": 1, "num_turns": 3}, {}, 3),
        ("textarena", {"max_turns": 12}, {}, 12),  # the cap on all actions bounds each agent's
    ],
)
def test_the_most_turns_an_agent_takes(name, env_kwargs, options, turns):
    assert make_family(name, env_kwargs, **options).max_agent_turns == turns


def test_expert_iteration_takes_one_strategy_and_the_episodes_per_problem():
    family = make_family("expert_iteration", {}, strategy="two_turn_feedback", num_generations=3)
    plan = family.training([5], seed=0)
    assert [o["strategy"] for o in plan.options] == ["two_turn_feedback"] * 3
    assert len({o["problem"].task_id for o in plan.options}) == 1 and plan.group_keys == [0] * 3
    assert make_family("expert_iteration", {}).mix == {"iid": 4}  # the default group
    assert make_family("expert_iteration", {}, num_generations=2).mix == {"iid": 2}


@pytest.mark.parametrize(
    ("env_kwargs", "options", "match"),
    [
        ({}, {"strategy_mix": {"iid": 2}, "strategy": "iid"}, "give strategy_mix .* not both"),
        ({}, {"strategy_mix": {"iid": 2}, "num_generations": 2}, "not both"),
        ({"strategy": "iid"}, {}, r"not env_kwargs\['strategy'\]"),
        ({}, {"strategy": "nope"}, "unknown strategy 'nope'"),
    ],
)
def test_expert_iteration_refuses_settings_that_contradict(env_kwargs, options, match):
    with pytest.raises(ValueError, match=match):
        make_family("expert_iteration", env_kwargs, **options)


def test_expert_iteration_reads_code_tasks_and_trains_on_mbpps_train_split():
    mbpp = make_family("expert_iteration", {}, task="mbpp")
    assert (len(mbpp.train_problems), len(mbpp.eval_problems)) == (120, 257)
    assert mbpp.num_eval_problems == 257
    humaneval = make_family("expert_iteration", {}, task="humaneval")
    assert len(humaneval.train_problems) == len(humaneval.eval_problems) == 164
    plan = humaneval.training([0], seed=0)
    assert plan.titles[0].startswith("HumanEval/")
    with pytest.raises(ValueError, match="task_kwargs are settings of the arithmetic task"):
        make_family("expert_iteration", {}, task="mbpp", task_kwargs={"max_digits": 1})


def test_code_collaboration_groups_num_generations_episodes_of_a_problem():
    plan = make_family("code_collab", {}, num_generations=3).training([0], seed=0)
    assert len(plan) == 3 and len({str(o["problem"]) for o in plan.options}) == 1
    with pytest.raises(ValueError, match="num_generations must be >= 1, got 0"):
        make_family("code_collab", {}, num_generations=0)


def test_chat_observations_make_a_debate_one_growing_chat_per_agent():
    assert make_family("debate", {}).env_kwargs.get("observation_mode") is None
    family = make_family("debate", {}, chat_observations=True)
    assert family.training([0], seed=0).envs[0].unwrapped.config.observation_mode == "chat"
    with pytest.raises(ValueError, match="observation_mode='chat', got 'prompt'"):
        make_family("debate", {"observation_mode": "prompt"}, chat_observations=True)


def test_a_plan_needs_one_title_per_episode():
    one = {"envs": [None], "seeds": [0], "options": [{}], "group_keys": [0]}
    EpisodePlan(**one, trained_agents=[frozenset()], titles=["a question"])
    with pytest.raises(ValueError, match="one entry per episode"):
        EpisodePlan(**one, trained_agents=[frozenset()], titles=[])


def test_ordered_is_a_seeded_permutation_per_epoch():
    seed, items = 7, list(range(10))
    for epoch in (0, 3):
        expected = np.random.default_rng([seed, epoch]).permutation(10)
        got = [ordered(items, epoch * 10 + i, seed) for i in range(10)]
        assert got == expected.tolist()


def test_a_task_seed_replaces_the_runs():
    from llm_envs.tasks import ArithmeticTask
    from llm_envs.tasks.math_sources import math_problems

    problems = math_problems("arithmetic", "train", 0, {"seed": 5, "num_problems": 3})
    assert list(problems) == list(ArithmeticTask(seed=5, num_problems=3))
    assert list(math_problems("arithmetic", "eval", 0, {"seed": 5, "num_problems": 3})) == list(
        ArithmeticTask(seed=6, num_problems=3)
    )
