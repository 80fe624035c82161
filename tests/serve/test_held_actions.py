"""The actions running episodes hold are bounded server-wide: one client cannot fill the memory.

An environment keeps its transcript until the episode ends. Attack round 4:
each running 8-seat, 5-round debate fed 0.9 MB actions held 34 MB more, linear
in the episodes (1,024 of them: about 34 GiB), bounded by nothing but the count.
"""

from __future__ import annotations

import time

import httpx

from llm_envs.debate.agents import ScriptedDebater
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults

DEBATE = Defaults("debate", {"num_agents": 3, "max_rounds": 2}, "arithmetic")
BUDGET = 30_000


def _seat(url: str, client: httpx.Client) -> tuple[str, dict[str, str], dict]:
    """A new episode's first seat: its URL, token header and first turn."""
    episode = client.post(f"{url}/episodes", json={"problem": 3}).json()
    seat = f"{url}/episodes/{episode['id']}/seats/agent_0"
    headers = {"X-Seat-Token": client.post(f"{seat}/join").json()["token"]}
    return seat, headers, client.get(f"{seat}/turn?wait=5", headers=headers).json()


def _answer(turn: dict, padding: int) -> str:
    """A well-formed first answer (the debate goes on), padded to hold ``padding`` more."""
    debater = ScriptedDebater(0, 3, agree_from_round=None)
    return debater(turn["observation"], turn["info"]) + "\n" + "x" * padding


def test_actions_past_the_budget_wait_for_episodes_to_end():
    # One client here: its share is the whole budget (test_client_shares.py takes shares).
    settings = ServeSettings(
        defaults=DEBATE, max_held_chars=BUDGET, max_held_chars_per_client=BUDGET, seat_timeout=2.0
    )
    with serving(settings) as url, httpx.Client() as client:
        first, headers, turn = _seat(url, client)
        taken = client.post(f"{first}/act", json={"text": _answer(turn, 20_000)}, headers=headers)
        assert taken.status_code == 200
        second, headers, turn = _seat(url, client)
        refused = client.post(
            f"{second}/act", json={"text": _answer(turn, 20_000)}, headers=headers
        )
        assert refused.status_code == 503 and "--max-held-chars" in refused.json()["detail"]
        # The other seats never act: abandoned after 2 s, the first episode ends and gives
        # its characters back.
        episode = first.rsplit("/seats", 1)[0]
        deadline = time.monotonic() + 60
        while client.get(episode).json()["status"] == "running":
            assert time.monotonic() < deadline, "the first episode did not end"
            time.sleep(0.2)
        third, headers, turn = _seat(url, client)
        taken = client.post(f"{third}/act", json={"text": _answer(turn, 20_000)}, headers=headers)
        assert taken.status_code == 200
