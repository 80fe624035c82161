"""The plugin's Python entry point and its settings: what verifiers builds, and bad settings.

No model here: ``test_verifiers_env.py`` plays the episodes.
"""

from __future__ import annotations

import pytest

vf = pytest.importorskip(
    "verifiers.v1",
    reason="verifiers 0.4 is not installed here: these tests run in the verifiers "
    "virtualenv that .ci/verifiers.sh builds",
)

from llm_envs.bridges.verifiers import (  # noqa: E402
    PLUGIN,
    ChatHarnessConfig,
    SeatEnv,
    SeatTaskset,
    load_environment,
)
from llm_envs.debate import DEFAULT_QUESTIONS  # noqa: E402

DEBATE = {"num_agents": 3, "max_rounds": 1}
COUNT = len(DEFAULT_QUESTIONS)  # debate's default task: the built-in questions


def test_load_environment_builds_the_seat_env_with_one_row_per_problem():
    env = load_environment(
        "debate", seat="agent_2", task="arithmetic", env_kwargs=DEBATE, num_problems=3
    )
    assert isinstance(env, SeatEnv) and isinstance(env.taskset, SeatTaskset)
    rows = [task.data for task in env.taskset]
    assert [(r.problem, r.seat, r.name) for r in rows] == [
        (0, "agent_2", "debate#0/agent_2"),
        (1, "agent_2", "debate#1/agent_2"),
        (2, "agent_2", "debate#2/agent_2"),
    ]
    assert all(r.prompt is None for r in rows)  # the episode opens the conversation
    # Every role plays through the plugin's own harness, on this machine.
    harnesses = env.config.agent_harnesses()
    assert set(harnesses) == {"player", "opponents"}
    assert all(isinstance(h, ChatHarnessConfig) and h.id == PLUGIN for h in harnesses.values())
    assert env.config.player.runtime.type == "subprocess"
    assert env.config.others == "reference"


def test_problems_are_all_the_counted_ones_or_endless():
    counted = load_environment("debate", env_kwargs=DEBATE)  # the built-in questions
    assert counted.taskset.bounded
    assert [t.data.problem for t in counted.taskset] == list(range(COUNT))
    endless = load_environment("debate", task="arithmetic", env_kwargs=DEBATE, first_problem=5)
    assert not endless.taskset.bounded  # vf-eval refuses it without -n
    assert [t.data.problem for t in endless.taskset.take(3)] == [5, 6, 7]


def test_verifiers_resolves_the_plugin_by_its_id():
    load_environment("debate")  # registers the plugin's name in this process
    config = vf.resolve_env_config(
        {"taskset": {"id": PLUGIN, "env": "textarena", "env_kwargs": {"game": "TicTacToe-v0"}}}
    )
    assert type(config).__name__ == "SeatEnvConfig"
    assert vf.environment_class(PLUGIN) is SeatEnv


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"seat": "agent_7"}, r"seat 'agent_7' is not an agent of --env debate"),
        (
            {"num_problems": len(DEFAULT_QUESTIONS) + 1},
            r"has 6 problems, asked for problems from 0 to 6",
        ),
        ({"first_problem": len(DEFAULT_QUESTIONS)}, r"has 6 problems, asked for problems from 6;"),
        ({"task": "no-such-task"}, r"--env debate takes --task"),
        ({"env_kwargs": {"num_agents": 1}}, r"num_agents"),
    ],
)
def test_a_bad_setting_is_refused_before_any_rollout(kwargs, message):
    settings = {"env_kwargs": DEBATE, **kwargs}
    with pytest.raises(ValueError, match=message):
        load_environment("debate", **settings)


def test_an_unknown_family_is_refused():
    with pytest.raises(ValueError, match="unknown env 'chess'"):
        load_environment("chess")


def test_the_old_module_path_warns_and_is_the_bridge(monkeypatch):
    import importlib
    import sys

    import llm_envs.bridges.verifiers as bridge

    monkeypatch.delitem(sys.modules, "llm_envs.adapters.verifiers_env", raising=False)
    with pytest.warns(DeprecationWarning, match="import llm_envs.bridges.verifiers instead"):
        assert importlib.import_module("llm_envs.adapters.verifiers_env") is bridge
