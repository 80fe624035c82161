"""The guard alone, as ASGI: any token taken in either form, any chunking of a body counted."""

from __future__ import annotations

import asyncio
import base64
import string

from hypothesis import given
from hypothesis import strategies as st

from llm_envs.serve.guard import Guard

CAP = 100
TOKENS = st.text(alphabet=string.ascii_letters + string.digits + string.punctuation, min_size=1)


async def call(guard: Guard, headers: list[tuple[bytes, bytes]], chunks: list[bytes]):
    """The status the guard (or the app behind it) answers, and the body the app read."""
    seen: list[bytes] = []

    async def app(scope, receive, send):
        message = await receive()
        seen.append(message["body"])
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b""})

    guard.app = app
    pending = [
        {"type": "http.request", "body": c, "more_body": i < len(chunks) - 1}
        for i, c in enumerate(chunks or [b""])
    ]
    sent: list[dict] = []

    async def receive():
        return pending.pop(0) if pending else {"type": "http.disconnect"}

    async def send(message):
        sent.append(message)

    scope = {"type": "http", "path": "/episodes", "headers": headers, "raw_path": b"/episodes"}
    await guard(scope, receive, send)
    return sent[0]["status"], seen


@given(token=TOKENS, other=TOKENS)
def test_any_token_is_taken_as_bearer_or_basic_and_no_other_is(token, other):
    guard = Guard(lambda *_: None, token=token, max_body_bytes=CAP)  # type: ignore[arg-type]
    basic = base64.b64encode(f"anyone:{token}".encode()).decode()
    for given_header, expected in [
        (f"Bearer {token}", 200),
        (f"bearer {token}", 200),
        (f"Basic {basic}", 200),
        (f"Bearer {other}", 200 if other == token else 401),
        (f"Bearer {token}x", 401),
        (token, 401),
    ]:
        headers = [(b"authorization", given_header.encode())]
        assert asyncio.run(call(guard, headers, [b"{}"]))[0] == expected
    assert asyncio.run(call(guard, [], [b"{}"]))[0] == 401


@given(sizes=st.lists(st.integers(0, 60), max_size=8), told=st.booleans())
def test_a_body_in_any_chunks_reaches_the_app_whole_or_is_413(sizes, told):
    guard = Guard(lambda *_: None, token=None, max_body_bytes=CAP)  # type: ignore[arg-type]
    chunks = [bytes([65 + i]) * n for i, n in enumerate(sizes)]
    body = b"".join(chunks)
    headers = [(b"content-length", str(len(body)).encode())] if told else []
    status, seen = asyncio.run(call(guard, headers, chunks))
    if len(body) <= CAP:
        assert (status, seen) == (200, [body])
    else:
        assert (status, seen) == (413, [])
