"""What the guard holds for requests before the app answers them, and the routes it closes.

Attack round 9: bodies were read whole before routing with no bound but the
size of one, so connections that each sent all but the last byte of a body to
``/health`` (answered without the token) held ``--max-body-bytes`` apiece, and
OpenEnv's MCP routes created sessions outside ``--max-sessions-per-client``.
"""

from __future__ import annotations

import asyncio

from hypothesis import given
from hypothesis import strategies as st

from llm_envs.serve.guard import Guard

CAP = 100


class Request:
    """One request from ``host`` to ``path``: its head, then its chunks, the last when released."""

    def __init__(self, host: str, chunks: list[bytes], declared: int | None, path: str) -> None:
        self.sent: list[dict] = []
        self.release = asyncio.Event()
        self.pending = [
            {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
            for i, c in enumerate(chunks)
        ]
        headers = [] if declared is None else [(b"content-length", str(declared).encode())]
        self.scope = {
            "type": "http",
            "path": path,
            "raw_path": path.encode(),
            "headers": headers,
            "client": (host, 40000),
        }

    async def receive(self) -> dict:
        if len(self.pending) == 1:
            await self.release.wait()  # the body's last chunk comes when the test says
        return self.pending.pop(0) if self.pending else {"type": "http.disconnect"}

    async def send(self, message: dict) -> None:
        self.sent.append(message)

    @property
    def status(self) -> int | None:
        return self.sent[0]["status"] if self.sent else None


async def answered(guard: Guard, request: Request) -> int | None:
    """The status ``guard`` answers ``request`` (a guard that waits for the body: fails in 5 s)."""
    await asyncio.wait_for(guard(request.scope, request.receive, request.send), 5)
    return request.status


def guard_with_app(**bounds) -> tuple[Guard, list[bytes]]:
    read: list[bytes] = []

    async def app(scope, receive, send):
        read.append((await receive())["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    return Guard(app, token=None, max_body_bytes=CAP, **bounds), read


def test_one_client_holds_at_most_its_share_of_the_bodies_being_read_and_others_are_served():
    async def scenario():
        guard, _ = guard_with_app(max_buffered_bytes=8 * CAP)  # a client's share: 2 bodies of CAP
        slow = [Request("127.0.0.1", [b"x", b"y" * (CAP - 1)], CAP, "/episodes") for _ in range(3)]
        tasks = [asyncio.create_task(answered(guard, r)) for r in slow]
        await asyncio.sleep(0.01)
        assert slow[2].status == 503  # its third body is past its share, refused unread
        assert "past one client's 200" in slow[2].sent[1]["body"].decode()
        other = Request("127.0.0.2", [b"z" * CAP], CAP, "/episodes")
        other.release.set()
        assert await answered(guard, other) == 200
        for request in slow:
            request.release.set()
        assert await asyncio.gather(*tasks) == [200, 200, 503]
        again = [Request("127.0.0.1", [b"x" * CAP], CAP, "/episodes") for _ in range(2)]
        for request in again:  # the share came back when the requests were answered
            request.release.set()
        assert await asyncio.gather(*(answered(guard, r) for r in again)) == [200, 200]

    asyncio.run(scenario())


def test_the_servers_bound_holds_across_clients_and_undeclared_bodies_count_as_they_come():
    async def scenario():
        guard, _ = guard_with_app(max_buffered_bytes=4 * CAP)  # a client's share: one body
        hosts = [f"127.0.0.{i}" for i in range(1, 6)]
        held = [Request(h, [b"x" * CAP, b""], None, "/episodes") for h in hosts]
        tasks = [asyncio.create_task(answered(guard, r)) for r in held]
        await asyncio.sleep(0.01)
        assert [r.status for r in held] == [None, None, None, None, 503]
        assert "past its 400" in held[4].sent[1]["body"].decode()
        for request in held:
            request.release.set()
        assert await asyncio.gather(*tasks) == [200, 200, 200, 200, 503]

    asyncio.run(scenario())


@given(sizes=st.lists(st.integers(0, 60), max_size=6), told=st.booleans())
def test_a_body_within_the_bounds_reaches_the_app_whole_and_gives_its_bytes_back(sizes, told):
    guard, read = guard_with_app(max_buffered_bytes=CAP)
    chunks = [bytes([65 + i]) * n for i, n in enumerate(sizes)] or [b""]
    body = b"".join(chunks)

    async def twice():
        statuses = []
        for _ in range(2):  # the second finds the bytes the first held given back
            request = Request("127.0.0.1", chunks, len(body) if told else None, "/episodes")
            request.release.set()
            statuses.append(await answered(guard, request))
        return statuses

    statuses = asyncio.run(twice())
    assert statuses == ([200, 200] if len(body) <= CAP else [413, 413])
    assert read == ([body, body] if len(body) <= CAP else [])


def test_the_open_health_path_takes_no_body_and_reads_none():
    guard, read = guard_with_app()
    request = Request("127.0.0.1", [b"x" * CAP], CAP, "/health")
    assert asyncio.run(answered(guard, request)) == 413  # answered before any byte is read
    assert request.pending and read == []


def test_openenv_mcp_is_not_served_over_http_or_websocket():
    guard, read = guard_with_app()
    request = Request("127.0.0.1", [b"{}"], 2, "/openenv/mcp")
    request.release.set()
    assert asyncio.run(answered(guard, request)) == 404
    closed: list[dict] = []

    async def socket():
        async def receive():
            return {"type": "websocket.connect"}

        async def send(message):
            closed.append(message)

        scope = {"type": "websocket", "path": "/openenv/mcp", "headers": [], "client": ("::1", 1)}
        await guard(scope, receive, send)

    asyncio.run(socket())
    assert read == [] and closed[0]["type"] == "websocket.close" and closed[0]["code"] == 4404
