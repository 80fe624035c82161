"""A trainer's view: batched rollouts of the AEC and parallel forms, and Datums from them.

Byte tokens stand in for a tokenizer (baselines' byte_render). Each agent's
chat grows by its own answer and one feedback message per turn, so a whole
episode of one agent becomes a single Datum.
"""

from __future__ import annotations

import pytest

from baselines.data.datums import trajectory_to_data
from baselines.rollouts import rollout
from baselines.samplers import ScriptedPolicy
from llm_envs.code_collab import ScriptedCoder, env, parallel_env
from tests.code_collab.cases import IS_BIG, IS_PRIME, USES_AUX

AGENTS = {"helper": ScriptedCoder([IS_BIG, IS_PRIME]), "main": ScriptedCoder(USES_AUX)}


@pytest.mark.parametrize("form", [env, parallel_env])
def test_rollout_attributes_rewards_and_outcomes_to_turns(form, x_or_y):
    envs = [form(problems=[x_or_y], num_turns=2) for _ in range(3)]
    results = rollout(envs, ScriptedPolicy(AGENTS), seeds=[0, 1, 2])
    for result in results:
        for agent in ("helper", "main"):
            turns = result.trajectories[agent].transitions
            assert len(turns) == 2
            # Context keys come from before the turn, outcome keys from after it.
            assert [t.info["turn"] for t in turns] == [0, 1]
            assert [t.info["passed"] for t in turns] == [2, 5]
            assert [t.info["total"] for t in turns] == [pytest.approx(3.4), 4.0]
            step_rewards = sum(t.reward for t in turns)
            # R = 3.4 + 4.0 either way: the AEC form hands the last reward at the dead step.
            assert step_rewards + result.final_rewards[agent] == pytest.approx(7.4)


def test_each_agents_episode_is_one_datum(x_or_y):
    (result,) = rollout([parallel_env(problems=[x_or_y], num_turns=3)], ScriptedPolicy(AGENTS))
    for agent in ("helper", "main"):
        trajectory = result.trajectories[agent]
        assert len(trajectory.transitions) == 3
        (datum,) = trajectory_to_data(trajectory, advantage=1.0)
        assert int(datum.mask.sum()) == sum(len(t.action) for t in trajectory.transitions)
