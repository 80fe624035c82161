"""A client sets only what its family declares, within bounds; the server's own settings are free.

Every way in takes the same check: ``POST /episodes``, ``POST /rendezvous``
and the OpenEnv view's ``reset``.
"""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.client_settings import ClientSettings
from llm_envs.family import FamilyBase
from llm_envs.registration import register, unregister
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults
from llm_envs.serve.rendezvous import InProcessCoordinator
from tests.serve.conftest import create

REFUSED = [
    (
        {"env_kwargs": {"num_agents": 100000}},
        "env_kwargs num_agents=100000 is out of bounds for a client of env 'debate': it takes an "
        "int in [2, 8]; send such a value, or start the server with --env debate --env-kwargs",
    ),
    (
        {"env": "code_collab", "env_kwargs": {"timeout": 3600}},
        "env_kwargs 'timeout' is not a setting a client may pass to env 'code_collab' (a client "
        "may set num_agents (an int in [1, 2]), num_turns (an int in [1, 4]),",
    ),
    (
        {"env": "expert_iteration", "env_kwargs": {"code_timeout": 3600}},
        "env_kwargs 'code_timeout' is not a setting a client may pass to env 'expert_iteration'",
    ),
    (
        {"env": "textarena", "env_kwargs": {"game": "Debate-v0"}},
        """env_kwargs game='Debate-v0' is out of bounds for a client of env 'textarena': it """
        'takes one of "TicTacToe-v0", "KuhnPoker-v0",',
    ),
    (
        {"env": "textarena", "env_kwargs": {"game_kwargs": {"max_turns": 10**9}}},
        "env_kwargs 'game_kwargs' is not a setting a client may pass to env 'textarena'",
    ),
    (
        {"task_kwargs": {"num_problems": 10**12}},
        "task_kwargs num_problems=1000000000000 is out of bounds for a client of env 'debate': "
        "it takes an int in [1, 1000000]",
    ),
    (
        {"env_kwargs": {"shaping": {"correct": 1e308}}},
        "env_kwargs shaping={'correct': 1e+308} is out of bounds",
    ),
]


@pytest.mark.parametrize(("body", "message"), REFUSED)
def test_a_setting_past_its_bound_or_undeclared_is_422_at_once(debate_server, body, message):
    start = time.perf_counter()
    response = httpx.post(f"{debate_server}/episodes", json=body)
    assert time.perf_counter() - start < 2.0  # refused before anything is built
    assert response.status_code == 422
    assert response.json()["detail"].startswith(message)


def test_a_rendezvous_is_bounded_as_a_create(debate_server):
    body = {"key": "k", "seat": "agent_0", "episode": REFUSED[0][0]}
    response = httpx.post(f"{debate_server}/rendezvous", json=body)
    assert response.status_code == 422
    assert response.json()["detail"].startswith(REFUSED[0][1])


def test_an_openenv_reset_is_bounded_as_a_create(debate_server):
    with (
        GenericEnvClient(base_url=f"{debate_server}/openenv").sync() as env,
        pytest.raises(RuntimeError, match="Server error: ") as refused,
    ):
        env.reset(env_kwargs={"num_agents": 100000})
    assert REFUSED[0][1] in str(refused.value)


def test_a_request_lays_its_settings_over_the_servers(debate_server):
    with httpx.Client(base_url=debate_server) as client:
        changed = create(client, env_kwargs={"max_rounds": 1}, task_kwargs={"max_digits": 1})
        kept = create(client)
    assert changed["env_kwargs"] == {"num_agents": 3, "max_rounds": 1}
    assert changed["task_kwargs"] == {"num_problems": 20, "max_digits": 1}
    assert kept["env_kwargs"] == {"num_agents": 3, "max_rounds": 2}


def test_the_servers_own_settings_are_unbounded_and_stay_under_a_clients():
    # The sandbox's timeout is the operator's: set by --env-kwargs, kept under a client's own.
    settings = ServeSettings(defaults=Defaults("code_collab", {"timeout": 30.0}))
    with serving(settings) as url, httpx.Client(base_url=url) as client:
        plain = create(client)
        turned = create(client, env_kwargs={"num_turns": 1})
        refused = client.post("/episodes", json={"env_kwargs": {"timeout": 1.0}})
    assert plain["env_kwargs"] == {"timeout": 30.0}
    assert turned["env_kwargs"] == {"timeout": 30.0, "num_turns": 1}
    assert refused.status_code == 422


def test_the_in_process_rendezvous_trusts_its_caller():
    # Not a remote client: the trainer's own process, whose settings are the operator's.
    async def meet():
        coordinator = InProcessCoordinator()
        episode = {"env": "debate", "env_kwargs": {"num_agents": 9, "max_rounds": 1}}
        try:
            session = await coordinator.meet("k", "agent_8", episode)
            return session.seat
        finally:
            await coordinator.close()

    assert asyncio.run(meet()) == "agent_8"


class Silent(FamilyBase):
    """An outside family that declares no client settings."""

    name = "silent"
    agents = ("agent_0",)


def test_an_outside_family_that_declares_nothing_takes_no_client_settings(debate_server):
    assert Silent.client_settings == ClientSettings()
    register("silent", Silent)
    try:
        response = httpx.post(
            f"{debate_server}/episodes", json={"env": "silent", "env_kwargs": {"size": 1}}
        )
    finally:
        unregister("silent")
    assert response.status_code == 422
    assert response.json()["detail"].startswith(
        "env_kwargs 'size' is not a setting a client may pass to env 'silent' (env 'silent' lets "
        "a client set no env_kwargs); leave it out, or start the server with --env silent"
    )
