"""A connection that sends no request head in time is closed: idle sockets cannot hold the server.

Attack round 3 opened 1,100 connections that sent nothing, or a head a byte at a
time: the server kept every one, ran out of file descriptors at a soft limit of
1,024, answered nobody and lost a finished episode's record.
"""

from __future__ import annotations

import json
import socket
import time
from urllib.parse import urlparse

import httpx
from websockets.sync.client import connect

from llm_envs.serve import heads
from llm_envs.serve.app import ServeSettings, serving


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    sock.settimeout(within)
    try:
        return sock.recv(1024) == b""
    except TimeoutError:
        return False


def test_silent_and_slow_heads_are_closed_and_honest_clients_served(monkeypatch):
    monkeypatch.setattr(heads, "HEAD_SECONDS", 0.5)
    with serving(ServeSettings()) as url:
        address = urlparse(url)
        silent = socket.create_connection((address.hostname, address.port))
        slow = socket.create_connection((address.hostname, address.port))
        slow.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")  # and never the blank line
        started = time.monotonic()
        assert _closed_by_server(silent, within=10.0)
        assert _closed_by_server(slow, within=10.0)
        assert time.monotonic() - started < 10.0
        assert httpx.get(f"{url}/health").status_code == 200  # a prompt client is served
        with httpx.Client() as client:  # and a kept-alive one too, request after request
            for _ in range(3):
                assert client.get(f"{url}/health").status_code == 200
        silent.close()
        slow.close()


def test_a_body_sent_too_slowly_is_closed_and_websockets_are_not(monkeypatch):
    """A head in time and then a body a byte at a time (round 4: 1,100 held for 70 s and more)."""
    monkeypatch.setattr(heads, "HEAD_SECONDS", 0.5)
    monkeypatch.setattr(heads, "BODY_SECONDS", 0.5)
    with serving(ServeSettings()) as url:
        address = urlparse(url)
        created = httpx.post(f"{url}/episodes", json={"env": "debate", "problem": 3}).json()
        slow = socket.create_connection((address.hostname, address.port))
        slow.sendall(
            b"POST /episodes HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            b"Content-Length: 1000\r\n\r\n{"
        )
        started = time.monotonic()
        closed = False
        while not closed and time.monotonic() - started < 10.0:
            slow.sendall(b" ")  # progress, but never the whole body
            closed = _closed_by_server(slow, within=0.2)
        assert closed
        first = next(iter(created["seats"]))
        socket_url = url.replace("http", "ws") + f"/episodes/{created['id']}/seats/{first}/ws"
        with connect(socket_url) as seat_socket:
            time.sleep(1.5)  # past both deadlines: a socket is not a request
            assert json.loads(seat_socket.recv(timeout=10))["type"] == "joined"
            assert json.loads(seat_socket.recv(timeout=10))["type"] == "turn"
            seat_socket.send(json.dumps({"type": "act", "text": "7"}))
            assert json.loads(seat_socket.recv(timeout=10))["type"] == "accepted"
        slow.close()
