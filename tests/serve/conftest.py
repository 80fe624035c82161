"""Real episode servers on 127.0.0.1 (uvicorn, a free port: ``serving``), and seat clients."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import httpx
import pytest
from websockets.asyncio.client import connect

from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

# Debates of arithmetic problems with reference answers; a short problem list keeps
# the reference players (a lookup of every problem's answer) cheap to build.
DEBATE = {"num_agents": 3, "max_rounds": 2}
ARITHMETIC = {"num_problems": 20, "max_digits": 2}


def debate_settings(env_kwargs: Mapping[str, Any] = DEBATE, **overrides: Any) -> ServeSettings:
    """A server whose default env is the 3-seat arithmetic debate."""
    defaults = Defaults("debate", dict(env_kwargs), "arithmetic", dict(ARITHMETIC))
    return ServeSettings(defaults=defaults, **overrides)


@pytest.fixture(scope="module")
def debate_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    records = tmp_path_factory.mktemp("records")
    with serving(debate_settings(records=str(records))) as url:
        yield url


def ws_url(base: str, episode: str, seat: str) -> str:
    return f"{base.replace('http://', 'ws://')}/episodes/{episode}/seats/{seat}/ws"


async def play_seat_ws(
    base: str,
    episode: str,
    seat: str,
    agent: Callable[[Any, Mapping[str, Any]], str],
    delay: float = 0.0,
) -> list[dict[str, Any]]:
    """Play one seat over its WebSocket with ``agent``; return every message the seat received.

    ``delay``: seconds the client thinks before each action.
    """
    received: list[dict[str, Any]] = []
    async with connect(ws_url(base, episode, seat)) as socket:
        async for raw in socket:
            message = json.loads(raw)
            received.append(message)
            if message["type"] == "turn":
                text = agent(message["observation"], message["info"])
                await asyncio.sleep(delay)
                await socket.send(json.dumps({"type": "act", "text": text}))
            elif message["type"] in ("end", "abandoned", "error"):
                break
    return received


def rewards_of(messages: list[dict[str, Any]]) -> list[float]:
    """The rewards a seat was told, turn by turn, the end's included."""
    return [m["reward"] for m in messages if m["type"] in ("turn", "end")]


def create(client: httpx.Client, **request: Any) -> dict[str, Any]:
    response = client.post("/episodes", json=request)
    assert response.status_code == 201, response.text
    created: dict[str, Any] = response.json()
    return created
