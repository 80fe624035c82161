"""One client's share of the server's episodes and held characters (attack round 7, F2).

With server-wide budgets alone, one client creating ``--max-episodes`` episodes,
or acting until ``--max-held-chars`` was full, had every other client refused
(503) for as long as it kept them. Each client now holds at most its share, a
quarter by default (``--max-episodes-per-client``, ``--max-held-chars-per-client``).
Clients are told apart by address: 127.0.0.1 and 127.0.0.2 are two.
"""

from __future__ import annotations

import httpx
import pytest

from llm_envs.debate.agents import ScriptedDebater
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.errors import Unavailable
from llm_envs.serve.families import Defaults
from llm_envs.serve.hub import HeldChars

DEBATE = Defaults("debate", {"num_agents": 3, "max_rounds": 2}, "arithmetic")


def client_at(source: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=30)


def test_held_characters_are_bounded_per_client_and_for_the_server():
    held = HeldChars(100, per_client=40)
    held.take(30, "a")
    with pytest.raises(
        Unavailable, match=r"client a's .* hold 30 .* \(--max-held-chars-per-client\)"
    ):
        held.take(11, "a")
    held.take(40, "b")
    held.take(10, "a")  # exactly its share
    with pytest.raises(Unavailable, match=r"hold 80 .* past the server's 100 \(--max-held-chars\)"):
        held.take(21, "c")
    held.take(20, "c")
    held.give(40, "a")  # a's episodes ended: its share and the server's room come back
    held.take(40, "a")
    assert held.held == 100


@pytest.mark.parametrize(("limit", "share"), [(100, 0), (100, 101)])
def test_a_share_outside_the_budget_is_refused(limit, share):
    with pytest.raises(ValueError, match="max_held_chars_per_client must be in"):
        HeldChars(limit, per_client=share)


def test_a_quarter_of_the_server_by_default():
    assert HeldChars(1000).per_client == 250 and HeldChars(3).per_client == 1


def test_one_client_holding_its_episodes_leaves_the_others_room():
    settings = ServeSettings(defaults=DEBATE, max_episodes=8)  # a quarter: 2 per client
    with (
        serving(settings) as url,
        client_at("127.0.0.1") as greedy,
        client_at("127.0.0.2") as other,
    ):
        for _ in range(2):
            assert greedy.post(f"{url}/episodes", json={"problem": 3}).status_code == 201
        refused = greedy.post(f"{url}/episodes", json={"problem": 3})
        assert refused.status_code == 503
        assert "--max-episodes-per-client 2" in refused.json()["detail"]
        assert other.post(f"{url}/episodes", json={"problem": 3}).status_code == 201


def _first_seat(url: str, client: httpx.Client) -> tuple[str, dict[str, str], dict]:
    episode = client.post(f"{url}/episodes", json={"problem": 3}).json()
    seat = f"{url}/episodes/{episode['id']}/seats/agent_0"
    headers = {"X-Seat-Token": client.post(f"{seat}/join").json()["token"]}
    return seat, headers, client.get(f"{seat}/turn?wait=5", headers=headers).json()


def test_one_client_filling_its_characters_leaves_the_others_room():
    settings = ServeSettings(
        defaults=DEBATE, max_held_chars=40_000, max_held_chars_per_client=12_000
    )
    with (
        serving(settings) as url,
        client_at("127.0.0.1") as greedy,
        client_at("127.0.0.2") as other,
    ):
        debater = ScriptedDebater(0, 3, agree_from_round=None)
        seat, headers, turn = _first_seat(url, greedy)
        big = debater(turn["observation"], turn["info"]) + "\n" + "x" * 12_000
        refused = greedy.post(f"{seat}/act", json={"text": big}, headers=headers)
        assert refused.status_code == 503
        assert "--max-held-chars-per-client" in refused.json()["detail"]
        seat, headers, turn = _first_seat(url, other)
        fits = debater(turn["observation"], turn["info"]) + "\n" + "x" * 10_000
        assert other.post(f"{seat}/act", json={"text": fits}, headers=headers).status_code == 200


def test_one_client_holds_at_most_its_share_of_the_openenv_sessions():
    import asyncio

    import websockets

    settings = ServeSettings(defaults=DEBATE, max_sessions=8)  # a quarter: 2 sockets per client

    async def scenario(url: str) -> tuple[int, int]:
        ws_url = url.replace("http://", "ws://") + "/openenv/ws"
        held = [await websockets.connect(ws_url) for _ in range(2)]
        try:
            with pytest.raises(websockets.exceptions.InvalidStatus) as refused:
                await websockets.connect(ws_url)
            other = await websockets.connect(ws_url, local_addr=("127.0.0.2", 0))  # another
            await other.close()
            return refused.value.response.status_code, len(held)
        finally:
            for socket in held:
                await socket.close()

    with serving(settings) as url:
        assert asyncio.run(scenario(url)) == (503, 2)
