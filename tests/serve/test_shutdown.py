"""Episodes running when the server stops end as ``interrupted``: recorded, and their seats told.

A real server (``python -m llm_envs.serve``) gets SIGTERM while a debate is
half played: a seat on its socket and a seat long-polling over HTTP each
receive an ``end`` naming the interruption; the server exits; started again
on the same records, it answers ``GET /episodes/{id}`` with the interrupted
record (the turns played, the returns so far) and a seat's request with
"over" (409), not "no episode".
"""

from __future__ import annotations

import asyncio
import json
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from websockets.asyncio.client import connect

from llm_envs.debate.agents import scripted_debaters
from llm_envs.serve.store import RECORDS_FILE, EpisodeStore
from tests.serve.conftest import ARITHMETIC, DEBATE, create, debate_settings, serving, ws_url


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


@contextmanager
def server_process(records: Path) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """``python -m llm_envs.serve`` on a free port, answering; killed if the block leaves it up."""
    port = free_port()
    command = [
        sys.executable,
        "-m",
        "llm_envs.serve",
        "--env=debate",
        f"--env-kwargs={json.dumps(DEBATE)}",
        "--task=arithmetic",
        f"--task-kwargs={json.dumps(ARITHMETIC)}",
        f"--port={port}",
        f"--records={records}",
        "--log-level=warning",
    ]
    server = subprocess.Popen(command, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            try:
                httpx.get(f"{url}/health")
                break
            except httpx.TransportError:
                assert time.monotonic() < deadline, "the server did not start within a minute"
                time.sleep(0.1)
        yield url, server
    finally:
        if server.poll() is None:
            server.kill()
        server.wait(timeout=30)


async def half_played(url: str, server: subprocess.Popen[bytes]) -> dict[str, Any]:
    """agent_0 acts on its socket; agent_1 joins; agent_2 long-polls; then SIGTERM."""
    async with httpx.AsyncClient(base_url=url, timeout=60) as client:
        episode = (await client.post("/episodes", json={"problem": 0, "seed": 0})).json()["id"]
        path = f"/episodes/{episode}/seats"
        tokens = {
            seat: (await client.post(f"{path}/{seat}/join")).json()["token"]
            for seat in ("agent_1", "agent_2")
        }
        debater = scripted_debaters(3, seed=1)["agent_0"]
        async with connect(ws_url(url, episode, "agent_0")) as sock:
            seen = [json.loads(await sock.recv()) for _ in range(2)]  # joined, turn
            text = debater(seen[1]["observation"], seen[1]["info"])
            await sock.send(json.dumps({"type": "act", "text": text}))
            seen.append(json.loads(await sock.recv()))  # accepted
            poll = asyncio.ensure_future(
                client.get(
                    f"{path}/agent_2/turn",
                    params={"wait": 30},
                    headers={"X-Seat-Token": tokens["agent_2"]},
                )
            )
            await asyncio.sleep(0.5)  # the poll waits on the server
            server.send_signal(signal.SIGTERM)
            told = json.loads(await asyncio.wait_for(sock.recv(), 20))
            polled = (await asyncio.wait_for(poll, 20)).json()
    return {"id": episode, "text": text, "tokens": tokens, "told": told, "polled": polled}


def test_sigterm_interrupts_running_episodes_records_them_and_tells_their_seats(tmp_path):
    with server_process(tmp_path) as (url, server):
        seen = asyncio.run(half_played(url, server))
        server.wait(timeout=30)  # it stops
    for message in (seen["told"], seen["polled"]):
        assert message["type"] == "end" and message["status"] == "interrupted", message
        assert message["truncated"] is True
        assert "interrupted: the server received SIGTERM and stops" in message["detail"]

    with server_process(tmp_path) as (url, _), httpx.Client(base_url=url) as client:
        entry = client.get(f"/episodes/{seen['id']}").json()
        late = client.get(
            f"/episodes/{seen['id']}/seats/agent_1/turn",
            headers={"X-Seat-Token": seen["tokens"]["agent_1"]},
        )
    assert entry["status"] == "interrupted"
    assert "the server received SIGTERM" in entry["error"]
    assert [turn["text"] for turn in entry["record"]["turns"]] == [seen["text"]]
    assert set(entry["returns"]) == {"agent_0", "agent_1", "agent_2"}
    assert late.status_code == 409 and "is over" in late.json()["detail"]
    lines = (tmp_path / RECORDS_FILE).read_bytes().splitlines()
    assert [json.loads(line)["id"] for line in lines] == [seen["id"]]  # recorded once


def test_a_server_stopped_in_process_records_its_running_episodes(tmp_path):
    with serving(debate_settings(records=str(tmp_path))) as url, httpx.Client(base_url=url) as c:
        episode = create(c, problem=1, seed=2)["id"]
    entry = EpisodeStore(tmp_path).get(episode)
    assert entry is not None and entry["status"] == "interrupted"
    assert entry["returns"] == {"agent_0": 0.0, "agent_1": 0.0, "agent_2": 0.0}
    assert entry["record"]["turns"] == [] and "the server stopped" in entry["error"]
