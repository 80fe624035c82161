"""One client cannot hold every connection: past its share its new ones get 503, others' do not.

Attack round 4: one client holding ``--max-connections`` idle sockets got every
other client a 503 until its sockets timed out (30 s a wave). A client is an
address (an IPv6 /48); each loopback address counts apart, so these tests
play two clients from 127.0.0.1 and 127.0.0.2.
"""

from __future__ import annotations

import contextlib
import socket
import time
from collections.abc import Iterator

import httpx
import pytest
from websockets.sync.client import connect

from llm_envs.serve.heads import default_max_per_address
from tests.serve.conftest import debate_settings, serving

SHARE = 3


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    settings = debate_settings(
        records=str(tmp_path_factory.mktemp("records")),
        max_connections=50,
        max_connections_per_address=SHARE,
    )
    with serving(settings) as url:
        yield url


@contextlib.contextmanager
def idle_sockets(url: str, count: int, source: str = "127.0.0.1") -> Iterator[list[socket.socket]]:
    port = int(url.rsplit(":", 1)[1])
    held = []
    try:
        for _ in range(count):
            held.append(socket.create_connection(("127.0.0.1", port), source_address=(source, 0)))
        time.sleep(0.3)  # the server has counted them
        yield held
    finally:
        for sock in held:
            sock.close()


def refused(sock: socket.socket) -> str:
    sock.settimeout(10)
    return sock.recv(4096).decode()


def health(url: str, source: str) -> int:
    transport = httpx.HTTPTransport(local_address=source)
    with httpx.Client(transport=transport, timeout=10) as client:
        return client.get(f"{url}/health").status_code


def test_past_its_share_a_clients_new_connection_gets_503_and_another_client_is_served(server):
    with idle_sockets(server, SHARE) as held:
        with idle_sockets(server, 1) as extra:
            answer = refused(extra[0])
        assert answer.startswith("HTTP/1.1 503")
        assert "client 127.0.0.1 holds 3 connections" in answer
        assert "--max-connections-per-address 3" in answer
        assert health(server, "127.0.0.2") == 200  # another client is not held up
        held.pop().close()
        time.sleep(0.3)
        assert health(server, "127.0.0.1") == 200  # room again once one closed
    assert health(server, "127.0.0.1") == 200


def test_a_websocket_counts_while_open_and_its_end_gives_the_place_back(server):
    ws = server.replace("http://", "ws://") + "/openenv/ws"
    for _ in range(SHARE + 2):  # a leak of one place per socket would show by the last
        with connect(ws), idle_sockets(server, SHARE - 1), idle_sockets(server, 1) as extra:
            assert refused(extra[0]).startswith("HTTP/1.1 503")
        time.sleep(0.3)
    with idle_sockets(server, SHARE - 1):
        assert health(server, "127.0.0.1") == 200


def test_the_default_share_is_a_quarter_of_the_connections():
    assert [default_max_per_address(n) for n in (1, 3, 4, 896, 19872)] == [1, 1, 1, 224, 4968]
