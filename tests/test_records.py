"""The record envelope: every environment's record() has the same keys, copies and JSON values."""

from __future__ import annotations

import json

import pytest

from llm_envs.code_collab import parallel_env
from llm_envs.code_collab import raw_env as code_collab_aec_env
from llm_envs.debate import raw_env as debate_env
from llm_envs.expert_iteration import raw_env as expert_iteration_env
from llm_envs.records import episode_record, turn_record
from tests.code_collab.cases import F_PROBLEM

PROMPT = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "1 + 1?"}]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (
            ("agent_0", 1, PROMPT, "2"),
            {"agent": "agent_0", "round": 1, "prompt": PROMPT, "text": "2", "details": {}},
        ),
        (
            ("solver", 2, PROMPT[1:], "", {"correct": False, "score": 0.5}),
            {
                "agent": "solver",
                "round": 2,
                "prompt": PROMPT[1:],
                "text": "",
                "details": {"correct": False, "score": 0.5},
            },
        ),
    ],
)
def test_turn_record(args, expected):
    assert turn_record(*args) == expected


def test_turn_record_copies_what_it_is_given():
    prompt = [{"role": "user", "content": "Q"}]
    details = {"parse_error": None}
    turn = turn_record("agent_0", 1, prompt, "A", details)
    prompt[0]["content"] = "changed"
    details["parse_error"] = "changed"
    assert turn["prompt"] == [{"role": "user", "content": "Q"}]
    assert turn["details"] == {"parse_error": None}


def test_episode_record_is_the_four_keys():
    turns = [turn_record("agent_0", 1, PROMPT, "2")]
    summary = {"solved": True}
    record = episode_record("demo_v0", "1 + 1?", summary, iter(turns))
    assert record == {"env": "demo_v0", "title": "1 + 1?", "summary": summary, "turns": turns}
    summary["solved"] = False
    assert record["summary"] == {"solved": True}


def _played(game, texts):
    game.reset(seed=0)
    for text in texts:
        if not game.agents:
            break
        game.step(None if game.terminations[game.agent_selection] else text)
    return game.record()


DEBATE = {"num_agents": 2, "max_rounds": 1, "on_parse_error": "mask"}


@pytest.mark.parametrize(
    ("make", "texts", "name", "agents"),
    [
        (lambda: debate_env(**DEBATE), ["garbage", "x"], "debate_v0", ["agent_0", "agent_1"]),
        (lambda: expert_iteration_env(), ["\\boxed{3}"], "expert_iteration_v0", ["solver"]),
    ],
)
def test_every_aec_family_writes_the_envelope(make, texts, name, agents):
    record = _played(make(), texts)
    assert record["env"] == name
    assert [t["agent"] for t in record["turns"]] == agents
    assert json.loads(json.dumps(record)) == record


def test_code_collab_writes_the_envelope_in_both_forms():
    game = parallel_env(problems=[F_PROBLEM], num_turns=1)
    game.reset(seed=0)
    game.step({"helper": "def aux(x):\n    return x", "main": "def f(x):\n    return aux(x)"})
    record = game.record()
    assert record["env"] == "code_collab_v0"
    assert [(t["agent"], t["round"]) for t in record["turns"]] == [("helper", 1), ("main", 1)]
    assert json.loads(json.dumps(record)) == record
    aec = code_collab_aec_env(problems=[F_PROBLEM], num_turns=1)
    aec.reset(seed=0)
    aec.step("def aux(x):\n    return x")
    aec.step("def f(x):\n    return aux(x)")
    assert aec.record() == aec.parallel_env.record() == record
