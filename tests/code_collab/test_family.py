"""The code-collaboration family: a team reward, a held-out split, the first n problems."""

from __future__ import annotations

import pytest

from llm_envs.code_collab import load_problems
from llm_envs.registration import family_class, family_names, make_family


def task_ids(plan):
    return [options["problem"].task_id for options in plan.options]


def test_code_collaboration_declares_a_team_reward_and_the_turn_taking_families_do_not():
    teams = {name for name in family_names() if family_class(name).team_reward}
    assert "code_collab" in teams
    assert not teams & {"debate", "expert_iteration", "textarena"}


def test_holding_out_splits_the_last_problems_off_for_evaluation():
    family = make_family("code_collab", {}, task_kwargs={"num_problems": 5}, num_generations=1)
    assert family.num_eval_problems == 5
    held = family.holding_out(2)
    assert held.num_eval_problems == 2
    assert task_ids(held.evaluation([0, 1, 2], 0)) == [
        "CoopHumanEval/3", "CoopHumanEval/4", "CoopHumanEval/3"
    ]  # fmt: skip
    trained = set(task_ids(held.training(range(30), 0)))
    assert trained == {f"CoopHumanEval/{i}" for i in range(3)}
    assert family.holding_out(0) is family
    # The family it came from still plays every problem.
    assert set(task_ids(family.training(range(30), 0))) == {f"CoopHumanEval/{i}" for i in range(5)}


@pytest.mark.parametrize(
    ("count", "message"),
    [(5, "holding out 5 of the 5 problems leaves none to train on"), (-1, "count must be >= 0")],
)
def test_holding_out_too_many_is_refused(count, message):
    family = make_family("code_collab", {}, task_kwargs={"num_problems": 5})
    with pytest.raises(ValueError, match=message):
        family.holding_out(count)


@pytest.mark.parametrize(
    ("task_kwargs", "message"),
    [
        ({"num_problems": 0}, "num_problems must be an int >= 1, got 0"),
        ({"num_problems": True}, "num_problems must be an int >= 1, got True"),
        ({"max_digits": 2}, r"takes task_kwargs \{'num_problems': n\} only, got \['max_digits'\]"),
    ],
)
def test_bad_task_kwargs_are_refused(task_kwargs, message):
    with pytest.raises(ValueError, match=message):
        make_family("code_collab", {}, task_kwargs=task_kwargs)


def test_num_problems_keeps_the_first_problems_of_the_task():
    family = make_family("code_collab", {}, task="mbpp", task_kwargs={"num_problems": 3})
    assert family.problems == tuple(load_problems("mbpp")[:3])


def test_a_family_without_a_split_holds_out_by_evaluating_its_own_problems():
    family = make_family("debate", {})
    assert family.holding_out(3) is family
