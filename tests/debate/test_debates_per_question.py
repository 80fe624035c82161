"""Several debates of one question in a training group (``debates_per_question``).

Within one debate the later seats mostly repeat the first answer (the main
job: every seat equally right in 10 or 11 of 12 debates), so returns centred
within a debate carry nothing about correctness; centred over several debates
of the question they do.
"""

from __future__ import annotations

import numpy as np
import pytest

from baselines.data.advantages import center_advantages
from llm_envs.registration import make_family
from llm_envs.seeding import derive_seed


def sums(**options):
    return make_family("debate", {"num_agents": 3, "max_rounds": 1}, task="arithmetic", **options)


def test_a_group_is_the_debates_of_one_question_each_with_its_own_seed():
    plan = sums(debates_per_question=3).training([4, 9], seed=7)
    assert plan.group_keys == [4, 4, 4, 9, 9, 9]
    questions = [o["question"].text for o in plan.options]
    assert len(set(questions[:3])) == 1 and len(set(questions[3:])) == 1
    assert questions[0] != questions[3]
    assert plan.seeds == [derive_seed(7, g, k) for g in (4, 9) for k in range(3)]
    assert len(plan.envs) == 6
    assert set(plan.trained_agents) == {frozenset({"agent_0", "agent_1", "agent_2"})}


def test_one_debate_per_question_is_the_plan_as_it_was():
    plan = sums().training([4, 9], seed=7)
    assert plan.group_keys == [0, 1]  # a group is one debate
    assert plan.seeds == [derive_seed(7, 4), derive_seed(7, 9)]


def test_the_warm_start_teacher_plays_one_debate_per_question():
    plan, teachers = sums(debates_per_question=3).demonstrations([0, 1, 2, 3], seed=0)
    assert len(plan.envs) == 4 and set(teachers) == {"agent_0", "agent_1", "agent_2"}


@pytest.mark.parametrize("bad", [0, -1, 1.5, True])
def test_a_bad_count_is_refused_naming_the_setting(bad):
    with pytest.raises((TypeError, ValueError), match="debates_per_question must be an int >= 1"):
        sums(debates_per_question=bad)


def test_centred_over_the_debates_of_a_question_a_correct_debate_is_credited():
    # Each debate's seats agree: debate 0 right (each seat +0.5), debates 1 and 2 wrong.
    returns = [1.5, 1.5, 1.5, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0]
    alone = [center_advantages(np.array(returns[i : i + 3])) for i in (0, 3, 6)]
    assert all(np.allclose(a, 0.0) for a in alone)  # one debate per group: no signal
    together = center_advantages(np.array(returns))
    assert np.all(together[:3] > 0) and np.all(together[3:] < 0)
