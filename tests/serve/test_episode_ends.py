"""Every episode that ends is recorded once and frees its slot, whatever ended it.

The environment raising, its ``record()`` raising, the store refusing the
record (a full disk, a records file turned into a folder), and two at once
(the environment raises and the store refuses its failure's record): each
ends the episode ``failed``, tells every seat why, frees its slot (the server
holds one episode at a time here, so a slot kept would refuse the next), and
the server serves on.
"""

from __future__ import annotations

import errno
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core import GenericEnvClient

from llm_envs.debate.agents import scripted_debaters
from llm_envs.serve.families import EpisodeSpec
from llm_envs.serve.store import RECORDS_FILE, EpisodeStore
from tests.serve.conftest import debate_settings, serving
from tests.serve.sleepy import NAME, registered


@pytest.fixture
def server(tmp_path: Path) -> Iterator[httpx.Client]:
    with (
        registered(),
        serving(debate_settings(records=str(tmp_path), max_episodes=1)) as url,
        httpx.Client(base_url=url, timeout=30) as client,
    ):
        yield client


def play(client: httpx.Client, *actions: tuple[str, str]) -> dict[str, Any]:
    """A sleepy episode: both seats join, ``actions`` are played; what each seat saw."""
    created = client.post("/episodes", json={"env": NAME})
    assert created.status_code == 201, created.text
    episode = created.json()["id"]
    tokens = {
        seat: client.post(f"/episodes/{episode}/seats/{seat}/join").json()["token"]
        for seat in ("agent_0", "agent_1")
    }
    acted = [
        client.post(
            f"/episodes/{episode}/seats/{seat}/act",
            json={"text": text},
            headers={"X-Seat-Token": tokens[seat]},
        )
        for seat, text in actions
    ]
    told = {
        seat: client.get(
            f"/episodes/{episode}/seats/{seat}/turn", headers={"X-Seat-Token": token}
        ).json()
        for seat, token in tokens.items()
    }
    return {
        "id": episode,
        "acted": [(r.status_code, r.json()) for r in acted],
        "told": told,
        "described": client.get(f"/episodes/{episode}").json(),
        "health": client.get("/health").json(),
    }


def serves_on(client: httpx.Client) -> None:
    """The slot is free and the server plays the next episode to its end, recorded."""
    played = play(client, ("agent_0", "hi"), ("agent_1", "there"))
    assert played["described"]["status"] == "finished", played["described"]
    assert played["health"]["running"] == 0


def failed(played: dict[str, Any], why: str) -> None:
    """The episode failed for ``why``: the act that ended it, every seat, its entry say so."""
    status, reply = played["acted"][-1]
    assert status == 500 and why in reply["detail"]
    for message in played["told"].values():
        assert message["type"] == "error" and why in message["detail"]
    assert played["described"]["status"] == "failed" and why in played["described"]["error"]
    assert played["health"]["running"] == 0


def test_the_env_raising_fails_the_episode(server):
    played = play(server, ("agent_0", "raise"))
    failed(played, "the environment raised RuntimeError: the sleepy env was told to raise")
    serves_on(server)


def test_record_raising_fails_the_episode_that_finished(server):
    played = play(server, ("agent_0", "spoil"), ("agent_1", "quick"))
    failed(played, "record() raised ValueError: the sleepy env's record was spoilt")
    assert played["described"]["record"] is None
    assert played["described"]["returns"] == {"agent_0": 1.0, "agent_1": 1.0}
    serves_on(server)


def full_disk(self: EpisodeStore, entry: dict[str, Any], shares: Any = None) -> None:
    raise OSError(errno.ENOSPC, "No space left on device")


def not_json(self: EpisodeStore, entry: dict[str, Any], shares: Any = None) -> None:
    raise ValueError("not JSON: a value the encoder refused")


@pytest.mark.parametrize("append", [full_disk, not_json])
@pytest.mark.parametrize("ending", ["finishes", "raises"])
def test_a_record_the_store_refuses_fails_the_episode_and_frees_its_slot(
    server, monkeypatch, append, ending
):
    actions = [("agent_0", "raise")] if ending == "raises" else [("agent_0", "a"), ("agent_1", "b")]
    with monkeypatch.context() as patched:
        patched.setattr(EpisodeStore, "append", append)
        played = play(server, *actions)
    failed(played, "its record could not be written")
    if ending == "raises":  # both failures named
        assert "the environment raised RuntimeError" in played["described"]["error"]
    assert "No space left on device" in played["described"]["error"] or append is not_json
    assert played["described"]["id"] == played["id"] and played["described"]["record"] is None
    serves_on(server)


def test_a_records_file_turned_into_a_folder(server, tmp_path):
    serves_on(server)  # the file exists
    path = tmp_path / RECORDS_FILE
    kept = path.read_bytes()
    path.unlink()
    path.mkdir()  # every append now fails (IsADirectoryError), as a real disk fault
    played = play(server, ("agent_0", "a"), ("agent_1", "b"))
    failed(played, "its record could not be written (IsADirectoryError")
    path.rmdir()
    path.write_bytes(kept)
    serves_on(server)
    assert [json.loads(line)["status"] for line in path.read_bytes().splitlines()] == [
        "finished",
        "finished",
    ]


def test_a_fault_of_the_server_itself_still_frees_the_slot(server, monkeypatch):
    def broken(self: EpisodeSpec) -> dict[str, Any]:
        raise RuntimeError("a bug in the server")

    episode = server.post("/episodes", json={"env": NAME}).json()["id"]
    tokens = {
        seat: server.post(f"/episodes/{episode}/seats/{seat}/join").json()["token"]
        for seat in ("agent_0", "agent_1")
    }

    def act(seat: str) -> httpx.Response:
        path = f"/episodes/{episode}/seats/{seat}/act"
        return server.post(path, json={"text": "a"}, headers={"X-Seat-Token": tokens[seat]})

    assert act("agent_0").status_code == 200
    with monkeypatch.context() as patched:
        patched.setattr(EpisodeSpec, "as_dict", broken)  # the record's entry cannot be made
        last = act("agent_1")
    told = server.get(
        f"/episodes/{episode}/seats/agent_0/turn", headers={"X-Seat-Token": tokens["agent_0"]}
    ).json()
    assert last.status_code == 500
    assert "the server failed (RuntimeError: a bug in the server)" in last.json()["detail"]
    assert told["type"] == "error" and "a bug in the server" in told["detail"]
    assert server.get("/health").json()["running"] == 0
    serves_on(server)


def test_an_openenv_episode_its_client_leaves_after_acting_is_recorded_interrupted(tmp_path):
    debater = scripted_debaters(3, seed=1)["agent_0"]

    def act(env: Any, result: Any) -> None:
        env.step({"text": debater({"messages": result.observation["messages"]}, {})})

    with serving(debate_settings(records=str(tmp_path))) as url:
        with GenericEnvClient(base_url=f"{url}/openenv").sync() as env:
            untouched = env.reset(seat="agent_0", problem=2).observation["episode_id"]
            result = env.reset(seat="agent_0", problem=0)  # nothing played in the first
            act(env, result)  # the debate has a second round: unfinished
            reset = result.observation["episode_id"]
            result = env.reset(seat="agent_0", problem=1)
            act(env, result)
            closed = result.observation["episode_id"]
        for _ in range(100):  # the session's close runs after the socket's
            if closed in EpisodeStore(tmp_path):
                break
            time.sleep(0.05)
        store = EpisodeStore(tmp_path)
    assert untouched not in store
    assert store.get(reset)["status"] == "interrupted"
    assert "the client reset its session before the episode ended" in store.get(reset)["error"]
    assert store.get(closed)["status"] == "interrupted"
    assert "the session closed before the episode ended" in store.get(closed)["error"]
    assert len(store.get(closed)["record"]["turns"]) >= 1  # what was played is kept
