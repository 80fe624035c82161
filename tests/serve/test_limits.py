"""Every request is bounded: bodies (told or streamed), socket messages, heads, sockets per seat.

The server runs with its default limits (``--max-body-bytes`` 1 MiB), so each
test sends just past them; ``docs/serve.md`` lists the limits.
"""

from __future__ import annotations

import asyncio
import json

import httpx
import pytest
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from tests.serve.conftest import create, ws_url

CAP = 1 << 20  # the default --max-body-bytes
OVER = "x" * (CAP + 1)


def chunks(body: bytes, size: int = 64 * 1024):
    """A body streamed without a Content-Length (httpx sends it chunked)."""
    for start in range(0, len(body), size):
        yield body[start : start + size]


def too_large(response: httpx.Response) -> None:
    assert response.status_code == 413, response.text
    detail = response.json()["detail"]
    assert f"over this server's limit of {CAP} bytes" in detail
    assert "start the server with a larger --max-body-bytes" in detail


@pytest.fixture
def seat(debate_server):
    """A fresh debate's agent_0, joined: ``(client, act path, token)``."""
    with httpx.Client(base_url=debate_server) as client:
        episode = create(client)["id"]
        token = client.post(f"/episodes/{episode}/seats/agent_0/join").json()["token"]
        yield client, f"/episodes/{episode}/seats/agent_0/act", token


@pytest.mark.parametrize("path", ["/episodes", "/rendezvous", "/openenv/reset", "/openenv/step"])
def test_a_body_over_the_cap_is_413_by_its_content_length(debate_server, path):
    body = json.dumps({"text": OVER}).encode()
    too_large(httpx.post(f"{debate_server}{path}", content=body))


@pytest.mark.parametrize("path", ["/episodes", "/rendezvous", "/openenv/step"])
def test_a_streamed_body_over_the_cap_is_413_without_a_content_length(debate_server, path):
    body = json.dumps({"text": OVER}).encode()
    request = httpx.Request("POST", f"{debate_server}{path}", content=chunks(body))
    assert "content-length" not in request.headers
    assert request.headers["transfer-encoding"] == "chunked"
    with httpx.Client() as client:
        too_large(client.send(request))


def test_an_action_at_the_cap_is_taken_and_one_byte_more_is_413(seat):
    client, act, token = seat
    shell = len(json.dumps({"text": ""}).encode())
    at_cap = json.dumps({"text": "x" * (CAP - shell)}).encode()
    assert len(at_cap) == CAP
    headers = {"X-Seat-Token": token, "content-type": "application/json"}
    too_large(client.post(act, content=at_cap + b" ", headers=headers))
    taken = client.post(act, content=at_cap, headers=headers)
    assert taken.status_code == 200, taken.text  # any text is an action: scored, not refused


async def close_code_after_sending(url: str, first: str | None, message: str) -> int | None:
    async with connect(url, max_size=None) as socket:
        if first is not None:
            assert json.loads(await socket.recv())["type"] == first
        await socket.send(message)
        try:
            while True:
                await asyncio.wait_for(socket.recv(), timeout=30)
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd is not None else None


def test_a_seat_socket_message_over_the_cap_closes_it_1009(debate_server):
    with httpx.Client(base_url=debate_server) as client:
        episode = create(client)["id"]
    message = json.dumps({"type": "act", "text": OVER})
    code = asyncio.run(
        close_code_after_sending(ws_url(debate_server, episode, "agent_0"), "joined", message)
    )
    assert code == 1009  # RFC 6455: message too big


def test_an_openenv_socket_message_over_the_cap_closes_it_1009(debate_server):
    url = f"{debate_server.replace('http://', 'ws://')}/openenv/ws"
    message = json.dumps({"type": "step", "data": {"text": OVER}})
    assert asyncio.run(close_code_after_sending(url, None, message)) == 1009


def test_a_request_head_over_64_kib_is_refused(debate_server):
    assert httpx.get(f"{debate_server}/envs", headers={"X-Pad": "a" * 8192}).status_code == 200
    refused = httpx.get(f"{debate_server}/envs", headers={"X-Pad": "a" * (64 * 1024)})
    assert refused.status_code == 431
    assert refused.json()["detail"].startswith("the request's line and headers are 65")
    # A larger head is never buffered whole: the parser refuses it as it arrives.
    huge = httpx.get(f"{debate_server}/envs", headers={"X-Pad": "a" * (4 << 20)})
    assert huge.status_code == 400


async def open_sockets(base: str, episode: str, count: int, token: str | None = None) -> list:
    """Open ``count`` sockets on agent_0 at once (the first joins unless given its token)."""
    url = ws_url(base, episode, "agent_0")
    held, replies = [], []
    try:
        for _ in range(count):
            token = token or (replies[0]["token"] if replies else None)
            socket = await connect(url if token is None else f"{url}?token={token}")
            held.append(socket)
            replies.append(json.loads(await socket.recv()))
        try:
            await asyncio.wait_for(held[-1].recv(), timeout=5)
        except ConnectionClosed as closed:
            replies.append({"closed": closed.rcvd.code if closed.rcvd else None})
        return replies
    finally:
        for socket in held:
            await socket.close()


def test_a_seat_takes_four_sockets_at_once_and_a_fifth_is_refused(debate_server):
    with httpx.Client(base_url=debate_server) as client:
        episode = create(client)["id"]
    replies = asyncio.run(open_sockets(debate_server, episode, 5))
    assert [r["type"] for r in replies[:4]] == ["joined"] * 4
    assert replies[4] == {
        "type": "error",
        "status": 429,
        "detail": f"seat 'agent_0' of episode {episode} has 4 sockets open, the most it may: "
        "close one before opening another",
    }
    assert replies[5] == {"closed": 4429}
    # Closed sockets free their places: the seat takes four again.
    again = asyncio.run(open_sockets(debate_server, episode, 4, replies[0]["token"]))
    assert [r["type"] for r in again[:4]] == ["joined"] * 4
