"""Episode plans as trainers play them: one episode per setting for a self-play evaluation."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from baselines.env_families import family_of, one_per_setting
from llm_envs.registration import make_family


def test_a_role_rotation_is_played_once_per_question_with_every_seat_on_both_sides():
    family = make_family(
        "debate",
        {"num_agents": 3, "max_rounds": 1},
        task="arithmetic",
        task_kwargs={"max_digits": 1},
    )
    plan = family.evaluation([0, 1, 2, 3], seed=7)
    assert len(plan) == 12  # each question once per role of the trained policy
    merged, opponents = one_per_setting(plan)
    assert len(merged) == 4
    seats = frozenset(family.agents)
    assert merged.trained_agents == [seats] * 4 and opponents == [seats] * 4
    assert [o["question"] for o in merged.options] == [
        plan.options[3 * q]["question"] for q in range(4)
    ]
    assert merged.seeds == plan.seeds[::3] and merged.group_keys == plan.group_keys[::3]


def test_settings_that_differ_are_all_kept():
    family = make_family("debate", {"num_agents": 3}, task="arithmetic")
    plan = family.training([0, 1, 2], seed=3)  # self-play: one debate per question, all seats
    merged, opponents = one_per_setting(plan)
    assert len(merged) == len(plan) and merged.trained_agents == plan.trained_agents
    assert opponents == [frozenset()] * len(plan)


def test_family_of_builds_the_family_the_settings_name():
    settings = SimpleNamespace(
        env="debate",
        env_kwargs={"num_agents": 3},
        task="arithmetic",
        task_kwargs={"max_digits": 1},
        seed=5,
    )
    built = family_of(settings).training([0, 1], seed=2)
    by_hand = make_family(
        "debate", {"num_agents": 3}, task="arithmetic", seed=5, task_kwargs={"max_digits": 1}
    ).training([0, 1], seed=2)
    assert built.seeds == by_hand.seeds and built.options == by_hand.options


def test_family_of_names_an_unknown_env():
    settings = SimpleNamespace(
        env="no_such_env", env_kwargs={}, task="default", task_kwargs={}, seed=0
    )
    with pytest.raises(ValueError, match="no_such_env"):
        family_of(settings)
