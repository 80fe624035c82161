"""A step that ends its episode just before its deadline still frees it (attack round 10).

The step thread that plays an episode's last move claims the end and writes
the record; a record slower than the rest of the deadline made the loop's
timeout find the episode ended, and leave it to a step whose result nobody
read: its place, its creator's share and its actors' characters were held for
ever, and its seats never told.
"""

from __future__ import annotations

import asyncio
import time

from llm_envs.debate.agents import ScriptedDebater
from llm_envs.serve.families import Defaults, Families, resolve
from llm_envs.serve.hub import Hub
from llm_envs.serve.protocol import EpisodeRequest
from llm_envs.serve.store import EpisodeStore

DEADLINE = 0.3


class SlowStore(EpisodeStore):
    """Records that take longer to write than a step may run."""

    def append(self, entry: dict, shares: dict | None = None) -> None:
        time.sleep(2 * DEADLINE)
        super().append(entry, shares)


def test_an_episode_whose_record_outlasts_the_deadline_is_told_and_freed():
    async def scenario() -> None:
        hub = Hub(
            Families(),
            SlowStore(),
            step_deadline=DEADLINE,
            max_episodes=2,
            max_episodes_per_client=2,
        )
        spec = resolve(
            EpisodeRequest(env="debate", env_kwargs={"num_agents": 2, "max_rounds": 1}),
            Defaults(task="arithmetic"),
        )
        episode = await hub.create(spec)
        seats = ("agent_0", "agent_1")
        tokens = {seat: await hub.join(episode.id, seat) for seat in seats}
        for index, seat in enumerate(seats):
            message = episode.seats[seat].message
            assert message is not None and message["type"] == "turn"
            text = ScriptedDebater(index, 2)(message["observation"], message["info"])
            await hub.act(episode.id, seat, tokens[seat], text)
        for _ in range(100):  # the record is on file once the slow write returns
            if hub.running == 0:
                break
            await asyncio.sleep(0.05)
        assert hub.running == 0  # the place is free, and the creator's share
        assert hub.store.get(episode.id)["status"] == "finished"
        for seat in seats:
            assert episode.seats[seat].message["type"] == "end"
        again = [await hub.create(spec) for _ in range(2)]  # both places, none held
        assert len(again) == 2
        await hub.close()

    asyncio.run(scenario())
