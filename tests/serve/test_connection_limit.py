"""Connections are bounded below the open-file limit: a flood of idle sockets cannot cost a record.

A server whose every descriptor is held by idle connections (attack rounds 3
and 4: 1,100 of them at a limit of 1,024) cannot open its records file, and an
episode that ends then was lost ("its record could not be written"). Past
``max_connections`` a new connection is answered 503 and closed, which keeps
descriptors for the records whatever the clients do.
"""

from __future__ import annotations

import contextlib
import json
import resource
import socket
import subprocess
import sys
import time

import httpx
import pytest

from llm_envs.serve import heads

LIMIT = 300  # the server's open-file limit, soft and hard (it raises soft to hard at start)


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextlib.contextmanager
def _server_limited_to(descriptors: int, records: str):
    port = _free_port()
    command = [sys.executable, "-m", "llm_envs.serve", "--env=debate", f"--port={port}"]
    command += [f"--records={records}", "--log-level=warning"]

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_NOFILE, (descriptors, descriptors))

    server = subprocess.Popen(command, preexec_fn=limit, stderr=subprocess.PIPE)
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.stderr.read().decode() if server.stderr else ""
            with contextlib.suppress(httpx.TransportError):
                httpx.get(f"{url}/health")
                break
            assert time.monotonic() < deadline, "the server did not start within a minute"
            time.sleep(0.1)
        yield url, port
    finally:
        server.terminate()
        server.wait(timeout=30)


def test_a_flood_of_idle_connections_is_refused_and_the_episode_recorded(tmp_path):
    if resource.getrlimit(resource.RLIMIT_NOFILE)[0] < 4 * LIMIT:
        pytest.skip("this test opens more sockets than its own open-file limit allows")
    flood: list[socket.socket] = []
    with _server_limited_to(LIMIT, str(tmp_path)) as (url, port), httpx.Client() as client:
        episode = client.post(
            f"{url}/episodes", json={"problem": 3, "env_kwargs": {"num_agents": 2, "max_rounds": 1}}
        ).json()
        seats = {
            seat: client.post(f"{url}/episodes/{episode['id']}/seats/{seat}/join").json()["token"]
            for seat in episode["seats"]
        }
        try:
            for _ in range(LIMIT + 100):  # past every descriptor the server has
                flood.append(socket.create_connection(("127.0.0.1", port)))
            time.sleep(0.5)
            flood[-1].settimeout(10)
            refused = flood[-1].recv(4096).decode()
            assert refused.startswith("HTTP/1.1 503") and "--max-connections" in refused
            # the seats' kept-alive connection plays the episode to its end meanwhile
            for _ in range(20):
                ended = True
                for seat, token in seats.items():
                    headers = {"X-Seat-Token": token}
                    turn = client.get(
                        f"{url}/episodes/{episode['id']}/seats/{seat}/turn?wait=1", headers=headers
                    ).json()
                    ended = ended and turn["type"] == "end"
                    if turn["type"] == "turn":
                        client.post(
                            f"{url}/episodes/{episode['id']}/seats/{seat}/act",
                            json={"text": "I answer 7. <answer>7</answer>"},
                            headers=headers,
                        )
                if ended:
                    break
            assert ended and turn["status"] == "finished", turn
        finally:
            for sock in flood:
                sock.close()
    lines = (tmp_path / "episodes.jsonl").read_text().splitlines()
    assert [json.loads(line)["status"] for line in lines] == ["finished"]


def test_the_default_bound_keeps_a_reserve_of_descriptors():
    soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
    assert heads.default_max_connections() == max(1, soft - heads.FD_RESERVE)
