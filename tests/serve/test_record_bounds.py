"""Records are bounded per client in memory and as a whole on disk (attack round 9, F5).

In memory, 65 big episodes of one client pushed another client's record out
(its ``GET`` 404). On disk the file grew until the disk was full, and then
every client's episode ended 500 with its record lost; start-up read it all.
"""

from __future__ import annotations

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.debate.agents import ScriptedDebater
from llm_envs.sandbox.fair import as_client
from llm_envs.serve.app import ServeSettings, serving
from llm_envs.serve.errors import Unavailable
from llm_envs.serve.families import Defaults
from llm_envs.serve.store import EpisodeStore

DEBATE = Defaults("debate", {"num_agents": 3, "max_rounds": 1}, "arithmetic")


def _record(episode: str, size: int) -> dict:
    return {"id": episode, "text": "x" * size}


def test_one_client_past_its_share_drops_its_own_records_not_another_clients():
    store = EpisodeStore(memory_bytes=40_000)  # a quarter each: 10,000
    with as_client("127.0.0.2"):
        store.append(_record("honest", 100))
    with as_client("127.0.0.3"):
        for n in range(65):
            store.append(_record(f"big{n}", 3_000))
    assert store.get("honest") is not None
    assert store.get("big64") is not None and store.get("big0") is None
    with as_client("127.0.0.3"):
        store.append(_record("huge", 50_000))  # past the whole budget: the latest is kept
    assert store.get("honest") is not None and store.get("huge") is not None
    with as_client("127.0.0.2"):  # the next record drops the over-share one first
        store.append(_record("honest2", 100))
    assert store.get("huge") is None
    assert store.get("honest") is not None and store.get("honest2") is not None


def test_clients_within_their_shares_drop_the_oldest_record_first():
    store = EpisodeStore(memory_bytes=4_000)
    for n in range(6):
        with as_client(f"10.0.0.{n}"):
            store.append(_record(f"e{n}", 700))
    assert [store.get(f"e{n}") is not None for n in range(6)] == [False] + [True] * 5


def test_a_full_records_file_refuses_new_episodes_and_survives_a_restart(tmp_path):
    store = EpisodeStore(tmp_path, max_bytes=200)
    store.check_room("10.0.0.1")
    store.append(_record("e1", 300))
    with pytest.raises(Unavailable, match=r"holds 3\d\d bytes, past --max-records-bytes 200"):
        store.check_room("10.0.0.2")
    with pytest.raises(Unavailable, match="--max-records-bytes"):
        EpisodeStore(tmp_path, max_bytes=200).check_room("10.0.0.2")  # read back full
    EpisodeStore(tmp_path, max_bytes=1_000).check_room("10.0.0.2")  # the operator raised it


def test_one_client_fills_a_quarter_of_the_records_file_and_the_others_go_on(tmp_path):
    """One client's records past a quarter of the file refuse that client only.

    Attack round 10, finding 4: one client alone filled the file in 0.2 s, and then
    every client's new episode got 503 until an operator acted.
    """
    store = EpisodeStore(tmp_path, max_bytes=4_000)  # a quarter each: 1,000
    with as_client("10.0.0.1"):
        store.append(_record("e1", 1_000))
    with pytest.raises(Unavailable, match=r"client 10.0.0.1's records .* hold 10\d\d bytes"):
        store.check_room("10.0.0.1")
    store.check_room("10.0.0.2")
    with as_client("10.0.0.2"):
        store.append(_record("e2", 900))
    store.check_room("10.0.0.2")  # 900 and a bit: under its share
    EpisodeStore(tmp_path, max_bytes=4_000).check_room("10.0.0.1")  # a restart counts anew


def _play(url: str, client: httpx.Client, episode: str) -> httpx.Response:
    """Play every seat of ``episode`` (one round); the last seat's action."""
    base = f"{url}/episodes/{episode}/seats"
    tokens = {s: client.post(f"{base}/{s}/join").json()["token"] for s in ("agent_0", "agent_1")}
    tokens["agent_2"] = client.post(f"{base}/agent_2/join").json()["token"]
    for seat, token in tokens.items():
        headers = {"X-Seat-Token": token}
        turn = client.get(f"{base}/{seat}/turn?wait=10", headers=headers).json()
        text = ScriptedDebater(int(seat[-1]), 3)(turn["observation"], turn["info"])
        acted = client.post(f"{base}/{seat}/act", json={"text": text}, headers=headers)
    return acted


def test_the_server_refuses_new_episodes_once_the_records_file_is_full(tmp_path):
    settings = ServeSettings(defaults=DEBATE, records=str(tmp_path), max_records_bytes=1_000)
    with serving(settings) as url, httpx.Client(timeout=30) as client:
        first = client.post(f"{url}/episodes", json={"problem": 3}).json()["id"]
        running = client.post(f"{url}/episodes", json={"problem": 4}).json()["id"]
        assert _play(url, client, first).status_code == 200  # its record fills the file
        refused = client.post(f"{url}/episodes", json={"problem": 3})
        assert refused.status_code == 503
        assert "--max-records-bytes 1000" in refused.json()["detail"]
        session = GenericEnvClient(base_url=f"{url}/openenv", message_timeout_s=60).sync()
        with session, pytest.raises(RuntimeError, match="--max-records-bytes 1000"):
            session.reset(problem=3, seat="agent_0")  # nor an OpenEnv session's
        assert _play(url, client, running).status_code == 200  # still written, never lost
        assert client.get(f"{url}/episodes/{running}").json()["status"] == "finished"
    assert running in EpisodeStore(tmp_path)


def _client_at(source: str) -> httpx.Client:
    return httpx.Client(transport=httpx.HTTPTransport(local_address=source), timeout=30)


def _act(
    client: httpx.Client, seat_url: str, token: str, padding: int, pad: str = "x"
) -> httpx.Response:
    headers = {"X-Seat-Token": token}
    turn = client.get(f"{seat_url}/turn?wait=10", headers=headers).json()
    text = ScriptedDebater(0, 2, agree_from_round=None)(turn["observation"], turn["info"])
    return client.post(f"{seat_url}/act", json={"text": text + pad * padding}, headers=headers)


@pytest.mark.filterwarnings("ignore:a debate of 2 agents")
def test_a_client_past_its_share_joins_no_more_of_others_episodes(tmp_path):
    """A client past its share of the records file joins no more of others' episodes.

    Attack round 11: an opponent joining seats of an honest client's episodes, each
    record mostly its text, paid for them but was never refused (it created nothing),
    and filled the file until every client's new episode got 503.
    """
    two = Defaults("debate", {"num_agents": 2, "max_rounds": 1}, "arithmetic")
    settings = ServeSettings(defaults=two, records=str(tmp_path), max_records_bytes=400_000)
    joins = []
    with serving(settings) as url, _client_at("127.0.0.1") as honest:
        with _client_at("127.0.0.2") as opponent:
            for _ in range(8):
                created = honest.post(f"{url}/episodes", json={"problem": 3})
                assert created.status_code == 201, created.text
                base = f"{url}/episodes/{created.json()['id']}/seats"
                mine = honest.post(f"{base}/agent_0/join").json()["token"]
                theirs = opponent.post(f"{base}/agent_1/join")
                joins.append(theirs.status_code)
                if theirs.status_code != 200:
                    assert "its share (a quarter of --max-records-bytes" in theirs.text
                    break
                assert _act(honest, f"{base}/agent_0", mine, 0).status_code == 200
                token = theirs.json()["token"]
                assert _act(opponent, f"{base}/agent_1", token, 60_000).status_code == 200
        assert joins[-1] == 503 and len(joins) <= 4, joins  # 100,000 bytes: 2 of its records
        # The honest client's own episodes go on: the file is far from full.
        assert honest.post(f"{url}/episodes", json={"problem": 4}).status_code == 201
    assert (tmp_path / "episodes.jsonl").stat().st_size < 300_000


def test_a_record_in_the_file_counts_against_each_client_by_what_it_sent(tmp_path):
    store = EpisodeStore(tmp_path, max_bytes=4_000)  # a quarter each: 1,000
    with as_client("10.0.0.1"):  # the creator, on a tie
        store.append(_record("e1", 1_500), shares={"10.0.0.1": 50, "10.0.0.2": 50})
    store.check_room("10.0.0.1")  # about 760 bytes each: both under 1,000
    store.check_room("10.0.0.2")
    with as_client("10.0.0.1"):
        store.append(_record("e2", 600), shares={"10.0.0.2": 10})
    store.check_room("10.0.0.1")
    with pytest.raises(Unavailable, match=r"client 10\.0\.0\.2's records"):
        store.check_room("10.0.0.2")


@pytest.mark.filterwarnings("ignore:a debate of 2 agents")
def test_characters_that_take_six_bytes_in_the_record_are_paid_by_their_sender(tmp_path):
    r"""A record is split by the bytes each client's text takes in it, not its characters.

    Attack round 12: split by characters, an opponent's control characters (6 bytes
    each as JSON, "\u0001") filled the honest client's share three times as fast as
    plain text did.
    """
    two = Defaults("debate", {"num_agents": 2, "max_rounds": 1}, "arithmetic")
    settings = ServeSettings(defaults=two, records=str(tmp_path), max_records_bytes=1_200_000)
    refused = None
    with (
        serving(settings) as url,
        _client_at("127.0.0.1") as honest,
        _client_at("127.0.0.2") as opponent,
    ):
        for _ in range(8):
            created = honest.post(f"{url}/episodes", json={"problem": 3})
            if created.status_code != 201:
                refused = "honest"
                break
            base = f"{url}/episodes/{created.json()['id']}/seats"
            mine = honest.post(f"{base}/agent_0/join").json()["token"]
            theirs = opponent.post(f"{base}/agent_1/join")
            if theirs.status_code != 200:
                refused = "opponent"
                break
            assert _act(honest, f"{base}/agent_0", mine, 20_000, "e").status_code == 200
            token = theirs.json()["token"]
            assert _act(opponent, f"{base}/agent_1", token, 20_000, "\x01").status_code == 200
    assert refused == "opponent"
