"""A step never holds a thread the server needs; past the step deadline its episode times out.

The sleepy test family's action ``"sleep"`` blocks its step, as a judged
program that sleeps holds a ``code_collab`` step. With every step thread
asleep the server still answers ``/health``, creates a (debate) episode,
joins, polls and describes within a second; the sleeping episodes end as
``timed_out`` at the deadline, recorded once, their slots free, and the
threads left asleep are bounded.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.serve.errors import Unavailable
from llm_envs.serve.families import Defaults, Families, resolve
from llm_envs.serve.hub import Hub
from llm_envs.serve.protocol import EpisodeRequest
from llm_envs.serve.store import RECORDS_FILE, EpisodeStore
from tests.serve.conftest import debate_settings, serving
from tests.serve.sleepy import NAME, WAKE, registered

WORKERS = 2
DEADLINE = 2.0
QUICK = 1.0  # what "answers at once" means on a busy 2-core machine


@pytest.fixture
def sleepy() -> Iterator[None]:
    with registered():
        yield


def step_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("llm-envs-step")]


def test_a_full_step_pool_holds_up_nothing_else(sleepy, tmp_path):
    settings = debate_settings(records=str(tmp_path), workers=WORKERS, step_deadline=DEADLINE)
    took: dict[str, float] = {}

    async def scenario(url: str) -> dict:
        async with httpx.AsyncClient(base_url=url, timeout=60) as client:

            async def timed(name: str, request) -> httpx.Response:
                began = time.monotonic()
                response = await request
                took[name] = time.monotonic() - began
                assert response.status_code in (200, 201), (name, response.text)
                return response

            sleepers = []
            for _ in range(WORKERS):
                episode = (await client.post("/episodes", json={"env": NAME})).json()["id"]
                seats = {
                    seat: (await client.post(f"/episodes/{episode}/seats/{seat}/join")).json()[
                        "token"
                    ]
                    for seat in ("agent_0", "agent_1")
                }
                sleepers.append((episode, seats))
            acts = [
                asyncio.ensure_future(
                    client.post(
                        f"/episodes/{episode}/seats/agent_0/act",
                        json={"text": "sleep"},
                        headers={"X-Seat-Token": seats["agent_0"]},
                    )
                )
                for episode, seats in sleepers
            ]
            await asyncio.sleep(0.5)  # every step thread is asleep now
            began = time.monotonic()
            health = (await timed("health", client.get("/health"))).json()
            created = (await timed("create", client.post("/episodes", json={}))).json()
            joined = await timed(
                "join", client.post(f"/episodes/{created['id']}/seats/agent_0/join")
            )
            token = {"X-Seat-Token": joined.json()["token"]}
            turn = await timed(
                "turn", client.get(f"/episodes/{created['id']}/seats/agent_0/turn", headers=token)
            )
            running = await timed("describe", client.get(f"/episodes/{sleepers[0][0]}"))
            asleep = not any(act.done() for act in acts)
            acted = await asyncio.gather(*acts)
            waited = time.monotonic() - began
            ends = [
                (
                    await client.get(
                        f"/episodes/{episode}/seats/agent_1/turn",
                        headers={"X-Seat-Token": seats["agent_1"]},
                    )
                ).json()
                for episode, seats in sleepers
            ]
            records = [(await client.get(f"/episodes/{e}")).json() for e, _ in sleepers]
            after = (await client.get("/health")).json()
            again = await client.post("/episodes", json={"env": NAME})
            return {
                "health": health,
                "turn": turn.json(),
                "running": running.json(),
                "asleep": asleep,
                "acted": acted,
                "waited": waited,
                "ends": ends,
                "records": records,
                "after": after,
                "again": again.status_code,
                "ids": [e for e, _ in sleepers],
            }

    with serving(settings) as url:
        seen = asyncio.run(scenario(url))
        stuck = step_threads()
        WAKE.set()  # the sleepers finish now, late: they must not record again
        deadline = time.monotonic() + 10
        while len(step_threads()) > WORKERS and time.monotonic() < deadline:
            time.sleep(0.05)
        lines = [json.loads(line) for line in (tmp_path / RECORDS_FILE).read_bytes().splitlines()]

    assert max(took.values()) < QUICK, took
    assert seen["asleep"], "the sleeping steps ended before the checks: they prove nothing"
    assert seen["health"]["running"] == WORKERS + 1 - 1  # the new debate is not yet counted
    assert seen["turn"]["type"] == "turn" and seen["running"]["status"] == "running"
    assert [r.status_code for r in seen["acted"]] == [200] * WORKERS  # the action was taken
    assert DEADLINE - 1.0 < seen["waited"] < DEADLINE + 3.0
    for end in seen["ends"]:
        assert end["type"] == "end" and end["status"] == "timed_out" and end["truncated"]
        assert f"ran past the {DEADLINE:g} s step deadline" in end["detail"]
    for entry in seen["records"]:
        assert entry["status"] == "timed_out"
        assert entry["returns"] == {"agent_0": 0.0, "agent_1": 0.0}  # the late step paid nothing
        assert "the environment's step after agent_0's action ran past" in entry["error"]
    assert seen["after"]["running"] == 1  # the debate; the sleepers' slots are free
    assert seen["again"] == 201
    assert len(stuck) == 2 * WORKERS  # the asleep ones, and as many that took their place
    assert sorted(line["id"] for line in lines if line["id"] in seen["ids"]) == sorted(seen["ids"])


def test_stuck_threads_are_bounded_and_new_episodes_refused_past_the_bound(sleepy):
    async def scenario() -> None:
        hub = Hub(Families(), EpisodeStore(), workers=1, max_stuck=1, step_deadline=0.3)
        spec = resolve(EpisodeRequest(env=NAME, env_kwargs={}), Defaults())
        first, second, third = [await hub.create(spec) for _ in range(3)]
        tokens = {e.id: await hub.join(e.id, "agent_0") for e in (first, second, third)}
        await hub.act(first.id, "agent_0", tokens[first.id], "sleep")
        assert first.outcome is not None and first.outcome.status == "timed_out"
        assert hub.stuck == 1 and len(step_threads()) == 2  # one asleep, one in its place
        with pytest.raises(
            Unavailable, match=r"while 1 threads still run steps that passed the 0\.3 s"
        ):
            await hub.create(spec)
        # The replacement falls asleep too: past max_stuck, none takes its place, and a
        # quick step finds no thread: its episode times out rather than wait for ever.
        await hub.act(second.id, "agent_0", tokens[second.id], "sleep")
        await hub.act(third.id, "agent_0", tokens[third.id], "quick")
        assert third.outcome is not None and third.outcome.status == "timed_out"
        assert len(step_threads()) == 2  # workers + max_stuck, whatever the steps do
        WAKE.set()
        for _ in range(200):
            if hub.stuck == 0:
                break
            await asyncio.sleep(0.05)
        assert hub.stuck == 0 and first.driver.env.closed.is_set()  # the late step closed it
        fourth = await hub.create(spec)  # admitted again
        token = await hub.join(fourth.id, "agent_0")
        await hub.act(fourth.id, "agent_0", token, "quick")
        assert fourth.seats["agent_1"].message["type"] == "turn"
        assert [hub.store.get(e.id)["status"] for e in (first, second, third)] == ["timed_out"] * 3
        await hub.close()
        assert hub.store.get(fourth.id)["status"] == "interrupted"

    asyncio.run(scenario())


def test_an_openenv_step_past_the_deadline_times_its_episode_out(sleepy, tmp_path):
    settings = debate_settings(records=str(tmp_path), step_deadline=DEADLINE)
    with (
        serving(settings) as url,
        GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=30).sync() as env,
    ):
        episode = env.reset(env=NAME, seat="agent_0").observation["episode_id"]
        began = time.monotonic()
        result = env.step({"text": "sleep"})
        waited = time.monotonic() - began
        health = httpx.get(f"{url}/health", timeout=QUICK)  # answered while the step sleeps
        with pytest.raises(RuntimeError, match=rf"episode {episode} is over \(timed_out\)"):
            env.step({"text": "again"})
        WAKE.set()
        again = env.reset(env=NAME, seat="agent_0")
        finished = env.step({"text": "quick"})
        entry = httpx.get(f"{url}/episodes/{episode}").json()
    assert DEADLINE - 1.0 < waited < DEADLINE + 3.0 and health.status_code == 200
    assert result.done and result.observation["truncated"] and result.reward == 0.0
    assert result.observation["info"]["status"] == "timed_out"
    assert f"ran past the {DEADLINE:g} s step deadline" in result.observation["info"]["detail"]
    assert entry["status"] == "timed_out" and entry["returns"] == {"agent_0": 0.0}
    assert finished.done and again.observation["episode_id"] != episode
