"""An ended episode's memory: the server keeps its record, not its environment.

An ended episode is kept in memory so late clients still get their end (the
latest 1,024 of them, docs/serve.md), but without its environment: a debate
played with 1 MiB actions (the body cap) holds 13 MiB (3 agents, 2 rounds) to
87 MiB (8 agents, 5 rounds) while it runs, and one client playing episodes one
after another must not grow the server by that much per ended episode.
"""

from __future__ import annotations

import asyncio
import json
import tempfile

import httpx
from websockets.asyncio.client import connect

from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

BIG = "x" * ((1 << 20) - 1024)
ACTION = (
    f"<solution>1</solution><evaluation>{BIG}</evaluation><comparison>N/A</comparison>"
    "<consensus>NO</consensus><consensus_reason>r</consensus_reason>"
)


def rss_mib() -> float:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


async def _seat(url: str, episode: str, seat: str) -> str:
    socket = f"{url.replace('http', 'ws')}/episodes/{episode}/seats/{seat}/ws"
    async with connect(socket, max_size=None) as ws:
        async for raw in ws:
            message = json.loads(raw)
            if message["type"] == "turn":
                await ws.send(json.dumps({"type": "act", "text": ACTION}))
            elif message["type"] in ("end", "error"):
                return message.get("status", message["type"])
    return "closed"


async def _episode(url: str) -> set[str]:
    async with httpx.AsyncClient() as client:
        created = (await client.post(f"{url}/episodes", json={})).json()
    ends = await asyncio.gather(*(_seat(url, created["id"], s) for s in created["seats"]))
    return set(ends)


def _play(url: str, episodes: int) -> None:
    for _ in range(episodes):
        assert asyncio.run(_episode(url)) == {"finished"}


def test_ended_episodes_do_not_keep_their_environments_in_memory():
    with tempfile.TemporaryDirectory() as records:
        settings = ServeSettings(
            defaults=Defaults("debate", {"num_agents": 3, "max_rounds": 2}, "arithmetic"),
            records=records,
        )
        with serving(settings) as url:
            _play(url, 2)  # warm up: imports, caches, the allocator's arenas
            before = rss_mib()
            _play(url, 10)  # 60 MiB of actions; unfixed, about 130 MiB stayed
            grown = rss_mib() - before
            assert grown < 50, f"the server grew {grown:.0f} MiB over 10 ended episodes"
            # what late clients need is still there
            health = httpx.get(f"{url}/health").json()
            assert health["running"] == 0 and health["recorded"] == 12


def test_records_kept_in_memory_are_bounded():
    """Without --records every record stayed in memory, unbounded.

    The same client grew the server by about 15 MiB per debate of 1 MiB actions.
    """
    from llm_envs.serve.store import EpisodeStore

    store = EpisodeStore(memory_bytes=8 << 20)
    for number in range(40):
        store.append({"id": f"e{number}", "record": {"text": BIG}})
    kept = [number for number in range(40) if f"e{number}" in store]
    assert kept == list(range(40 - len(kept), 40)) and 1 <= len(kept) <= 8  # the latest
    assert store.get("e39") == {"id": "e39", "record": {"text": BIG}}
    assert store.get("e0") is None and len(store) == len(kept)
    store.append({"id": "huge", "record": {"text": BIG * 20}})  # over the budget alone: kept
    assert store.get("huge") is not None and len(store) == 1
    # text of any code point still reads back as it was
    store.append({"id": "s", "record": {"text": "\ud800\x00"}})
    assert store.get("s") == {"id": "s", "record": {"text": "\ud800\x00"}}
