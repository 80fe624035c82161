"""No text an action holds can lose its episode, over HTTP, a seat's socket or OpenEnv.

Every class of hostile text (lone surrogates, NUL and other control
characters, noncharacters, 10 MB, bytes that are not UTF-8 in a raw HTTP body
and in a raw socket frame) is sent as agent_0's action; then the episode's
other seats play on to the end, the episode is one line of ``episodes.jsonl``
(valid UTF-8, the text read back as it was sent, where it was taken) and its
slot is free again. A body over the server's cap (413) or a socket message
over it (closed 1009) loses nothing either: the seat acts again.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from openenv.core import GenericEnvClient
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from llm_envs.debate.agents import scripted_debaters
from llm_envs.serve.store import RECORDS_FILE
from tests.serve.conftest import DEBATE, create, debate_settings, serving, ws_url

MASKED = {**DEBATE, "on_parse_error": "mask"}  # a broken answer scores 0; the debate goes on
CONTROLS = "".join(map(chr, range(1, 32))) + "\x7f\x80\x85\x9f\u2028\u2029"
TEN_MB = "x" * (10 << 20)
HOSTILE = [
    pytest.param("\ud800", id="high-surrogate"),
    pytest.param("\udfff", id="low-surrogate"),
    pytest.param("a\udc00\ud800b\\ud800", id="surrogates-unpaired-and-a-backslash"),
    pytest.param("\x00", id="nul"),
    pytest.param("nul\x00inside\x00", id="nuls-inside"),
    pytest.param(CONTROLS, id="control-characters"),
    pytest.param("\ufeff\ufffe\uffff\U0010ffff\u202e\U0001f600", id="noncharacters-astral"),
    pytest.param(TEN_MB, id="10MB"),
]
Agent = Callable[[Any, Any], str]


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Path]]:
    records = tmp_path_factory.mktemp("records")
    # max_episodes=2: an episode that kept its slot would refuse the next test's.
    settings = debate_settings(MASKED, records=str(records), max_episodes=2)
    with serving(settings) as url:
        yield url, records / RECORDS_FILE


def recorded(path: Path, episode: str, wait: float = 120.0) -> dict[str, Any]:
    """The episode's one line in ``episodes.jsonl`` (the whole file must be UTF-8 JSON lines).

    Waited for up to ``wait`` seconds: an ending is recorded once, but not always
    before the reply (a step past its deadline answers ``timed_out`` at once and its
    thread writes the record when it ends; a loaded machine took that long on 10 MB).
    """
    deadline = time.monotonic() + wait
    while True:
        entries = [json.loads(line.decode("utf-8")) for line in path.read_bytes().splitlines()]
        found = [entry for entry in entries if entry["id"] == episode]
        if found or time.monotonic() > deadline:
            break
        time.sleep(0.2)
    assert len(found) == 1, f"episode {episode} has {len(found)} records"
    return found[0]


def released(url: str) -> None:
    health = httpx.get(f"{url}/health").json()
    assert health["running"] == 0, health


def first_then_scripted(first: str, seat: str) -> Agent:
    """``first`` at the seat's first turn, then the scripted debater's answers."""
    scripted = scripted_debaters(3, seed=1)[seat]
    told: list[str] = []

    def agent(observation: Any, info: Any) -> str:
        told.append(first)
        return first if len(told) == 1 else scripted(observation, info)

    return agent


def body(text: str) -> bytes:
    """An act body, as any JSON client writes it: a lone surrogate as its JSON escape."""
    return json.dumps({"text": text}).encode()


async def play_http(
    client: httpx.AsyncClient, episode: str, seat: str, agent: Agent
) -> list[dict[str, Any]]:
    """Play one seat over HTTP (join, long-poll, act); every message it got."""
    path = f"/episodes/{episode}/seats/{seat}"
    token = (await client.post(f"{path}/join")).json()["token"]
    headers = {"X-Seat-Token": token, "content-type": "application/json"}
    received = []
    while True:
        reply = await client.get(f"{path}/turn", params={"wait": 10}, headers=headers)
        assert reply.status_code == 200, reply.text
        message = reply.json()
        received.append(message)
        if message["type"] in ("end", "error"):
            return received
        if message["type"] == "turn":
            text = agent(message["observation"], message["info"])
            acted = await client.post(f"{path}/act", content=body(text), headers=headers)
            if acted.status_code == 413:  # over the server's body cap: refused, act again
                assert len(text) > 1 << 20, acted.text
                acted = await client.post(f"{path}/act", content=body("too long"), headers=headers)
            assert acted.status_code == 200, acted.text


async def play_ws(
    url: str, episode: str, seat: str, agent: Agent, token: str | None = None
) -> list[dict[str, Any]]:
    """Play one seat on its socket (``token`` rejoins); every message it got.

    A message over the server's cap closes the socket (1009): the seat rejoins
    and acts ``"too long"`` instead.
    """
    received: list[dict[str, Any]] = []
    for attempt in range(2):
        where = ws_url(url, episode, seat) + (f"?token={token}" if token else "")
        async with connect(where, max_size=None) as socket:
            try:
                async for raw in socket:
                    message = json.loads(raw)
                    received.append(message)
                    if message["type"] == "joined":
                        token = message["token"]
                    elif message["type"] == "turn":
                        text = agent(message["observation"], message["info"])
                        await socket.send(json.dumps({"type": "act", "text": text}))
                    elif message["type"] in ("end", "error"):
                        return received
            except ConnectionClosed:
                pass
        assert attempt == 0 and socket.close_code == 1009, (seat, socket.close_code, received)
        agent = first_then_scripted("too long", seat)
    raise AssertionError("unreachable")


def others() -> dict[str, Agent]:
    """agent_1 and agent_2, scripted."""
    return {seat: scripted_debaters(3, seed=1)[seat] for seat in ("agent_1", "agent_2")}


def play_all_ws(url: str, episode: str, agents: dict[str, Agent], token: str) -> list[Any]:
    """Every seat on its socket, agent_0 rejoining with ``token``; each seat's last message."""

    async def everyone() -> list[list[dict[str, Any]]]:
        return await asyncio.gather(
            *(
                play_ws(url, episode, seat, agent, token=token if seat == "agent_0" else None)
                for seat, agent in agents.items()
            )
        )

    return [messages[-1] for messages in asyncio.run(everyone())]


def all_seats(url: str, episode: str, play: Callable[..., Any], first: str) -> dict[str, Any]:
    agents = {"agent_0": first_then_scripted(first, "agent_0")} | others()

    async def everyone() -> list[list[dict[str, Any]]]:
        if play is play_http:
            async with httpx.AsyncClient(base_url=url, timeout=60) as client:
                return await asyncio.gather(
                    *(play_http(client, episode, s, a) for s, a in agents.items())
                )
        return await asyncio.gather(*(play_ws(url, episode, s, a) for s, a in agents.items()))

    return dict(zip(agents, asyncio.run(everyone()), strict=True))


@pytest.mark.parametrize("play", [play_http, play_ws], ids=["http", "websocket"])
@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_loses_no_episode(server, play, text):
    url, records = server
    episode = create(httpx.Client(base_url=url), problem=0, seed=0)["id"]
    received = all_seats(url, episode, play, text)
    for seat, messages in received.items():
        assert messages[-1]["type"] == "end", (seat, messages[-1])
        assert messages[-1]["status"] == "finished"
    entry = recorded(records, episode)
    assert entry["status"] == "finished"
    texts = [t["text"] for t in entry["record"]["turns"] if t["agent"] == "agent_0"]
    # Taken as sent, or (10 MB) refused by the server's cap and followed by another action.
    assert texts[0] == text or (len(text) > 1 << 20 and texts[0] == "too long")
    assert len(entry["record"]["turns"]) == 6  # every seat played both rounds
    described = httpx.get(f"{url}/episodes/{episode}").json()
    assert described["record"]["turns"][0]["text"] == texts[0]
    released(url)


@pytest.mark.parametrize("text", HOSTILE)
def test_hostile_text_on_the_openenv_view(server, text):
    url, records = server
    scripted = scripted_debaters(3, seed=1)["agent_0"]
    with GenericEnvClient(base_url=f"{url}/openenv").sync() as env:
        result = env.reset(seat="agent_0", problem=0, seed=0)
        episode = result.observation["episode_id"]
        observation = result.observation
        result = env.step({"text": scripted({"messages": observation["messages"]}, {})})
        try:
            result = env.step({"text": text})  # agent_0's second and last turn
            sent = text
        except Exception:  # over the socket's cap: closed 1009, the session with it
            sent = None
    if sent is not None:
        assert result.done
        assert "\ud800" not in json.dumps(result.observation)  # what OpenEnv could send
    entry = recorded(records, episode)
    assert entry["status"] == ("finished" if sent is not None else "interrupted")
    turns = [t["text"] for t in entry["record"]["turns"] if t["agent"] == "agent_0"]
    assert turns[-1] == text if sent is not None else len(turns) == 1
    released(url)


# ---------------------------------------------------------------------- bytes that are not UTF-8


def test_a_raw_http_body_of_bytes_that_are_not_utf8(server):
    url, records = server
    with httpx.Client(base_url=url) as client:
        episode = create(client, problem=0, seed=0)["id"]
        path = f"/episodes/{episode}/seats/agent_0"
        token = client.post(f"{path}/join").json()["token"]
        headers = {"X-Seat-Token": token, "content-type": "application/json"}
        refusals = [
            client.post(f"{path}/act", content=raw, headers=headers)
            for raw in (b'{"text": "\xff\xfe"}', b'{"text": "\xc3\x28"}', b"\x80" * 64)
        ]
        # The surrogate's own three bytes (not UTF-8 either); a server may read them as it.
        cesu = client.post(f"{path}/act", content=b'{"text": "\xed\xa0\x80"}', headers=headers)
        turn = client.get(f"{path}/turn", headers=headers)
    assert all(r.status_code in (400, 422) for r in refusals), [r.text for r in refusals]
    assert turn.status_code == 200
    if cesu.status_code == 200:  # taken as "\ud800": the socket plays agent_0's second turn
        expected = "\ud800"
        agents = {"agent_0": scripted_debaters(3, seed=1)["agent_0"]}
    else:
        assert cesu.status_code in (400, 422), cesu.text
        expected = None
        agents = {"agent_0": first_then_scripted("after the bytes", "agent_0")}
    ends = play_all_ws(url, episode, agents | others(), token)
    assert [m["type"] for m in ends] == ["end"] * 3
    entry = recorded(records, episode)
    first = entry["record"]["turns"][0]["text"]
    assert first == (expected or "after the bytes")
    released(url)


def _frame(opcode: int, payload: bytes) -> bytes:
    """One masked client frame (RFC 6455 section 5.2)."""
    mask = os.urandom(4)
    size = len(payload)
    head = bytes([0x80 | opcode])
    head += bytes([0x80 | size]) if size < 126 else bytes([0x80 | 126]) + struct.pack("!H", size)
    return head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(payload))


async def _read_frame(reader: asyncio.StreamReader) -> tuple[int, bytes]:
    first, second = await reader.readexactly(2)
    size = second & 0x7F
    if size == 126:
        (size,) = struct.unpack("!H", await reader.readexactly(2))
    elif size == 127:
        (size,) = struct.unpack("!Q", await reader.readexactly(8))
    return first & 0x0F, await reader.readexactly(size)


async def raw_socket(url: str, path: str, frames: list[bytes], count: int) -> list[Any]:
    """Open a seat's socket by hand, send ``frames``; the first ``count`` frames received.

    Frames are ``(opcode, payload)``; the first is ``joined``. Stops at a close frame.
    """
    host, port = url.removeprefix("http://").split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: {host}:{port}\r\nUpgrade: websocket\r\n"
        f"Connection: Upgrade\r\nSec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n"
    )
    writer.write(request.encode())
    head = await reader.readuntil(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 101"), head
    got = [await _read_frame(reader)]  # joined
    for frame in frames:
        writer.write(frame)
    await writer.drain()
    try:
        while got[-1][0] != 0x8 and len(got) < count:
            got.append(await asyncio.wait_for(_read_frame(reader), 10))
    except asyncio.IncompleteReadError:
        pass
    writer.close()
    return got


@pytest.mark.parametrize(
    ("opcode", "payload", "closed"),
    [
        (0x1, b'{"type": "act", "text": "\xff\xfe"}', 1007),  # a text frame must be UTF-8
        (0x1, b'{"type": "act", "text": "\xed\xa0\x80"}', 1007),
        (0x2, b'{"type": "act", "text": "\xff\xfe"}', None),  # binary: read as U+FFFD
    ],
    ids=["text-frame", "text-frame-surrogate-bytes", "binary-frame"],
)
def test_a_raw_socket_frame_of_bytes_that_are_not_utf8(server, opcode, payload, closed):
    url, records = server
    episode = create(httpx.Client(base_url=url), problem=0, seed=0)["id"]
    got = asyncio.run(
        raw_socket(url, f"/episodes/{episode}/seats/agent_0/ws", [_frame(opcode, payload)], 3)
    )
    token = json.loads(got[0][1])["token"]
    if closed is not None:
        assert got[-1][0] == 0x8 and struct.unpack("!H", got[-1][1][:2])[0] == closed
        agent: Agent = first_then_scripted("after the frame", "agent_0")
    else:
        assert [json.loads(data)["type"] for _, data in got] == ["joined", "turn", "accepted"]
        agent = scripted_debaters(3, seed=1)["agent_0"]
    ends = play_all_ws(url, episode, {"agent_0": agent} | others(), token)
    assert [m["type"] for m in ends] == ["end"] * 3
    first = recorded(records, episode)["record"]["turns"][0]["text"]
    assert first == ("after the frame" if closed is not None else "\ufffd\ufffd")
    released(url)


@pytest.mark.parametrize("play", [play_http, play_ws], ids=["http", "websocket"])
def test_ten_megabytes_are_taken_whole_where_the_cap_allows(tmp_path, play):
    settings = debate_settings(MASKED, records=str(tmp_path), max_body_bytes=16 << 20)
    with serving(settings) as url:
        episode = create(httpx.Client(base_url=url), problem=0, seed=0)["id"]
        received = all_seats(url, episode, play, TEN_MB + "\ud800")
        released(url)
    assert [messages[-1]["status"] for messages in received.values()] == ["finished"] * 3
    entry = recorded(tmp_path / RECORDS_FILE, episode)
    assert entry["record"]["turns"][0]["text"] == TEN_MB + "\ud800"
