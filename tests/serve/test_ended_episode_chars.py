"""Ended episodes kept for late clients are bounded by what their actions held.

A seat's last message echoes its last action (a debate's ``info`` holds the
parsed evaluation), so the 1,024 ended episodes the hub keeps held about 2 MB
each when played with 1 MiB actions: 2.7 GB of server memory after four
minutes of one client's episodes (attack round 9's records.py, rerun).
"""

from __future__ import annotations

import asyncio

import pytest

from llm_envs.serve.errors import Conflict
from llm_envs.serve.families import EpisodeSpec, Families
from llm_envs.serve.hub import Hub
from llm_envs.serve.store import EpisodeStore
from tests.serve.conftest import ARITHMETIC, DEBATE

SPEC = EpisodeSpec("debate", DEBATE, "arithmetic", ARITHMETIC, problem=0, seed=0)


def test_the_oldest_ended_episodes_go_once_their_actions_pass_the_budget():
    async def play() -> tuple[str, str]:
        hub = Hub(Families(), EpisodeStore(), seat_timeout=0.3, keep_finished_chars=2_500)
        seats = []
        for _ in range(3):  # 1,000 characters each; the seats left are abandoned
            episode = await hub.create(SPEC)
            token = await hub.join(episode.id, "agent_0")
            await hub.act(episode.id, "agent_0", token, "x" * 1_000)
            seats.append((episode.id, "agent_0", token))
        for _ in range(200):
            if hub.running == 0:
                break
            await asyncio.sleep(0.1)
        newest = await hub.poll(*seats[-1], wait=0)
        with pytest.raises(Conflict, match="is over"):
            await hub.poll(*seats[0], wait=0)  # forgotten: its record answers
        oldest = await hub.describe(seats[0][0])
        await hub.close()
        return newest["type"], oldest["status"]

    assert asyncio.run(play()) == ("end", "finished")
