"""The hub and the driver without the web: failures, capacity, abandoned seats."""

from __future__ import annotations

import asyncio

import pytest

from llm_envs.serve.driver import EpisodeDriver
from llm_envs.serve.errors import Conflict, Failed
from llm_envs.serve.families import EpisodeSpec, Families
from llm_envs.serve.hub import Hub
from llm_envs.serve.store import EpisodeStore
from tests.serve.conftest import ARITHMETIC, DEBATE

DEBATE_SEATS = ("agent_0", "agent_1", "agent_2")
SPEC = EpisodeSpec("debate", DEBATE, "arithmetic", ARITHMETIC, problem=0, seed=0)


class Exploding(Families):
    """Episodes whose environment raises at its first step."""

    def episode(self, spec):
        env, seed, options = super().episode(spec)

        def step(action):
            raise RuntimeError("the judge fell over")

        env.step = step
        return env, seed, options


def test_an_env_that_raises_ends_its_episode_as_failed():
    store = EpisodeStore()

    async def play():
        hub = Hub(Exploding(), store)
        episode = await hub.create(SPEC)
        tokens = {seat: await hub.join(episode.id, seat) for seat in ("agent_0", "agent_1")}
        with pytest.raises(Failed) as failed:
            await hub.act(episode.id, "agent_0", tokens["agent_0"], "my answer")
        other = await hub.poll(episode.id, "agent_1", tokens["agent_1"], wait=0)
        with pytest.raises(Conflict, match="is over"):
            await hub.act(episode.id, "agent_1", tokens["agent_1"], "too late")
        await hub.close()
        return episode.id, str(failed.value), failed.value.status, other

    episode, message, status, other = asyncio.run(play())
    detail = f"the environment raised RuntimeError: the judge fell over; episode {episode} is over"
    assert (message, status) == (detail, 500)
    assert other == {"type": "error", "status": 500, "detail": detail}
    entry = store.get(episode)
    assert entry["status"] == "failed" and entry["error"] == detail
    assert entry["record"]["turns"] == []  # the record as far as it went


def test_a_full_hub_holds_places_for_episodes_being_built():
    async def create_two():
        hub = Hub(Families(), EpisodeStore(), max_episodes=1)
        results = await asyncio.gather(hub.create(SPEC), hub.create(SPEC), return_exceptions=True)
        await hub.close()
        return results

    results = asyncio.run(create_two())
    assert sorted(type(r).__name__ for r in results) == ["Episode", "Unavailable"]


@pytest.mark.parametrize(
    ("env", "env_kwargs", "expected"),
    [
        # Masked parse errors: three empty answers a round, two rounds, nobody votes.
        ("debate", {**DEBATE, "on_parse_error": "mask"}, dict.fromkeys(DEBATE_SEATS, 0.0)),
        # No code from either seat: no definitions, nothing compiles, 3 turns of 0.
        ("code_collab", {"num_turns": 3}, {"helper": 0.0, "main": 0.0}),
    ],
)
def test_a_driver_plays_abandoned_seats_to_the_end(env, env_kwargs, expected):
    task = "arithmetic" if env == "debate" else "default"
    spec = EpisodeSpec(env, env_kwargs, task, ARITHMETIC if env == "debate" else {}, 0, 0)
    game, seed, options = Families().episode(spec)
    driver = EpisodeDriver(game)
    first = driver.start(seed, options)
    assert {u.kind for u in first.values()} == {"turn"} and set(first) == set(driver.pending)
    everyone = frozenset(driver.agents)
    updates = driver.abandon(everyone)
    assert driver.done and driver.pending == frozenset()
    assert {seat: u.kind for seat, u in updates.items()} == dict.fromkeys(driver.agents, "end")
    assert driver.returns == pytest.approx(expected)
    turns = driver.record()["turns"]
    assert turns and {t["text"] for t in turns} == {""}
    assert {t["agent"] for t in turns} == set(driver.agents)
