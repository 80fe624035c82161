"""A family from a package of its own in the verifiers bridge, by its name alone.

``.ci/verifiers.sh`` installs into verifiers' environment the package that
``llm-envs new-env guessnum`` writes (a two-seat guessing race, declared in the
``llm_envs.families`` entry-point group); nothing here registers it. Here
``load_environment("guessnum")`` builds its seat's environment; verifiers'
own ``vf-eval`` plays it against the tiny model beside the other families
(``test_verifiers_env.py``, the case ``guessnum-reference``).
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


def test_load_environment_builds_its_seat_by_name():
    env = load_environment("guessnum", seat="agent_1", env_kwargs={"max_rounds": 2}, num_problems=3)
    assert isinstance(env, SeatEnv)
    assert [t.data.name for t in env.taskset] == [f"guessnum#{p}/agent_1" for p in range(3)]
    with pytest.raises(ValueError, match="seat 'agent_7' is not an agent of --env guessnum"):
        load_environment("guessnum", seat="agent_7")
