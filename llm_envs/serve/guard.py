"""The door every request and socket of the episode server passes first: its token and its size.

:class:`Guard` wraps the whole app (the hub's routes, the rendezvous and the
OpenEnv view mounted under ``/openenv``), so no route can be added that it
does not cover:

* a request whose path and headers exceed :data:`MAX_HEAD_BYTES` is refused
  (431);
* with a token set, a request or a socket without it is refused (401; a
  socket's handshake is refused with 401 too) before any route runs, the
  token compared in constant time; ``GET /health`` alone stays open, for
  probes that carry no credentials (it tells episode counts, nothing more);
* an HTTP body larger than ``max_body_bytes`` is refused with 413 whether it
  says its length (``Content-Length``) or streams it (chunked): it is read,
  and counted, before a route sees it;
* what a request starts counts as its peer's address's
  (:func:`~llm_envs.sandbox.fair.client_key`), never a header's: the hub's
  step threads and the sandbox's workers serve clients in turn;
* a WebSocket message larger than ``max_body_bytes`` closes the socket with
  code 1009 (message too big). The server's own WebSocket layer is given the
  same bound (:func:`uvicorn_limits`), so such a message is never buffered
  whole, and counts the messages its sockets buffer
  (:mod:`llm_envs.serve.sockets`); this check holds where another server runs
  the app.

:func:`check_exposure` refuses a server that listens beyond loopback without a
token. Nothing here knows episodes.
"""

from __future__ import annotations

import base64
import binascii
import functools
import hmac
import ipaddress
import json
import os
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from llm_envs.sandbox.fair import as_client, client_key, current_client, tally

__all__ = [
    "MAX_HEAD_BYTES",
    "OPEN_PATHS",
    "TOKEN_VARIABLE",
    "Guard",
    "check_exposure",
    "is_loopback",
    "token_from_environment",
    "uvicorn_limits",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

TOKEN_VARIABLE = "LLM_ENVS_SERVE_TOKEN"
"""The environment variable a server (``--token``) and its clients read the token from."""
OPEN_PATHS = frozenset({"/health"})
"""Paths answered without the token: a liveness probe carries none (nor a body: 413 unread)."""
CLOSED_PATHS = frozenset({"/openenv/mcp"})
"""OpenEnv's routes the server does not serve (404, HTTP and WebSocket): its MCP
sessions are created over plain HTTP, outside ``--max-sessions-per-client``'s
count of ``/openenv/ws`` sockets, and the view offers no MCP tools."""
BUFFERED_SHARE = 4
"""One client may buffer a ``1/BUFFERED_SHARE`` of the request bodies the server buffers."""
MAX_HEAD_BYTES = 64 * 1024
"""The most bytes of a request's path and headers taken (431); the HTTP parser stops
buffering a head that arrives in pieces past about this size (400)."""
TOO_BIG = 1009
"""The WebSocket close code of a message over the size limit (RFC 6455: message too big)."""


def is_loopback(host: str) -> bool:
    """Whether ``host`` is reachable from this machine only (``127.0.0.1``, ``::1``, ``localhost``).

    Example:
        >>> is_loopback("127.0.0.1"), is_loopback("localhost"), is_loopback("0.0.0.0")
        (True, True, False)
    """
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:  # a name: it may resolve anywhere
        return False


def check_exposure(host: str, token: str | None) -> None:
    """Refuse to serve beyond loopback without a token.

    Raises:
        ValueError: ``host`` is not loopback and ``token`` is None or empty.
    """
    if not token and not is_loopback(host):
        raise ValueError(
            f"--host {host} listens beyond this machine, and anyone who reaches it could play "
            f"and create episodes: give clients a secret with --token (or the {TOKEN_VARIABLE} "
            "environment variable), or listen on 127.0.0.1"
        )


def token_from_environment(token: str | None) -> str | None:
    """``token``, else the :data:`TOKEN_VARIABLE` environment variable, else None."""
    return token or os.environ.get(TOKEN_VARIABLE) or None


def uvicorn_limits(
    max_body_bytes: int,
    max_connections: int | None = None,
    max_per_address: int | None = None,
) -> dict[str, Any]:
    """The settings of uvicorn that bound what it buffers before the app sees a request.

    No proxy headers: a client is its socket's peer. uvicorn trusts
    ``X-Forwarded-For`` from 127.0.0.1 by default, which would let a local
    client (or a forwarder's remote ones) choose the key its shares count in.
    A request's head, its timing and the open connections, in all and per
    client: httptools with bounds of ours
    (:class:`~llm_envs.serve.heads.BoundedHttpToolsProtocol`; None: its
    defaults), or h11, which bounds a head itself but parses several times
    slower and bounds neither time nor connections, where httptools is not
    installed. A WebSocket message: ``ws_max_size``; the messages all
    sockets buffer until the app takes them, 64 of ``max_body_bytes`` and a
    quarter of that per client, and the pongs of a peer that does not read
    (:class:`~llm_envs.serve.sockets.BoundedWebSocketProtocol`); and no
    compression (per-message deflate), so that what a socket buffers is what
    its peer sent, not a thousand times that.
    """
    from llm_envs.serve.sockets import BoundedWebSocketProtocol, MessageBudget

    socket = functools.partial(
        BoundedWebSocketProtocol, budget=MessageBudget(64 * max_body_bytes, max_body_bytes)
    )
    limits = {
        "ws": socket,
        "ws_max_size": max_body_bytes,
        "ws_per_message_deflate": False,  # else one read of 64 KiB inflates to 64 messages
        "proxy_headers": False,
    }
    try:
        from llm_envs.serve.heads import BoundedHttpToolsProtocol, default_max_connections
    except ImportError:  # uvicorn without httptools
        return {**limits, "http": "h11", "h11_max_incomplete_event_size": MAX_HEAD_BYTES}
    protocol = functools.partial(
        BoundedHttpToolsProtocol,
        max_connections=max_connections or default_max_connections(),
        max_per_address=max_per_address,
        per_address={},  # this server's connections by client
    )
    return {**limits, "http": protocol}


def _header(scope: Scope, name: bytes) -> bytes | None:
    for key, value in scope.get("headers", ()):
        if key.lower() == name:
            return bytes(value)
    return None


def _presented(scope: Scope) -> bytes | None:
    """The token a request carries: ``Authorization: Bearer T``, or Basic with password ``T``."""
    given = _header(scope, b"authorization")
    if given is None:
        return None
    scheme, _, value = given.strip().partition(b" ")
    if scheme.lower() == b"bearer":
        return value.strip()
    if scheme.lower() == b"basic":  # a URL's userinfo (http://any:TOKEN@host): header-less clients
        try:
            return base64.b64decode(value.strip(), validate=True).partition(b":")[2]
        except (binascii.Error, ValueError):
            return None
    return None


class Guard:
    """ASGI middleware: the token on every request and socket, and the size of what they send.

    Args:
        app: the server's app.
        token: the secret every request must carry; None serves anyone.
        max_body_bytes: the largest HTTP body, and WebSocket message, taken.
        max_sessions_per_client: OpenEnv sessions (sockets of ``sessions_path``)
            one client holds at once; past it, the handshake is refused (503),
            so that one client cannot hold every session (None: no bound).
        sessions_path: the OpenEnv view's session socket.
        max_buffered_bytes: the request bodies held at once, read or being
            read, until their requests are answered (by their declared
            length, else as they arrive); past it 503, and past a quarter
            of it for one client (None: 64 bodies of ``max_body_bytes``).
            Without it, connections that each send all but the last byte of
            a body hold ``max_body_bytes`` apiece.
    """

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str | None,
        max_body_bytes: int,
        max_sessions_per_client: int | None = None,
        sessions_path: str = "/openenv/ws",
        max_buffered_bytes: int | None = None,
    ) -> None:
        if max_body_bytes < 1:
            raise ValueError(f"max_body_bytes must be >= 1, got {max_body_bytes}")
        if max_sessions_per_client is not None and max_sessions_per_client < 1:
            raise ValueError(f"max_sessions_per_client must be >= 1, got {max_sessions_per_client}")
        self.app = app
        self.token = token.encode() if token else None
        self.max_body_bytes = max_body_bytes
        self.max_sessions_per_client = max_sessions_per_client
        self.sessions_path = sessions_path
        self.max_buffered_bytes = max_buffered_bytes or 64 * max_body_bytes
        self._sessions: dict[str, int] = {}  # open session sockets by client (the loop's only)
        self._buffered: dict[str, int] = {}  # body bytes held by client (the loop's only)
        self._buffered_total = 0

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Refuse, or pass the request on (its body read and counted first) as its peer's.

        What the request starts counts as the client its peer address is
        (:func:`~llm_envs.sandbox.fair.client_key`, set for
        :func:`~llm_envs.sandbox.fair.current_client`): the episodes it creates
        take their turns at step threads and sandbox workers as that client.
        """
        kind = scope["type"]
        if kind not in ("http", "websocket"):
            await self.app(scope, receive, send)
            return
        with as_client(client_key((scope.get("client") or ("", 0))[0])):
            await self._guarded(scope, receive, send)

    async def _guarded(self, scope: Scope, receive: Receive, send: Send) -> None:
        kind = scope["type"]
        head = len(scope.get("raw_path") or b"") + len(scope.get("query_string") or b"")
        head += sum(len(k) + len(v) + 4 for k, v in scope.get("headers", ()))
        if head > MAX_HEAD_BYTES:
            detail = (
                f"the request's line and headers are {head} bytes, over the server's limit of "
                f"{MAX_HEAD_BYTES}: send fewer or shorter headers"
            )
            await self._refuse(scope, receive, send, 431, detail)
            return
        if not self._authorized(scope):
            await self._refuse(scope, receive, send, 401, self._unauthorized())
            return
        if scope.get("path") in CLOSED_PATHS:
            detail = "not served here: the OpenEnv view's sessions are its WebSocket, /openenv/ws"
            await self._refuse(scope, receive, send, 404, detail)
            return
        if kind == "websocket":
            if scope.get("path") != self.sessions_path or self.max_sessions_per_client is None:
                await self._socket(scope, receive, send)
                return
            client = current_client()
            held = self._sessions.get(client, 0)
            if held >= self.max_sessions_per_client:
                detail = (
                    f"client {client} holds {held} OpenEnv sessions, the most one client may "
                    f"(--max-sessions-per-client {self.max_sessions_per_client}); close one first"
                )
                await self._refuse(scope, receive, send, 503, detail)
                return
            tally(self._sessions, client, 1)
            try:
                await self._socket(scope, receive, send)
            finally:
                tally(self._sessions, client, -1)
            return
        length = _header(scope, b"content-length")
        declared = int(length) if length is not None and length.strip().isdigit() else None
        if declared is not None and declared > self.max_body_bytes:
            await _respond(send, 413, self._too_large(f"{declared} bytes"))
            return
        if scope.get("path") in OPEN_PATHS and (declared or _header(scope, b"transfer-encoding")):
            await _respond(send, 413, f"{scope['path']} takes no body: send none")
            return
        client = current_client()
        held = 0  # this request's part of the buffered bytes, given back once it is answered
        try:
            if declared:
                if refusal := self._buffer(client, declared):
                    await _respond(send, 503, refusal)
                    return
                held = declared
            chunks: list[bytes] = []
            size = 0
            while True:
                message = await receive()
                if message["type"] != "http.request":  # the client left before its body ended
                    return
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > self.max_body_bytes:
                    detail = self._too_large(f"more than {self.max_body_bytes} bytes")
                    await _respond(send, 413, detail)
                    return
                if size > held:  # no declared length, or more than declared: count it as it comes
                    if refusal := self._buffer(client, size - held):
                        await _respond(send, 503, refusal)
                        return
                    held = size
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
            await self.app(scope, _replay(b"".join(chunks), receive), send)
        finally:
            self._buffered_total -= held
            tally(self._buffered, client, -held)

    def _buffer(self, client: str, more: int) -> str | None:
        """Count ``more`` bytes of bodies as ``client``'s, or say which bound refuses them."""
        mine = self._buffered.get(client, 0)
        share = max(self.max_buffered_bytes // BUFFERED_SHARE, self.max_body_bytes)
        if mine + more > share:
            return (
                f"client {client}'s requests hold {mine} bytes of bodies and this one takes "
                f"{more} more: past one client's {share}; retry when they are answered"
            )
        if self._buffered_total + more > self.max_buffered_bytes:
            return (
                f"the server holds {self._buffered_total} bytes of request bodies, and this one "
                f"takes {more} more: past its {self.max_buffered_bytes}; retry shortly"
            )
        self._buffered_total += more
        tally(self._buffered, client, more)
        return None

    def _authorized(self, scope: Scope) -> bool:
        if self.token is None or (scope["type"] == "http" and scope["path"] in OPEN_PATHS):
            return True
        given = _presented(scope)
        return given is not None and hmac.compare_digest(given, self.token)

    async def _socket(self, scope: Scope, receive: Receive, send: Send) -> None:
        closed = False

        async def bounded_receive() -> Message:
            nonlocal closed
            message = await receive()
            if message["type"] == "websocket.receive" and self._oversized(message):
                closed = True
                reason = f"message over {self.max_body_bytes} bytes (--max-body-bytes)"
                await send({"type": "websocket.close", "code": TOO_BIG, "reason": reason})
                return {"type": "websocket.disconnect", "code": TOO_BIG}
            return message

        async def quiet_send(message: Message) -> None:
            if not closed:  # the app answers a socket the guard closed: nobody hears it
                await send(message)

        await self.app(scope, bounded_receive, quiet_send)

    def _oversized(self, message: Message) -> bool:
        text, data = message.get("text"), message.get("bytes")
        if text is not None:
            # Characters bound bytes from below and a quarter of them from above.
            if len(text) * 4 <= self.max_body_bytes:
                return False
            return (
                len(text) > self.max_body_bytes
                or len(text.encode("utf-8", "surrogatepass")) > self.max_body_bytes
            )
        return data is not None and len(data) > self.max_body_bytes

    async def _refuse(
        self, scope: Scope, receive: Receive, send: Send, status: int, detail: str
    ) -> None:
        if scope["type"] == "http":
            extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
            await _respond(send, status, detail, extra)
            return
        # A socket's handshake is answered with the status where the server can
        # (the ASGI extension); else it is closed before it opens (HTTP 403).
        if "websocket.http.response" in scope.get("extensions", {}):
            await _respond(send, status, detail, [], prefix="websocket.http.response")
        else:
            await send({"type": "websocket.close", "code": 4000 + status, "reason": "unauthorized"})

    def _unauthorized(self) -> str:
        return (
            "this server takes requests with its token only: send the header "
            '"Authorization: Bearer <token>" (the token the server was started with, --token '
            f"or {TOKEN_VARIABLE}); a client that cannot set headers puts it in the URL, "
            "http://token:<token>@host:port"
        )

    def _too_large(self, size: str) -> str:
        return (
            f"the request's body is {size}, over this server's limit of {self.max_body_bytes} "
            "bytes: send less, or start the server with a larger --max-body-bytes"
        )


def _replay(body: bytes, receive: Receive) -> Receive:
    """``receive`` whose first message is the whole body, already read."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _respond(
    send: Send,
    status: int,
    detail: str,
    headers: list[tuple[bytes, bytes]] | None = None,
    *,
    prefix: str = "http.response",
) -> None:
    body = json.dumps({"detail": detail}).encode()
    head = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
        *(headers or []),
    ]
    await send({"type": f"{prefix}.start", "status": status, "headers": head})
    await send({"type": f"{prefix}.body", "body": body})
