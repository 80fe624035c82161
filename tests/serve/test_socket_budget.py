"""WebSocket messages the app has not taken are counted: per client, and in all.

Attack round 10: uvicorn buffers an unfinished fragmented message of up to
``--max-body-bytes`` per socket, and nothing counted it, so one client's 144
seat sockets each holding 0.94 MiB of a message never finished took the server
from 110 to 285 MB (about 6 GB from one client at the defaults). Now each
socket's buffered bytes count in the server's budget (64 messages, a quarter
per client); a socket past it is closed with 1013.

The sockets here speak raw frames, so a test can send a message's first
fragment and never its last.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from functools import partial
from typing import Any, ClassVar

import httpx
import pytest
import uvicorn
from websockets.frames import Close, Frame, Opcode

from llm_envs.serve.guard import uvicorn_limits
from llm_envs.serve.sockets import (
    FRAME_OVERHEAD,
    FRAMES_PER_SECOND,
    MESSAGE_OVERHEAD,
    TRY_LATER,
    BoundedWebSocketProtocol,
    MessageBudget,
)
from tests.serve.conftest import create, debate_settings, serving

LARGEST = 4096
SHARE = 64 * LARGEST // 4  # one client's quarter of 64 messages
PIECE = 4000  # a first fragment: 16 fit a share, the 17th does not


@pytest.mark.parametrize(
    ("takes", "refused_at"),
    [
        ([("a", 25), ("a", 1)], 1),  # a's share is 100 // 4
        ([("a", 25), ("b", 25), ("c", 25), ("d", 25), ("e", 1)], 4),  # the total
        ([("a", 20), ("a", -20), ("a", 25)], None),  # given back, taken again
    ],
)
def test_the_budget_refuses_past_a_share_or_the_total(
    takes: list[tuple[str, int]], refused_at: int | None
) -> None:
    budget = MessageBudget(total=100, largest=10)
    refusals: list[str | None] = []
    for client, more in takes:
        if more < 0:
            budget.give(client, -more)
            refusals.append(None)
        else:
            refusals.append(budget.take(client, more))
    refused = [i for i, r in enumerate(refusals) if r is not None]
    assert refused == ([] if refused_at is None else [refused_at])
    if refused_at is not None:
        assert "past" in str(refusals[refused_at])


def test_a_client_s_frames_are_paced_and_others_are_not() -> None:
    now = [0.0]
    budget = MessageBudget(total=100, largest=10, frames_per_second=1000, clock=lambda: now[0])
    assert budget.wait("a") == 0.0 and budget.allowance("a") == 1000
    budget.spend("a", 3000)  # 1,000 allowed at once: 2,000 over
    assert budget.allowance("a") == 0 and budget.allowance("b") == 1000
    assert budget.wait("a") == pytest.approx(2.001) and budget.wait("b") == 0.0
    now[0] = 1.5
    assert budget.wait("a") == pytest.approx(0.501)
    now[0] = 10.0  # refilled, never past one second's frames
    assert budget.allowance("a") == 1000
    budget.spend("a", 999)
    assert budget.wait("a") == 0.0 and budget.allowance("a") == 1
    budget.spend("a", 1)
    assert budget.wait("a") == pytest.approx(0.001)


def test_a_share_is_never_less_than_one_message() -> None:
    budget = MessageBudget(total=10, largest=10)
    assert budget.share == 10 and budget.take("a", 10) is None
    with pytest.raises(ValueError, match="total >= largest"):
        MessageBudget(total=5, largest=10)


TAKEN: dict[str, list[str]] = {}  # the events a /late socket's app took, by its query


async def never_reads(scope: dict[str, Any], receive: Any, send: Any) -> None:
    """An app that accepts each socket and never takes a message from it.

    On ``/late?NAME`` it takes them half a second later, noting their types in TAKEN.
    """
    await receive()  # websocket.connect
    await send({"type": "websocket.accept"})
    if scope["path"] != "/late":
        await asyncio.sleep(3600)
    taken = TAKEN.setdefault(scope["query_string"].decode(), [])
    await asyncio.sleep(0.5)
    while not taken or taken[-1] != "websocket.disconnect":
        taken.append((await receive())["type"])


@contextlib.contextmanager
def serving_sockets(
    largest: int,
    frames_per_second: float | None = None,
    protocol: type[BoundedWebSocketProtocol] = BoundedWebSocketProtocol,
) -> Iterator[int]:
    """A uvicorn server of :func:`never_reads` with the episode server's limits; its port."""
    limits = uvicorn_limits(largest)
    if frames_per_second is not None or protocol is not BoundedWebSocketProtocol:
        pace = frames_per_second or FRAMES_PER_SECOND
        budget = MessageBudget(64 * largest, largest, frames_per_second=pace)
        limits["ws"] = partial(protocol, budget=budget)
    config = uvicorn.Config(
        never_reads, host="127.0.0.1", port=0, lifespan="off", log_level="warning", **limits
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    yield server.servers[0].sockets[0].getsockname()[1]
    server.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def port() -> Iterator[int]:
    """Small messages, no pace: each test here counts bytes to the share's edge."""
    with serving_sockets(LARGEST, frames_per_second=1e9) as bound:
        yield bound


def handshake(port: int, source: str = "127.0.0.1", path: str = "/ws") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), source_address=(source, 0), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET {path} HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    assert head.startswith(b"HTTP/1.1 101"), head
    return sock


def frame(opcode: Any, data: bytes, fin: bool) -> bytes:
    return Frame(opcode, data, fin=fin).serialize(mask=True)


def closed_with(sock: socket.socket, wait: float) -> Close | None:
    """The close frame the server sent within ``wait`` seconds, or None (still open).

    The server's frames are unmasked; its messages (a seat's turn) are skipped.
    """
    sock.settimeout(wait)
    try:
        while True:
            first, second = exact(sock, 2)
            length = second & 0x7F
            if length >= 126:
                length = int.from_bytes(exact(sock, 2 if length == 126 else 8), "big")
            payload = exact(sock, length)
            if first & 0x0F == Opcode.CLOSE.value:
                return Close.parse(payload)
    except TimeoutError:
        return None


def exact(sock: socket.socket, size: int) -> bytes:
    data = b""
    while len(data) < size:
        chunk = sock.recv(size - len(data))
        assert chunk, "the server dropped the socket without a close frame"
        data += chunk
    return data


def still_open(held: list[socket.socket]) -> bool:
    time.sleep(0.3)
    return all(closed_with(sock, 0.01) is None for sock in held)


@contextlib.contextmanager
def sockets(port: int, count: int, source: str = "127.0.0.1") -> Iterator[list[socket.socket]]:
    held: list[socket.socket] = []
    try:
        for _ in range(count):
            held.append(handshake(port, source))
        yield held
    finally:
        for sock in held:
            sock.close()
        time.sleep(0.2)  # the server has let them go


def test_unfinished_messages_past_a_client_s_share_close_its_socket(port: int) -> None:
    with sockets(port, 17) as held:
        for sock in held[:16]:
            sock.sendall(frame(Opcode.TEXT, b"a" * PIECE, fin=False))
        assert still_open(held[:16])
        held[16].sendall(frame(Opcode.TEXT, b"a" * PIECE, fin=False))
        close = closed_with(held[16], 10)
        assert close is not None and close.code == TRY_LATER
        assert "127.0.0.1" in close.reason and "past its share" in close.reason
        # Another client has its own share, and the first one's sockets stay open.
        with sockets(port, 2, source="127.0.0.2") as others:
            for sock in others:
                sock.sendall(frame(Opcode.BINARY, b"b" * PIECE, fin=False))
            assert still_open(others)
        assert still_open(held[:16])
    # Closed sockets give their bytes back: the same client holds 16 again.
    with sockets(port, 16) as again:
        for sock in again:
            sock.sendall(frame(Opcode.TEXT, b"a" * PIECE, fin=False))
        assert still_open(again)


def test_a_frame_still_arriving_and_whole_messages_not_taken_count_too(port: int) -> None:
    with sockets(port, 20) as held:
        for sock in held[:8]:  # whole messages, fragmented, that the app never takes: 37,120
            sock.sendall(frame(Opcode.TEXT, b"c" * (PIECE // 2), fin=False))
            sock.sendall(frame(Opcode.CONT, b"c" * (PIECE // 2), fin=True))
        for sock in held[8:16]:  # half of a frame each, held by the parser: 16,000
            sock.sendall(frame(Opcode.BINARY, b"c" * PIECE, fin=True)[: 8 + PIECE // 2])
        for sock in held[16:19]:  # 12,192 more: 65,312 of the share's 65,536
            sock.sendall(frame(Opcode.TEXT, b"d" * PIECE, fin=False))
        assert still_open(held[:19])
        held[19].sendall(frame(Opcode.TEXT, b"d" * PIECE, fin=False))
        close = closed_with(held[19], 10)
        assert close is not None and close.code == TRY_LATER


def test_empty_messages_count_what_carries_them(port: int) -> None:
    """A read of empty messages queues thousands of events: each counts MESSAGE_OVERHEAD."""
    empties = frame(Opcode.TEXT, b"", fin=True) * (SHARE // MESSAGE_OVERHEAD + 1)
    with sockets(port, 1) as held:
        held[0].sendall(empties)  # 6 bytes each on the wire
        close = closed_with(held[0], 10)
        assert close is not None and close.code == TRY_LATER


def test_empty_fragments_count_what_carries_them(port: int) -> None:
    empties = frame(Opcode.CONT, b"", fin=False) * (SHARE // FRAME_OVERHEAD + 1)
    with sockets(port, 1) as held:
        held[0].sendall(frame(Opcode.TEXT, b"f", fin=False) + empties)
        close = closed_with(held[0], 10)
        assert close is not None and close.code == TRY_LATER


def test_a_socket_closed_past_the_budget_leaves_its_messages_untaken(port: int) -> None:
    """The read that passed the bound is dropped whole, its whole messages untaken.

    A client told to try again later had its message acted on all the same, and
    acted twice when it did.
    """
    # (A client of its own: the sockets of other tests that hold a message the app
    # never takes stay open on the server, their reading paused, until the keepalive.)
    with sockets(port, 16, source="127.0.0.3") as held:
        for sock in held:  # 16 x 4,064 = 65,024 of the share's 65,536
            sock.sendall(frame(Opcode.TEXT, b"g" * PIECE, fin=False))
        assert still_open(held)
        late = handshake(port, "127.0.0.3", path="/late?refused")
        try:  # 4,000 + 64 + 512 more, whole, in one read
            late.sendall(frame(Opcode.TEXT, b"h" * PIECE, fin=True))
            close = closed_with(late, 10)
            assert close is not None and close.code == TRY_LATER
        finally:
            late.close()
    time.sleep(1)  # the app has looked
    assert TAKEN["refused"] == ["websocket.disconnect"]
    with sockets(port, 0):  # and a message within the share is taken
        late = handshake(port, "127.0.0.3", path="/late?taken")
        late.sendall(frame(Opcode.TEXT, b"h" * PIECE, fin=True))
        time.sleep(1)
        late.close()
    time.sleep(0.5)
    assert TAKEN["taken"][0] == "websocket.receive"


def test_no_compression_is_negotiated(port: int) -> None:
    """A deflated read of 64 KiB held 63 MiB of messages before anything could count them."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    key = base64.b64encode(os.urandom(16)).decode()
    sock.sendall(
        f"GET /ws HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n"
        "Sec-WebSocket-Extensions: permessage-deflate; client_max_window_bits\r\n\r\n".encode()
    )
    head = b""
    while b"\r\n\r\n" not in head:
        head += sock.recv(1)
    sock.close()
    assert head.startswith(b"HTTP/1.1 101"), head
    assert b"permessage-deflate" not in head.lower(), head


def test_a_peer_that_sends_pings_and_never_reads_is_not_read_either() -> None:
    """The server stops reading a peer that sends pings and never reads their pongs.

    Each pong was written to the transport at once: 418 MiB of pings from a peer
    that never read grew the server by 400 MB. (No pace here: it would slow the
    pings down, not stop them.)
    """
    pings = frame(Opcode.PING, b"p" * 125, fin=True) * 2000  # 262 KB
    with serving_sockets(1 << 20, frames_per_second=1e9) as bound:
        held = handshake(bound)
        held.settimeout(3)
        sent = 0
        try:
            while sent < 128 << 20:
                held.sendall(pings)
                sent += len(pings)
        except TimeoutError:
            pass  # the server stopped reading: the kernel's buffers are full
        finally:
            held.close()
    assert sent < 48 << 20, (
        f"the server took {sent >> 20} MiB of pings from a peer that never reads"
    )


def test_one_client_s_frames_are_parsed_at_its_pace() -> None:
    """Empty frames cost nothing to send and the event loop microseconds each.

    300,000 a second from one client held every other client's request for seconds.
    A read is parsed whole once the client may send more (up to 256 KiB, about 43,000
    empty frames), so 80,000 take at least (80,000 - 10,000 - 43,000) / 10,000 s.
    """
    pongs = frame(Opcode.PONG, b"", fin=True) * 80_000  # 480 KB; parsed unpaced in 0.3 s
    with serving_sockets(1 << 20) as bound:
        held = handshake(bound)
        try:
            started = time.perf_counter()
            held.sendall(pongs + frame(Opcode.PING, b"last", fin=True))
            held.settimeout(60)
            answer = exact(held, 6)  # the last ping's pong: parsed after every pong before it
            took = time.perf_counter() - started
        finally:
            held.close()
    assert answer[0] & 0x0F == Opcode.PONG.value and answer.endswith(b"last")
    assert took >= 2.5, f"80,000 frames parsed in {took:.2f} s: no pace"


class CountingProtocol(BoundedWebSocketProtocol):
    """Notes how many frames each parse of a read handled."""

    parses: ClassVar[list[int]] = []

    def handle_events(self) -> None:
        self.parses.append(len(self.conn.events))
        super().handle_events()


def test_a_read_is_parsed_in_pieces_of_the_client_s_allowance() -> None:
    """No parse handles more frames than the client's allowance (10,000).

    Attack round 12: a read of 256,000 bytes of empty frames (42,667) was parsed in
    one callback of 135 to 262 ms once the client's allowance was above zero.
    """
    with serving_sockets(1 << 20, protocol=CountingProtocol) as bound:
        held = handshake(bound)
        held.sendall(frame(Opcode.PONG, b"", fin=True) * 30_000 + frame(Opcode.PING, b"z", True))
        held.settimeout(30)
        assert exact(held, 3).endswith(b"z")  # every frame parsed
        held.close()
    assert sum(CountingProtocol.parses) >= 30_001
    assert max(CountingProtocol.parses) <= 10_000, sorted(CountingProtocol.parses)[-5:]


def test_the_episode_server_counts_its_seat_sockets(tmp_path: Any) -> None:
    """The real server's sockets are bounded: 17 unfinished seat messages of one client."""
    settings = debate_settings(records=str(tmp_path), max_body_bytes=LARGEST)
    with serving(settings) as url, httpx.Client(base_url=url, timeout=30) as client:
        port = int(url.rsplit(":", 1)[1])
        paths = []
        for _ in range(2):  # 3 seats x 4 sockets each: 12 a debate
            episode = create(client)
            for seat in episode["seats"]:
                joined = client.post(f"/episodes/{episode['id']}/seats/{seat}/join")
                token = joined.json()["token"]
                paths += [f"/episodes/{episode['id']}/seats/{seat}/ws?token={token}"] * 4
        held = [handshake(port, path=path) for path in paths[:17]]
        try:
            for sock in held[:16]:
                sock.sendall(frame(Opcode.TEXT, b"e" * PIECE, fin=False))
            assert still_open(held[:16])
            held[16].sendall(frame(Opcode.TEXT, b"e" * PIECE, fin=False))
            close = closed_with(held[16], 10)
            assert close is not None and close.code == TRY_LATER
        finally:
            for sock in held:
                sock.close()
