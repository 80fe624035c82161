"""Finished episodes survive a restart; a line cut short by a crash is skipped, never fatal."""

from __future__ import annotations

import asyncio
import json
import logging

import httpx
import pytest

from llm_envs.serve.app import build_app
from llm_envs.serve.store import RECORDS_FILE, EpisodeStore
from tests.serve.conftest import create, debate_settings, serving

CUT = b'{"id": "cut-short", "status": "finished", "retu'


def finish_one(client: httpx.Client) -> dict:
    """Create a debate, break agent_0's answer (it ends the debate), return the record."""
    episode = create(client, problem=1, seed=4)["id"]
    token = client.post(f"/episodes/{episode}/seats/agent_0/join").json()["token"]
    accepted = client.post(
        f"/episodes/{episode}/seats/agent_0/act",
        json={"text": "no tags at all"},  # any text is an action: the env scores it
        headers={"X-Seat-Token": token},
    )
    assert accepted.status_code == 200, accepted.text
    record = client.get(f"/episodes/{episode}").json()
    assert record["status"] == "finished"
    return record


async def read_back(records, *episodes):
    app = build_app(debate_settings(records=str(records)))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://serve") as client:
        return [(await client.get(f"/episodes/{e}")).json() for e in episodes]


def test_a_restart_keeps_finished_records_and_skips_a_cut_line(tmp_path, caplog):
    with serving(debate_settings(records=str(tmp_path))) as url, httpx.Client(base_url=url) as c:
        first = finish_one(c)
    assert first["returns"]["agent_0"] == -1.0 and first["abandoned"] == []
    with (tmp_path / RECORDS_FILE).open("ab") as file:
        file.write(CUT)  # the server crashed while writing its next record

    with (
        caplog.at_level(logging.WARNING, logger="llm_envs.serve.store"),
        serving(debate_settings(records=str(tmp_path))) as url,
        httpx.Client(base_url=url) as c,
    ):
        assert c.get(f"/episodes/{first['id']}").json() == first
        assert c.get("/episodes/cut-short").status_code == 404
        second = finish_one(c)
    assert "line 2 is not an episode record and cut short" in caplog.text

    again = asyncio.run(read_back(tmp_path, first["id"], second["id"]))
    assert again == [first, second]  # the record after the cut line starts a line of its own
    lines = (tmp_path / RECORDS_FILE).read_bytes().split(b"\n")
    assert [json.loads(line)["id"] for line in lines if line and line != CUT] == [
        first["id"],
        second["id"],
    ]


def test_a_record_is_the_env_record_with_its_seats_and_returns(tmp_path):
    with serving(debate_settings(records=str(tmp_path))) as url, httpx.Client(base_url=url) as c:
        record = finish_one(c)
    assert record["env"] == "debate" and (record["problem"], record["seed"]) == (1, 4)
    assert record["seats"] == {"agent_0": "client", "agent_1": "client", "agent_2": "client"}
    assert record["returns"] == {"agent_0": -1.0, "agent_1": 0.0, "agent_2": 0.0}
    assert [t["text"] for t in record["record"]["turns"]] == ["no tags at all"]
    assert record["record"]["turns"][0]["details"]["parse_error"]


@pytest.mark.parametrize(
    ("content", "kept", "warned"),
    [
        (b'{"id": "a"}\n{"id": "b"}\n', ["a", "b"], []),
        (b'{"id": "a"}\n{"id": "b"}', ["a", "b"], []),  # whole, but the newline never came
        (b'{"id": "a"}\n{"id": "b', ["a"], ["line 2 is not an episode record and cut short"]),
        (b'{"id": "a"}\nnot json\n{"id": "c"}\n', ["a", "c"], ["line 2 is not an episode record"]),
        (b'[1, 2]\n{"no": "id"}\n', [], ["line 1 is not", "line 2 is not"]),
    ],
)
def test_the_store_reads_back_what_it_can(tmp_path, caplog, content, kept, warned):
    (tmp_path / RECORDS_FILE).write_bytes(content)
    with caplog.at_level(logging.WARNING, logger="llm_envs.serve.store"):
        store = EpisodeStore(tmp_path)
    assert [e for e in ["a", "b", "c"] if e in store] == kept and len(store) == len(kept)
    for message in warned:
        assert message in caplog.text
    if not warned:
        assert caplog.text == ""
    store.append({"id": "new"})
    assert EpisodeStore(tmp_path).get("new") == {"id": "new"}
    assert all(EpisodeStore(tmp_path).get(e) == {"id": e} for e in kept)


def test_without_a_directory_records_live_in_memory():
    store = EpisodeStore()
    entry = {"id": "x", "returns": {"agent_0": 0.5}}
    store.append(entry)
    entry["returns"]["agent_0"] = 9.0  # the store keeps a copy
    assert store.get("x") == {"id": "x", "returns": {"agent_0": 0.5}}
    assert "x" in store and store.get("y") is None and store.path is None
