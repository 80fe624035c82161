"""A served seat behind a token: the factory sends it on the OpenEnv socket and for records."""

from __future__ import annotations

import pytest

from llm_envs.bridges.trl import EPISODE_OVER, RemoteSeatEnvironmentFactory
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults
from llm_envs.serve.guard import TOKEN_VARIABLE
from tests.bridges.test_trl_environment_factory import DEBATE

TOKEN = "a/token:with%odd chars"


@pytest.fixture(scope="module")
def server():
    defaults = Defaults("debate", DEBATE["env_kwargs"], DEBATE["task"], DEBATE["task_kwargs"])
    with serving(ServeSettings(defaults=defaults, token=TOKEN)) as url:
        yield url


def test_a_factory_without_the_token_is_refused(server, monkeypatch):
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    with pytest.raises(ConnectionError, match="HTTP 401"):
        RemoteSeatEnvironmentFactory(server, seat="agent_0").dataset(1)


@pytest.mark.parametrize("by", ["argument", "environment"])
def test_a_factory_with_the_token_plays_and_reads_the_record(server, monkeypatch, by):
    monkeypatch.delenv(TOKEN_VARIABLE, raising=False)
    if by == "environment":
        monkeypatch.setenv(TOKEN_VARIABLE, TOKEN)
    factory = RemoteSeatEnvironmentFactory(
        server, seat="agent_0", token=TOKEN if by == "argument" else None
    )
    env = factory()
    env.reset(**factory.dataset(1)[0])
    assert env.take_turn("no tags at all").endswith(EPISODE_OVER)
    assert env.get_reward() == -1.0
    assert env.record["returns"] == {"agent_0": -1.0}  # GET /episodes/{id} with the token
    factory.close()
