"""A family from a package of its own in the verifiers bridge, by its name alone.

``.ci/verifiers.sh`` installs into verifiers' environment the package that
``llm-envs new-env guessnum`` writes (a two-seat guessing race, declared in the
``llm_envs.families`` entry-point group); nothing here registers it.
``load_environment("guessnum")`` builds its seat's environment, and verifiers'
own ``vf-eval`` plays it against the tiny model (the helpers and the model
server of ``test_verifiers_env.py``), each reward the seat's return in the
same game played here.
"""

from __future__ import annotations

import pytest

pytest.importorskip("guessnum", reason="the scaffold's package: .ci/verifiers.sh installs it")
pytest.importorskip(
    "verifiers.v1",
    reason="verifiers 0.4 is not installed here: these tests run in the verifiers "
    "virtualenv that .ci/verifiers.sh builds",
)

from llm_envs.bridges.verifiers import SeatEnv, load_environment
from tests.verifiers import test_verifiers_env as cases
from tests.verifiers.test_verifiers_env import (
    NUM_PROBLEMS,
    assistant_texts,
    episodes_of,
    play_locally,
    reward,
    start_vf_eval,
)

model_server = cases.model_server  # the fixture: the tiny model behind /v1

CASE = {
    "env": "guessnum",
    "env_kwargs": {"max_rounds": 2},
    "env_task": "default",
    "seat": "agent_1",
    "others": "reference",  # the package's bisecting player
}


def test_load_environment_builds_its_seat_by_name():
    env = load_environment("guessnum", seat="agent_1", env_kwargs={"max_rounds": 2}, num_problems=3)
    assert isinstance(env, SeatEnv)
    assert [t.data.name for t in env.taskset] == [f"guessnum#{p}/agent_1" for p in range(3)]
    with pytest.raises(ValueError, match="seat 'agent_7' is not an agent of --env guessnum"):
        load_environment("guessnum", seat="agent_7")


@pytest.mark.slow
def test_vf_eval_plays_its_seat_against_its_reference_player(model_server, tmp_path):
    url, _ = model_server
    proc = start_vf_eval(tmp_path, url, "guessnum-reference", CASE)
    evaluations = {"guessnum-reference": (proc.wait(timeout=300), tmp_path)}
    episodes = episodes_of(evaluations, "guessnum-reference")
    assert sorted(e["task"]["data"]["problem"] for e in episodes) == list(range(NUM_PROBLEMS))
    for episode in episodes:
        assert episode["ok"], episode.get("errors")
        (trace,) = episode["traces"]
        texts = {"agent_1": assistant_texts(trace)}
        expected, _ = play_locally(CASE, "agent_1", episode["task"]["data"]["problem"], texts)
        assert reward(trace) == expected
        assert trace["info"]["episode_record"]["turns"]
