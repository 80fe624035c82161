"""An action's characters count in the share of the client that sent it (attack round 9, F3).

They counted in the episode creator's share: an opponent joined to a seat of
an honest client's episode acted 990,000 characters there, the honest client's
next action in its own other episode was refused 503 (its share was full), and
the opponent's own share was untouched (it held twice one client's share).
"""

from __future__ import annotations

from functools import partial

import httpx
import pytest

import llm_envs.serve.app as app_module
from llm_envs.debate.agents import ScriptedDebater
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.families import Defaults
from llm_envs.serve.store import EpisodeStore

DEBATE = Defaults("debate", {"num_agents": 2, "max_rounds": 2}, "arithmetic")
SHARE = 12_000


def client_at(source: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=30)


class Seat:
    def __init__(self, url: str, episode: str, name: str, client: httpx.Client) -> None:
        self.url, self.client = f"{url}/episodes/{episode}/seats/{name}", client
        self.headers = {"X-Seat-Token": client.post(f"{self.url}/join").json()["token"]}

    def act(self, padding: int) -> httpx.Response:
        turn = self.client.get(f"{self.url}/turn?wait=10", headers=self.headers).json()
        assert turn["type"] == "turn", turn
        text = ScriptedDebater(0, 2, agree_from_round=None)(turn["observation"], turn["info"])
        return self.client.post(
            f"{self.url}/act", json={"text": text + "\n" + "x" * padding}, headers=self.headers
        )


def _episode(url: str, client: httpx.Client) -> str:
    created = client.post(f"{url}/episodes", json={"problem": 3})
    assert created.status_code == 201, created.text
    return created.json()["id"]


@pytest.mark.filterwarnings("ignore:a debate of 2 agents")
def test_the_seat_that_acts_pays_for_its_action_not_the_creator():
    settings = ServeSettings(
        defaults=DEBATE, max_held_chars=4 * SHARE, max_held_chars_per_client=SHARE
    )
    with (
        serving(settings) as url,
        client_at("127.0.0.1") as honest,
        client_at("127.0.0.2") as opponent,
    ):
        shared = _episode(url, honest)
        mine, theirs = Seat(url, shared, "agent_0", honest), Seat(url, shared, "agent_1", opponent)
        assert mine.act(0).status_code == 200
        assert theirs.act(SHARE - 1_000).status_code == 200  # in the honest client's episode

        own = _episode(url, honest)  # the honest client's share is its own
        assert Seat(url, own, "agent_0", honest).act(SHARE - 2_000).status_code == 200

        solo = _episode(url, opponent)  # the opponent's is spent
        solo_seat = Seat(url, solo, "agent_0", opponent)
        refused = solo_seat.act(2_000)
        assert refused.status_code == 503
        assert "client 127.0.0.2's actions in running episodes hold" in refused.json()["detail"]

        # The shared episode ends (round 2): its characters go back to whoever sent them.
        assert mine.act(0).status_code == 200
        assert theirs.act(0).status_code == 200
        assert honest.get(f"{url}/episodes/{shared}").json()["status"] == "finished"
        assert solo_seat.act(SHARE - 1_000).status_code == 200


@pytest.mark.filterwarnings("ignore:a debate of 2 agents")
def test_a_record_counts_against_the_client_that_sent_most_of_it(monkeypatch):
    """An opponent's long actions count against the opponent's share of the records.

    Attack round 10, finding 2: records were the creator's, so an opponent's long
    actions in an honest client's episodes filled its share of the in-memory records
    and pushed out the honest client's own record (13 of 14 evicted).
    """
    monkeypatch.setattr(app_module, "EpisodeStore", partial(EpisodeStore, memory_bytes=80_000))
    settings = ServeSettings(defaults=Defaults("debate", {"num_agents": 2, "max_rounds": 1}))
    with (
        serving(settings) as url,
        client_at("127.0.0.1") as honest,
        client_at("127.0.0.2") as opponent,
    ):
        own = _episode(url, honest)
        Seat(url, own, "agent_0", honest).act(0)
        Seat(url, own, "agent_1", honest).act(0)
        assert honest.get(f"{url}/episodes/{own}").json()["status"] == "finished"
        shared = []
        for _ in range(4):  # 15,000 characters each, in episodes the honest client created
            episode = _episode(url, honest)
            Seat(url, episode, "agent_0", honest).act(0)
            Seat(url, episode, "agent_1", opponent).act(15_000)
            shared.append(episode)
        # Past the store's 80,000, the opponent (past its quarter) lost its oldest records;
        # the honest client's own record stays.
        kept = [honest.get(f"{url}/episodes/{e}").status_code for e in [own, *shared]]
        assert kept[0] == 200 and kept[-1] == 200 and 404 in kept, kept
